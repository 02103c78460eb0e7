"""Generated at-least-once event streams, the way producers make duplicates (retries replay
the tail of a send).

Each partition gets a run of events with unique ids (the record key) and event times that drift
out of order. Now and then the producer "fails" after sending a batch and sends the tail of it
again: the same records (key, value, timestamp) at new offsets. A few events arrive late: held up
(a producer that was offline, a slow retry), they reach their partition three files later, with
their original event time, far behind what the partition has already delivered.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from dataclasses import dataclass

BASE = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


@dataclass
class GeneratedStream:
    files: int
    records: int
    unique_events: int
    replayed: int
    late: int
    late_keys: list[str]


def generate(
    folder: str,
    rows: int = 200_000,
    partitions: int = 4,
    files: int = 20,
    replay_probability: float = 0.5,
    max_replay: int = 200,
    out_of_order_ms: int = 2_000,
    late_probability: float = 0.002,
    late_by_files: int = 3,
    seed: int = 42,
) -> GeneratedStream:
    """Writes about ``rows`` JSON records into ``files`` files in ``folder`` (file i is micro-batch
    i when read with maxFilesPerTrigger=1) and returns what it wrote. An event is late with
    ``late_probability``: it goes out at the end of its partition's batch ``late_by_files`` files
    later (so none in the last ones). Three files: behind even Spark's watermark for late events,
    which is the watermark of the micro-batch before.

    Args:
        folder: where the JSON files go (created if missing).
        rows: about how many events to write (before replays).
        partitions: input partitions, each with offsets 0, 1, ... in file order.
        files: files, one micro-batch each.
        replay_probability: the chance that a send's tail is replayed (a producer's retry).
        max_replay: the most records one replay repeats.
        out_of_order_ms: event times vary by up to this much around their send order.
        late_probability: the chance that an event is held back ``late_by_files`` files.
        late_by_files: how many files a late event is held back.
        seed: the random generator's seed (the same seed writes the same files).
    """
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    per_file_per_partition = max(1, rows // (files * partitions))
    offsets = [0] * partitions
    sent: list[list[dict]] = [[] for _ in range(partitions)]
    event_no = 0
    total = replayed = 0
    # per file and partition, the late records that go out there
    held_back: dict[tuple[int, int], list[dict]] = {}
    late_keys: list[str] = []
    for f in range(files):
        lines = []
        for p in range(partitions):
            batch = []
            late_now = held_back.pop((f, p), [])
            for _ in range(per_file_per_partition):
                event_no += 1
                millis = event_no * 5 + rng.randint(-out_of_order_ms, out_of_order_ms)
                ts = BASE + dt.timedelta(milliseconds=millis)
                record = {
                    "key": f"event-{event_no}",
                    "value": json.dumps({"id": event_no, "amount": rng.randint(1, 500)}),
                    "timestamp": ts.isoformat(),
                    "partition": p,
                }
                if f + late_by_files < files and rng.random() < late_probability:
                    held_back.setdefault((f + late_by_files, p), []).append(record)
                    late_keys.append(record["key"])
                else:
                    batch.append(record)
            if rng.random() < replay_probability:
                # the producer did not see the ack: the tail of this batch goes out again
                tail = batch[-rng.randint(1, min(max_replay, len(batch))) :]
                replayed += len(tail)
                batch = batch + [dict(r) for r in tail]
            batch += late_now
            for r in batch:
                r["offset"] = offsets[p]
                offsets[p] += 1
                lines.append(json.dumps(r))
            total += len(batch)
            sent[p].extend(batch)
        path = os.path.join(folder, f"part-{f:05d}.json")
        with open(path, "w") as out:
            out.write("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))
    return GeneratedStream(
        files=files,
        records=total,
        unique_events=event_no,
        replayed=replayed,
        late=len(late_keys),
        late_keys=late_keys,
    )
