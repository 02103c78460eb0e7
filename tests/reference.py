"""A direct, slow transcription of SEMANTICS.md section 2, used as the oracle in tests."""

from __future__ import annotations

from collections.abc import Sequence


def dedup_reference(records: Sequence, interval: float, scope: str = "partition", key=lambda r: r.key):
    """Forwarded records, given records in arrival order (each with key, t, partition, offset).

    scope "partition": state per (partition, key); "global": one entry per key over partitions.
    """
    return dedup_reference_with_late(records, interval, scope, key)[0]


def dedup_reference_with_late(
    records: Sequence, interval: float, scope: str = "partition", key=lambda r: r.key
) -> tuple[list, list]:
    """(forwarded, late): the records rule 4 forwards, and those of them that are late
    (``t < S - interval``), which a ``late_records`` policy other than "forward" takes away."""
    stream_time: dict[int, float] = {}
    store: dict = {}
    out = []
    late = []
    for r in records:
        s = max(stream_time.get(r.partition, float("-inf")), r.t)
        stream_time[r.partition] = s
        k = key(r)
        if k is None:
            out.append(r)
            continue
        sk = (r.partition, k) if scope == "partition" else k
        e = store.get(sk)
        if e is not None and e[0] < s - interval:
            del store[sk]
            e = None
        if e is not None and abs(e[0] - r.t) <= interval:
            if (e[1], e[2]) == (r.partition, r.offset):
                out.append(r)
            continue
        out.append(r)
        if not r.t < s - interval:
            store[sk] = (r.t, r.partition, r.offset)
        else:
            late.append(r)
    return out, late
