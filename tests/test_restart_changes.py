"""What a restart from the same checkpoint may change (README, "Operating a query"): the late-record
policy and the dedup store's memory decide no stored state, so a restart may change them and the
result is the rule's under the new setting from the first record on; what decides the stored state
(operator, interval, windows, key, id) is refused (tests/test_bad_input.py)."""

from __future__ import annotations

from kstreams_spark import KStream
from streams import Rec, StreamRun, with_offsets

MEMORY_CONF = "spark.kstreams.dedup.memory"


def test_a_restart_may_change_the_late_record_policy(spark, tmp_path):
    # partition 0: a@10, b@30 forwarded; after the restart c@5 is late (5 < 30 - 10) and d@31 is new
    records = with_offsets([Rec("a", 10), Rec("b", 30), Rec("c", 5), Rec("d", 31)])
    run = StreamRun(spark, str(tmp_path), lambda d: KStream(d).deduplicate_by_key("10 s", "forward").df)
    run.add_batch(records[:2])
    run.run()
    run.op = lambda d: KStream(d).deduplicate_by_key("10 s", "drop").df
    run.add_batch(records[2:])
    run.run()
    assert sorted(r.key for r in run.output().collect()) == ["a", "b", "d"]  # c dropped, as "drop" says
    run.op = lambda d: KStream(d).deduplicate_by_key("10 s", "forward").df
    run.add_batch([Rec("e", 1, offset=4)])  # late again (1 < 31 - 10): forwarded now
    run.run()
    assert sorted(r.key for r in run.output().collect()) == ["a", "b", "d", "e"]


def test_a_restart_may_change_the_dedup_memory_and_the_store_follows(spark, tmp_path):
    """In memory, then spilled to one RocksDB row per key (a 1-byte budget), then in memory again:
    every duplicate across the restarts is caught."""
    records = with_offsets(
        [Rec("a", 1), Rec("b", 2), Rec("a", 3), Rec("c", 4), Rec("b", 5), Rec("c", 6), Rec("d", 7)]
    )
    run = StreamRun(spark, str(tmp_path), lambda d: KStream(d).deduplicate_by_key("10 s").df)
    try:
        for batch, memory in [(records[:2], None), (records[2:4], "1"), (records[4:], None)]:
            if memory:
                spark.conf.set(MEMORY_CONF, memory)
            else:
                spark.conf.unset(MEMORY_CONF)
            run.add_batch(batch)
            run.run()
            if memory:  # the group was spilled: its entries are RocksDB rows now
                entries = spark.read.format("statestore").option("stateVarName", "entries")
                assert entries.load(str(tmp_path / "checkpoint")).count() > 0
    finally:
        spark.conf.unset(MEMORY_CONF)
    assert sorted((r.key, r.offset) for r in run.output().collect()) == [
        ("a", 0),
        ("b", 1),
        ("c", 3),
        ("d", 6),
    ]
