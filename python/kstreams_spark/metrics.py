"""Reading the operators' counters from a streaming query's progress.

Every operator counts, per micro-batch, the records it forwarded and those it dropped by reason
(``duplicates_dropped``, ``late_dropped``; ``null_timestamps_skipped`` with
``on_null_timestamp="skip"``). They are observed metrics of the query, named
``kstreams_<operator>_<n>``, so they also appear in ``query.lastProgress["observedMetrics"]``.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, Iterable


def operator_metrics(progresses: Iterable[Dict[str, Any]]) -> Dict[str, Dict[str, int]]:
    """Sums the kstreams counters over query progress reports (e.g. ``query.recentProgress``).

    >>> operator_metrics(query.recentProgress)
    {'kstreams_deduplicate_by_key_1': {'forwarded': 980, 'duplicates_dropped': 20}}
    """
    totals: Dict[str, Dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for progress in progresses:
        for name, row in (progress["observedMetrics"] or {}).items():
            if name.startswith("kstreams_"):
                values = row.asDict() if hasattr(row, "asDict") else dict(row)
                for metric, value in values.items():
                    totals[name][metric] += int(value or 0)
    return {name: dict(values) for name, values in totals.items()}
