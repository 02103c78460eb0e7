"""Reading the operators' counters from a streaming query's progress.

Every operator counts, per micro-batch, the records it forwarded and those it dropped by reason
(``duplicates_dropped``, ``late_dropped``; tables and aggregations:
``idempotent-updates-dropped``, ``null_keys_dropped``, ``null_values_dropped``). They are observed
metrics of the query, named ``kstreams_<operator>`` (e.g. ``kstreams_deduplicate_by_key``,
``kstreams_to_table``; records skipped for a null timestamp with ``on_null_timestamp="skip"`` are
counted before any operator, as ``null_timestamps_skipped`` of ``kstreams_null_timestamps``; a second
use of the same operator whose inputs meet in one operator gets ``_2``, ``_3``...), so they also
appear in ``query.lastProgress["observedMetrics"]``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from kstreams_spark.errors import KStreamsError


def operator_metrics(
    progresses: Iterable[dict[str, Any]], rates: bool = False
) -> dict[str, dict[str, float]]:
    """Sums the kstreams counters over query progress reports (e.g. ``query.recentProgress``).
    With ``rates=True`` each counter also gets ``<counter>-rate``: its total per second of
    micro-batch time (as Kafka Streams' ``-total`` / ``-rate`` pairs, e.g.
    ``idempotent-updates-dropped`` and ``idempotent-updates-dropped-rate``).

    >>> progress = {"observedMetrics": {"kstreams_deduplicate_by_key": {"forwarded": 3, "duplicates_dropped": 2}}}
    >>> operator_metrics([progress, progress])
    {'kstreams_deduplicate_by_key': {'forwarded': 6, 'duplicates_dropped': 4}}

    Args:
        progresses: query progress reports, e.g. ``query.recentProgress`` or ``[query.lastProgress]``.
        rates: True to give each counter also ``<counter>-rate``, its total per second of micro-batch time.

    Returns:
        The summed counters of each operator's observed metric (``kstreams_<operator>``), by counter name.

    Raises:
        KStreamsError: if ``progresses`` is a single report (a dict) or not iterable.
    """
    if isinstance(progresses, dict) or not isinstance(progresses, Iterable):
        raise KStreamsError(
            "operator_metrics takes a list of progress reports, e.g. query.recentProgress or "
            f"[query.lastProgress], got {type(progresses).__name__}"
        )
    progresses = list(progresses)
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for progress in progresses:
        for name, row in (progress["observedMetrics"] or {}).items():
            if name.startswith("kstreams_"):
                for metric, value in _counters(row).items():
                    totals[name][metric] += int(value or 0)
    result: dict[str, dict[str, float]] = {name: dict(values) for name, values in totals.items()}
    if rates:
        seconds = sum(p["batchDuration"] or 0 for p in progresses) / 1000.0
        for values in result.values():
            for metric, total in list(values.items()):
                values[f"{metric}-rate"] = total / seconds if seconds > 0 else 0.0
    return result


def _counters(row: Any) -> dict[str, Any]:
    """An observed metric's counters by name. A classic session's progress gives a Row of them; a
    Spark Connect session's gives the Row's JSON form, ``values`` and ``schema`` (its fields)."""
    values = row.asDict() if hasattr(row, "asDict") else dict(row)
    if set(values) == {"values", "schema"} and isinstance(values["schema"], dict):
        names = [f["name"] for f in values["schema"].get("fields", [])]
        return dict(zip(names, values["values"], strict=True))
    return values
