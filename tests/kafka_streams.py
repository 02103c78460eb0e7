"""Helpers for the Kafka tests: an at-least-once producer's records, the queries, and oracles.

Expected results are computed from the records read back from the input topic (partition, offset,
key, value, timestamp as the broker stored them), by direct transcriptions of SEMANTICS.md.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafka_broker import KafkaRecord
from kstreams_spark import KStream, TimeWindows
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from reference import dedup_reference

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
INTERVAL_MS = 10_000
PARTITIONS = 4


def at_least_once_records(events_per_partition: int, seed: int, keys: int = 25) -> list[tuple]:
    """``(partition, key, value, timestamp_ms)`` in send order, with the duplicates an
    at-least-once producer makes: some batches of 10 are sent twice (a retry after a lost ack),
    and after a "failure" two-thirds through, the last 30 records of every partition are sent again.
    Values are JSON ``{"id": <event id>, "seq": <per-partition sequence number>}``; event times
    advance 200 ms per event, out of order by up to 1 s.
    """
    rng = random.Random(seed)
    sent: list[tuple] = []
    for p in range(PARTITIONS):
        events = [
            (
                p,
                f"user-{rng.randrange(keys)}",
                json.dumps({"id": f"{p}-{i}", "seq": i + 1}),
                BASE_MS + i * 200 + rng.randrange(-1000, 1000),
            )
            for i in range(events_per_partition)
        ]
        failure_at = 2 * events_per_partition // 3
        for start in range(0, events_per_partition, 10):
            batch = events[start : start + 10]
            sent += batch
            if rng.random() < 0.2:  # retried batch: the broker got it, the ack was lost
                sent += batch
            if start <= failure_at < start + 10:  # producer failed; replays its recent tail
                sent += events[max(0, start + 10 - 30) : start + 10]
    return sent


@dataclass(frozen=True)
class In:
    """An input record as the oracles read it (t in ms)."""

    key: str | None
    value: str | None
    t: int
    partition: int
    offset: int


def as_inputs(records: Sequence[KafkaRecord]) -> list[In]:
    return [
        In(
            None if r.key is None else r.key.decode(),
            None if r.value is None else r.value.decode(),
            r.timestamp_ms,
            r.partition,
            r.offset,
        )
        for r in records
    ]


def expected_dedup_by_key(records: Sequence[In], interval_ms: int = INTERVAL_MS) -> list[In]:
    return dedup_reference(records, interval_ms)


def expected_by_sequence(records: Sequence[In]) -> list[In]:
    """SEMANTICS.md 4: per partition, a record passes if its sequence is null or above the
    highest forwarded so far."""
    mark: dict[int, int] = {}
    out = []
    for r in records:
        seq = json.loads(r.value)["seq"] if r.value else None
        if seq is None or seq > mark.get(r.partition, -1):
            out.append(r)
            if seq is not None:
                mark[r.partition] = seq
    return out


def expected_tumbling_distinct(records: Sequence[In], size_ms: int, grace_ms: int = 0) -> list[In]:
    """SEMANTICS.md 3: the first record per (partition, key, epoch-aligned window); a record whose
    window ended at or before stream time minus grace is late and dropped; null keys pass."""
    stream_time: dict[int, int] = {}
    seen = set()
    out = []
    for r in records:
        s = max(stream_time.get(r.partition, r.t), r.t)
        stream_time[r.partition] = s
        if r.key is None:
            out.append(r)
            continue
        start = r.t - r.t % size_ms
        if start + size_ms <= s - grace_ms:
            continue
        if (r.partition, r.key, start) not in seen:
            seen.add((r.partition, r.key, start))
            out.append(r)
    return out


def kafka_source(spark: SparkSession, bootstrap: str, topic: str, max_offsets: int) -> DataFrame:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()
    )


def sequence():
    """The producer's sequence number, from the JSON value."""
    return F.get_json_object(F.col("value").cast("string"), "$.seq").cast("long")


OPERATORS: dict[str, Callable[[DataFrame], DataFrame]] = {
    "dedup_by_key": lambda df: KStream(df).deduplicate_by_key("10 seconds").df,
    "dedup_by_sequence": lambda df: KStream(df).deduplicate_by_sequence(sequence()).df,
    "tumbling_distinct": lambda df: (
        KStream(df).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace("10 seconds")).distinct().df
    ),
}


def provenance(df: DataFrame) -> DataFrame:
    """Kafka sink rows: the record's key and value, and headers naming its input partition and
    offset, so the output topic can be checked record by record (replays included)."""
    return df.select(
        "key",
        "value",
        F.array(
            F.struct(
                F.lit("partition").alias("key"),
                F.col("partition").cast("string").cast("binary").alias("value"),
            ),
            F.struct(
                F.lit("offset").alias("key"), F.col("offset").cast("string").cast("binary").alias("value")
            ),
        ).alias("headers"),
    )


def start_kafka_sink(df: DataFrame, bootstrap: str, topic: str, checkpoint: str, available_now=True):
    writer = (
        provenance(df)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint)
    )
    return (writer.trigger(availableNow=True) if available_now else writer).start()


def start_parquet_sink(df: DataFrame, path: str, checkpoint: str):
    return (
        df.select("key", "value", "timestamp", "partition", "offset")
        .writeStream.format("parquet")
        .option("path", path)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def parquet_rows(spark: SparkSession, path: str) -> list[tuple]:
    """(partition, offset, key, value) of every row, duplicates kept, sorted."""
    return sorted(
        (
            r["partition"],
            r["offset"],
            None if r["key"] is None else bytes(r["key"]).decode(),
            None if r["value"] is None else bytes(r["value"]).decode(),
        )
        for r in spark.read.parquet(path).collect()
    )


def rows_of(records: Sequence[In]) -> list[tuple]:
    return sorted((r.partition, r.offset, r.key, r.value) for r in records)


def output_provenance(records: Sequence[KafkaRecord]) -> list[tuple]:
    """(partition, offset, key, value) of the input record behind each output record (from its
    provenance headers), duplicates kept, sorted."""
    out = []
    for r in records:
        h = dict(r.headers)
        out.append(
            (
                int(h["partition"]),
                int(h["offset"]),
                None if r.key is None else r.key.decode(),
                None if r.value is None else r.value.decode(),
            )
        )
    return sorted(out)
