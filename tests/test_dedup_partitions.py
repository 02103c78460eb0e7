"""Spec sections 1 and 2 beyond the single-key table: per-partition stream time and state, the
global store of `deduplicate`, null keys and ids, inputs without partition or offset columns."""

import pytest
from kstreams_spark import KStream
from pyspark.sql import functions as F
from streams import Rec, forwarded, run_mode

MODES = ["batch", "one_micro_batch", "split_restart"]


@pytest.mark.parametrize("mode", MODES)
def test_by_key_state_is_scoped_to_the_partition(spark, tmp_path, mode):
    records = [Rec("a", 10, partition=0), Rec("a", 12, partition=1), Rec("a", 13, partition=0)]
    out = run_mode(spark, tmp_path, records, lambda df: KStream(df).deduplicate_by_key("10 s").df, mode)
    assert forwarded(out) == [("a", "v0"), ("a", "v1")]


@pytest.mark.parametrize("mode", MODES)
def test_stream_time_is_per_partition(spark, tmp_path, mode):
    # Partition 1's stream time is 10 (not partition 0's 100), so b@10 is stored and b@5 is its
    # duplicate. With one stream time for all partitions b@10 would be late and b@5 forwarded.
    records = [Rec("a", 100, partition=0), Rec("b", 10, partition=1), Rec("b", 5, partition=1)]
    out = run_mode(spark, tmp_path, records, lambda df: KStream(df).deduplicate_by_key("10 s").df, mode)
    assert forwarded(out) == [("a", "v0"), ("b", "v1")]


@pytest.mark.parametrize("mode", MODES)
def test_deduplicate_is_global_across_partitions(spark, tmp_path, mode):
    # x@95 on partition 1 is checked against the entry partition 0 stored (|100-95| <= 10, and
    # 100 >= S1 - 10), so it is dropped; y is on one partition only.
    records = [Rec("x", 100, partition=0), Rec("y", 50, partition=1), Rec("x", 95, partition=1)]
    op = lambda df: KStream(df).deduplicate(F.col("key"), "10 seconds").df  # noqa: E731
    out = run_mode(spark, tmp_path, records, op, mode)
    assert forwarded(out) == [("x", "v0"), ("y", "v1")]


@pytest.mark.parametrize("mode", MODES)
def test_null_keys_and_ids_are_forwarded_and_not_stored(spark, tmp_path, mode):
    records = [
        Rec(None, 10, value="n1"),
        Rec(None, 10, value="n1"),
        Rec("a", 11, value="i1"),
        Rec("a", 12, value="i1"),
        Rec("a", 12, value=None),
        Rec("a", 13, value=None),
    ]
    by_kv = lambda df: KStream(df).deduplicate_by_key_value("value", "10 s").df  # noqa: E731
    out = run_mode(spark, tmp_path, records, by_kv, mode)
    assert forwarded(out) == [(None, "n1"), (None, "n1"), ("a", "i1"), ("a", None), ("a", None)]


def test_by_key_value_keys_on_key_and_id(spark, tmp_path):
    records = [
        Rec("a", 10, value="e1"),
        Rec("a", 11, value="e2"),
        Rec("b", 12, value="e1"),
        Rec("a", 13, value="e1"),
    ]
    out = run_mode(
        spark,
        tmp_path,
        records,
        lambda df: KStream(df).deduplicate_by_key_value(F.col("value"), "10 s").df,
        "split_restart",
    )
    assert forwarded(out) == [("a", "e1"), ("a", "e2"), ("b", "e1")]


def test_deduplicate_by_json_field_of_the_value(spark, tmp_path):
    records = [
        Rec("k1", 10, value='{"id": 1}'),
        Rec("k2", 11, value='{"id": 1}'),
        Rec("k3", 12, value='{"id": 2}'),
    ]
    op = lambda df: KStream(df).deduplicate(F.get_json_object("value", "$.id"), "1 minute").df  # noqa
    out = run_mode(spark, tmp_path, records, op, "one_micro_batch")
    assert [k for k, _ in forwarded(out)] == ["k1", "k3"]


def test_without_partition_and_offset_columns_order_is_timestamp_order(spark):
    # One partition, no offsets: inside the micro-batch records are taken in timestamp order, so
    # a@5 is seen first and a@15 (|15-5| <= 10) is its duplicate.
    df = spark.createDataFrame(
        [("a", "late-in-list", 15), ("a", "early", 5), ("b", "other", 7)],
        "key string, value string, secs int",
    ).select("key", "value", F.timestamp_seconds("secs").alias("timestamp"))
    out = KStream(df).deduplicate_by_key("10 seconds").df
    assert sorted(r["value"] for r in out.collect()) == ["early", "other"]
    assert out.columns == ["key", "value", "timestamp"]


def test_custom_column_names(spark):
    df = spark.createDataFrame(
        [("u1", 100, 0, 0), ("u1", 105, 0, 1), ("u1", 300, 0, 2)],
        "user string, secs long, p int, o long",
    ).select("user", F.timestamp_seconds("secs").alias("event_time"), "p", "o")
    ks = KStream(df, key="user", timestamp="event_time", partition="p", offset="o")
    out = ks.deduplicate_by_key("10 seconds").df
    assert [r["o"] for r in out.orderBy("o").collect()] == [0, 2]
    assert out.schema == df.schema


def test_output_keeps_input_columns_and_types(spark, tmp_path):
    from streams import SCHEMA

    out = run_mode(
        spark,
        tmp_path,
        [Rec("a", 1), Rec("a", 2)],
        lambda df: KStream(df).deduplicate_by_key("1 s").df,
        "one_micro_batch",
    )
    assert [(f.name, f.dataType) for f in out.schema] == [(f.name, f.dataType) for f in SCHEMA]


def test_many_keys_many_partitions_match_a_reference_model(spark, tmp_path):
    """A few hundred records with replays across 3 partitions, against a direct transcription
    of the spec's rule, in several micro-batches with a restart."""
    import random

    from reference import dedup_reference
    from streams import StreamRun, with_offsets

    rng = random.Random(7)
    records = []
    for p in range(3):
        t = 1000.0
        for _ in range(120):
            t += rng.choice([0.5, 1, 2, -3, 4])
            records.append(Rec(f"k{rng.randrange(15)}", round(t, 1), partition=p))
    # producer retry: partition 1 replays its last 20 records at new offsets
    records += [Rec(r.key, r.t, partition=1) for r in records[100:120]]
    records = with_offsets(records)
    rng.shuffle(records)  # interleave partitions; keep each partition's offset order
    records.sort(key=lambda r: (r.offset, r.partition))
    expected = dedup_reference(records, interval=5.0, scope="partition")

    run = StreamRun(spark, str(tmp_path), lambda df: KStream(df).deduplicate_by_key("5 s").df)
    chunks = [records[i : i + 90] for i in range(0, len(records), 90)]
    for c in chunks[:2]:
        run.add_batch(c)
    run.run()
    for c in chunks[2:]:
        run.add_batch(c)
    run.run()
    got = sorted((r["partition"], r["offset"]) for r in run.output().collect())
    assert got == sorted((r.partition, r.offset) for r in expected)
    assert 0 < len(got) < len(records)


def test_restart_with_a_different_shuffle_partition_count(spark, tmp_path):
    """The state's partition count comes from the checkpoint; a changed session setting must not
    reorder records or lose state."""
    from streams import StreamRun

    op = lambda df: KStream(df).deduplicate_by_key("10 s").df  # noqa: E731
    run = StreamRun(spark, str(tmp_path), op)
    run.add_batch([Rec("a", 10, partition=p, offset=0) for p in range(4)])
    run.run()
    spark.conf.set("spark.sql.shuffle.partitions", "5")
    try:
        run.add_batch(
            [Rec("a", 12, partition=p, offset=2) for p in range(4)]
            + [Rec("b", 12, partition=p, offset=1) for p in range(4)]
        )
        run.run()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")
    got = sorted((r["partition"], r["offset"]) for r in run.output().collect())
    assert got == sorted([(p, 0) for p in range(4)] + [(p, 1) for p in range(4)])


def _cross_partition_batches(seed: int, batches: int) -> list[list[Rec]]:
    """Random at-least-once input whose ids occur on several partitions: 3 partitions sending 20
    shared keys at about the same times (so the same key meets another partition's entry within
    the interval), out-of-order and late records, producer retries at new offsets, and partition 1
    re-delivering its first 15 records (same offsets) in the second half."""
    import random

    rng = random.Random(seed)
    per_partition = []
    for p in range(3):
        records, t = [], 1000.0
        for _ in range(60):
            t += rng.choice([0.5, 1.0, 1.5])
            late = -rng.randrange(10, 30) if rng.random() < 0.1 else 0
            records.append(Rec(f"k{rng.randrange(20)}", t + late, partition=p))
            if rng.random() < 0.2:  # a retry at the next offset
                records.append(Rec(records[-1].key, records[-1].t, partition=p))
        per_partition.append(with_offsets_of(records, p))
    size = -(-60 // batches)
    out = [[r for recs in per_partition for r in recs[b * size : (b + 1) * size]] for b in range(batches)]
    replay = [Rec(r.key, r.t, 1, r.offset, f"{r.value}-again") for r in per_partition[1][:15]]
    out[batches // 2] += replay
    return out


def with_offsets_of(records: list[Rec], partition: int) -> list[Rec]:
    """The records of one partition numbered 0, 1, ... with values ``p<partition>-o<offset>``."""
    return [Rec(r.key, r.t, partition, i, f"p{partition}-o{i}") for i, r in enumerate(records)]


@pytest.mark.parametrize("split", ["one_micro_batch", "split_restart"])
def test_deduplicate_across_partitions_matches_a_reference_model(spark, tmp_path, split):
    """``deduplicate`` (one entry per id over all partitions) on random input whose ids occur on
    every partition, against tests/reference.py (written from the spec, not from the operator):
    records taken micro-batch by micro-batch, inside one partition by partition in offset order,
    as the global store takes them (DedupStoreSpec checks the same in Scala)."""
    from reference import dedup_reference
    from streams import StreamRun

    batches = _cross_partition_batches(seed=11, batches=4)
    if split == "one_micro_batch":
        batches = [[r for b in batches for r in b]]
    arrival = [r for b in batches for r in sorted(b, key=lambda r: (r.partition, r.offset))]
    expected = dedup_reference(arrival, interval=5.0, scope="global")
    # the input has what the test is for: ids forwarded on one partition and dropped on another
    forwarded_on = {}
    for r in expected:
        forwarded_on.setdefault(r.key, set()).add(r.partition)
    dropped = [r for r in arrival if r not in expected]
    assert any(forwarded_on.get(r.key, set()) - {r.partition} for r in dropped)

    run = StreamRun(spark, str(tmp_path), lambda df: KStream(df).deduplicate(F.col("key"), "5 seconds").df)
    for i, b in enumerate(batches):
        if split == "split_restart" and i == len(batches) // 2:
            run.run()
        run.add_batch(b)
    run.run()
    got = sorted(r["value"] for r in run.output().collect())
    assert got == sorted(r.value for r in expected)
    assert 0 < len(got) < len(arrival)
