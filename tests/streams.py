"""Test helpers: records as in the spec's tables, run through a real Spark query.

A record is written ``key@t`` in the spec; here ``Rec("a", 10)`` (t in seconds, or ``ms=``).
Streaming runs read JSON files with ``maxFilesPerTrigger=1``, so each file is one micro-batch, and
write a Parquet sink (exactly-once) that the test reads back.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

BASE = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
AUTO = "<auto>"  # Rec.value default: "v<index>" in the record list

SCHEMA = T.StructType(
    [
        T.StructField("key", T.StringType()),
        T.StructField("value", T.StringType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
    ]
)


@dataclass
class Rec:
    key: str | None
    t: float | None = None  # seconds after BASE
    partition: int = 0
    offset: int | None = None  # filled in arrival order per partition when None
    value: str | None = AUTO
    ms: int | None = None  # milliseconds after BASE, instead of t

    def timestamp(self) -> dt.datetime | None:
        if self.ms is not None:
            return BASE + dt.timedelta(milliseconds=self.ms)
        if self.t is None:
            return None
        return BASE + dt.timedelta(seconds=self.t)


def with_offsets(records: Sequence[Rec]) -> list[Rec]:
    """Gives records without an offset the next offset of their partition, in list order."""
    next_offset: dict[int, int] = {}
    out = []
    for r in records:
        off = r.offset if r.offset is not None else next_offset.get(r.partition, 0)
        next_offset[r.partition] = max(next_offset.get(r.partition, 0), off + 1)
        out.append(Rec(r.key, r.t, r.partition, off, r.value if r.value != AUTO else f"v{len(out)}", r.ms))
    return out


def row_of(r: Rec) -> tuple:
    return (r.key, r.value, r.timestamp(), r.partition, r.offset)


def batch_df(spark: SparkSession, records: Sequence[Rec]) -> DataFrame:
    return spark.createDataFrame([row_of(r) for r in records], SCHEMA)


def _write_file(path: str, records: Iterable[Rec], mtime: int) -> None:
    with open(path, "w") as f:
        for r in records:
            ts = r.timestamp()
            f.write(
                json.dumps(
                    {
                        "key": r.key,
                        "value": r.value,
                        "timestamp": ts.isoformat() if ts else None,
                        "partition": r.partition,
                        "offset": r.offset,
                    }
                )
                + "\n"
            )
    os.utime(path, (mtime, mtime))


@dataclass
class StreamRun:
    """A streaming query over JSON files, one file per micro-batch, restartable."""

    spark: SparkSession
    root: str
    op: Callable[[DataFrame], DataFrame]
    schema: T.StructType = SCHEMA
    files: int = 0
    progress: list = field(default_factory=list)

    def __post_init__(self) -> None:
        for d in ("in", "out", "checkpoint"):
            os.makedirs(os.path.join(self.root, d), exist_ok=True)

    def add_batch(self, records: Sequence[Rec]) -> None:
        path = os.path.join(self.root, "in", f"batch-{self.files:05d}.json")
        _write_file(path, records, 1_700_000_000 + self.files)
        self.files += 1

    def run(self) -> None:
        """Starts the query from the checkpoint, processes every file there, and stops."""
        source = (
            self.spark.readStream.schema(self.schema)
            .option("maxFilesPerTrigger", 1)
            .json(os.path.join(self.root, "in"))
        )
        query = (
            self.op(source)
            .writeStream.format("parquet")
            .option("path", os.path.join(self.root, "out"))
            .option("checkpointLocation", os.path.join(self.root, "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        self.progress.extend(query.recentProgress)

    def output(self) -> DataFrame:
        return self.spark.read.parquet(os.path.join(self.root, "out"))


def forwarded(df: DataFrame) -> list[tuple]:
    """(key, value) of the rows, in (partition, offset) order."""
    return [(r["key"], r["value"]) for r in df.orderBy("partition", "offset").collect()]


MODES = ("batch", "one_micro_batch", "split", "split_restart")


def run_mode(
    spark: SparkSession,
    tmp_path,
    records: Sequence[Rec],
    op: Callable[[DataFrame], DataFrame],
    mode: str,
) -> DataFrame:
    """Runs ``op`` over ``records`` as a batch DataFrame, as one micro-batch, one micro-batch per
    record, or one per record with a restart from the checkpoint half-way."""
    records = with_offsets(records)
    if mode == "batch":
        return op(batch_df(spark, records))
    run = StreamRun(spark, str(tmp_path), op)
    if mode == "one_micro_batch":
        run.add_batch(records)
        run.run()
    elif mode == "split":
        for r in records:
            run.add_batch([r])
        run.run()
    elif mode == "split_restart":
        half = max(1, len(records) // 2)
        for r in records[:half]:
            run.add_batch([r])
        run.run()
        for r in records[half:]:
            run.add_batch([r])
        run.run()
    else:
        raise ValueError(mode)
    return spark.read.parquet(os.path.join(str(tmp_path), "out"))


# Examples packed into one query: example i's partition p becomes i * EXAMPLE_STRIDE + p.
EXAMPLE_STRIDE = 16


def example_index():
    """The Column of a packed row's example index (its position in ``run_examples``' dict)."""
    from pyspark.sql import functions as F

    return F.floor(F.col("partition") / EXAMPLE_STRIDE)


def each_example(parts: Sequence[tuple[Sequence[int], Callable[[DataFrame], DataFrame]]]):
    """The ``op`` for ``run_examples`` that runs each ``(example indexes, op)`` part's op on those
    examples' rows alone, the outputs merged into one stream (``KStream.merge``): several operators,
    or one operator with several settings, in one query."""
    import functools

    from kstreams_spark import KStream

    def merged(df: DataFrame) -> DataFrame:
        outputs = [KStream(op(df.where(example_index().isin(list(indexes))))) for indexes, op in parts]
        return functools.reduce(KStream.merge, outputs).df

    return merged


def run_examples(
    spark: SparkSession,
    tmp_path,
    examples: dict[str, Sequence[Rec]],
    op: Callable[[DataFrame], DataFrame],
    mode: str,
) -> dict[str, list[dict]]:
    """Runs every example through one query in ``mode`` (as ``run_mode``) and returns each
    example's output rows (as dicts, in (partition, offset) order), keyed by the example's name.

    Only for operators whose state and clock are per input partition or per key: each example is
    on partitions of its own (``EXAMPLE_STRIDE`` apart) and its keys carry a prefix of their own,
    both restored in what comes back, so no example can see another's state or stream time. The
    query's watermark is shared, though: it moves the idle-partition sweep of the dedup stores
    (armed at watermark + max(interval, 10 minutes): the manual, "Semantics in short") and closes the
    windows of the DSL's windowed operators. So the examples' timestamps must lie within 10
    minutes of each other (checked), and examples of watermark-closed windows need the same
    timestamps in every example.
    ``split`` puts each example's records one per micro-batch, one record of each example in a
    micro-batch; ``split_restart`` also lines the examples up so that every example's first half
    (``len // 2``, at least 1, as ``run_mode``) comes before the restart and the rest after it.
    """
    names = list(examples)
    times = [r.timestamp() for recs in examples.values() for r in recs if r.timestamp() is not None]
    assert not times or max(times) - min(times) < dt.timedelta(minutes=10), "examples 10 minutes apart"
    assert all(r.partition < EXAMPLE_STRIDE for recs in examples.values() for r in recs)
    packed: list[list[Rec]] = []
    for i, name in enumerate(names):
        own = []
        for r in with_offsets(examples[name]):
            key = None if r.key is None else f"{i}/{r.key}"
            own.append(Rec(key, r.t, i * EXAMPLE_STRIDE + r.partition, r.offset, r.value, r.ms))
        packed.append(own)
    if mode == "batch":
        out = op(batch_df(spark, [r for own in packed for r in own]))
    else:
        run = StreamRun(spark, str(tmp_path), op)
        if mode == "one_micro_batch":
            run.add_batch([r for own in packed for r in own])
            run.run()
        elif mode in ("split", "split_restart"):
            halves = [max(1, len(own) // 2) for own in packed]
            start = max(halves) if mode == "split_restart" else 0
            steps: dict[int, list[Rec]] = {}
            for own, half in zip(packed, halves, strict=True):
                first = start - half if mode == "split_restart" else 0
                for j, r in enumerate(own):
                    steps.setdefault(first + j, []).append(r)
            for step in sorted(steps):
                if mode == "split_restart" and step == start:
                    run.run()
                run.add_batch(steps[step])
            run.run()
        else:
            raise ValueError(mode)
        out = run.output()
    got: dict[str, list[dict]] = {name: [] for name in names}
    for row in out.orderBy("partition", "offset").collect():
        r = row.asDict()
        i, r["partition"] = divmod(r["partition"], EXAMPLE_STRIDE)
        if r.get("key") is not None:
            prefix, r["key"] = r["key"].split("/", 1)
            assert prefix == str(i), (prefix, i, r)
        got[names[i]].append(r)
    return got
