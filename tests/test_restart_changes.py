"""What a restart from the same checkpoint may change (the manual, "Operating a query"): the late-record
policy and the dedup store's memory decide no stored state, so a restart may change them and the
result is the rule's under the new setting from the first record on; the dedup
interval may change too (per partition and global), with every stored entry judged by the new
interval while an entry already dead under the old one stays dead (for the global store: for each
partition it had died for), and so may the grace of a windowed distinct, of a windowed
aggregation and of a stream-stream join; what else decides the stored state (operator, windows'
size and gap, a join's time difference, key, id) is refused (tests/test_bad_input.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from kstreams_spark import JoinWindows, KStream, SessionWindows, TimeWindows, read_state
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F
from streams import BASE, SCHEMA, Rec, StreamRun, with_offsets

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


def _by_key(interval: str):
    return lambda d: KStream(d).deduplicate_by_key(interval).df


def _forwarded(run: StreamRun) -> list[tuple]:
    return sorted((r.partition, r.offset, r.key) for r in run.output().collect())


@pytest.mark.parametrize("memory", [None, "1"], ids=["in_memory", "spilled"])
def test_a_longer_interval_judges_live_entries_and_keeps_dead_ones_dead(spark, tmp_path, memory):
    """10 s, then 30 s. When the query stops, partition 0's stream time is 25 s: b@15 and c@25 are
    live (25 - 10 = 15), a@0 and d@14 are dead but still stored (written by the first micro-batch),
    a@0's bucket [0 s, 10 s) not yet deleted, d@14 in the bucket [10 s, 20 s) it shares with b@15. After the restart a@26 and d@27 are forwarded
    (their entries stay dead, though 30 s would reach them), b@28 and c@40 are dropped (within
    30 s of live entries: 10 s would have forwarded both)."""
    records = with_offsets(
        [
            Rec("a", 0),
            Rec("d", 14),
            Rec("b", 15),
            Rec("c", 25),
            Rec("a", 26),
            Rec("d", 27),
            Rec("b", 28),
            Rec("c", 40),
        ]
    )
    run = StreamRun(spark, str(tmp_path), _by_key("10 s"))
    try:
        if memory:
            spark.conf.set(MEMORY_CONF, memory)
        run.add_batch(records[:2])  # a@0, d@14 written while live
        run.add_batch(records[2:4])
        run.run()
        run.op = _by_key("30 s")
        run.add_batch(records[4:])
        run.run()
    finally:
        spark.conf.unset(MEMORY_CONF)
    assert _forwarded(run) == [(0, 0, "a"), (0, 1, "d"), (0, 2, "b"), (0, 3, "c"), (0, 4, "a"), (0, 5, "d")]


def test_one_dataframe_in_two_queries_judges_each_by_its_own_checkpoint(spark, tmp_path):
    """One deduplicated DataFrame (30 s, so one processor object) started in two queries over the
    same files, one after the other, on two checkpoints of earlier runs over the first two files
    (a@0 and d@14, then b@15 and c@25): A's under 10 s, B's under 60 s. Each query judges by its
    own checkpoint's intervals. A: a@0 and d@14 died under 10 s and stay dead, so a@26 and d@27 are
    forwarded, b@28 and c@40 dropped. B: every entry is live under 60 s and then 30 s, so all four
    are dropped. A mix-up either way changes a count: A under B's intervals keeps d@14 at least
    (d@27 dropped), B under A's drops a@0 and d@14 (a@26 and d@27 forwarded). (Not at the same
    moment: Spark plans both queries' first micro-batch with that one object, the manual,
    "Operating a query".)"""
    records = with_offsets(
        [Rec("a", 0), Rec("d", 14), Rec("b", 15), Rec("c", 25)]
        + [Rec("a", 26), Rec("d", 27), Rec("b", 28), Rec("c", 40)]
    )
    files = StreamRun(
        spark, str(tmp_path / "files"), _by_key("30 s")
    )  # its input folder only: the queries are below
    files.add_batch(records[:2])  # a@0, d@14 written while live
    files.add_batch(records[2:4])

    def start(df, name):
        return (
            df.writeStream.format("parquet")
            .option("path", str(tmp_path / name / "out"))
            .option("checkpointLocation", str(tmp_path / name / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )

    source = lambda: spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(files.root + "/in")  # noqa: E731
    for name, interval in [("a", "10 s"), ("b", "60 s")]:
        start(KStream(source()).deduplicate_by_key(interval).df, name).awaitTermination()
    files.add_batch(records[4:])
    deduped = KStream(source()).deduplicate_by_key("30 s").df
    start(deduped, "a").awaitTermination()
    start(deduped, "b").awaitTermination()

    def forwarded(name):
        rows = spark.read.parquet(str(tmp_path / name / "out")).collect()
        return sorted((r.partition, r.offset, r.key) for r in rows)

    assert forwarded("a") == [(0, 0, "a"), (0, 1, "d"), (0, 2, "b"), (0, 3, "c"), (0, 4, "a"), (0, 5, "d")]
    assert forwarded("b") == [(0, 0, "a"), (0, 1, "d"), (0, 2, "b"), (0, 3, "c")]


def test_a_shorter_interval_then_the_first_again_keeps_what_died_in_between_dead(spark, tmp_path):
    """30 s, then 5 s, then 30 s again, over two partitions.

    * Run 1 (30 s): partition 0 stores a@0, b@10, c@20 (stream time 20); partition 1 stores x@0
      and y@10 (stream time 10).
    * Run 2 (5 s), partition 0 only: a@22 and b@26 are forwarded (a@0, b@10 more than 5 s behind
      stream time), c@24 is dropped (within 5 s of c@20). Stream time 26: c@20 is now dead.
      Partition 1 gets nothing, but its stream time is 10: under 5 s x@0 is dead when the run
      stops, y@10 is live.
    * Run 3 (30 s): c@27 is forwarded (c@20 died under 5 s and stays dead), a@40 is dropped (within
      30 s of a@22, live); on partition 1 x@20 is forwarded (x@0 died in run 2, though partition 1
      never opened there) and y@12 is dropped (within 30 s of y@10, live).
    """
    records = with_offsets(
        [Rec("a", 0), Rec("b", 10), Rec("c", 20), Rec("x", 0, partition=1), Rec("y", 10, partition=1)]
        + [Rec("a", 22), Rec("c", 24), Rec("b", 26)]
        + [Rec("c", 27), Rec("a", 40), Rec("x", 20, partition=1), Rec("y", 12, partition=1)]
    )
    run = StreamRun(spark, str(tmp_path), _by_key("30 s"))
    for interval, batch in [("30 s", records[:5]), ("5 s", records[5:8]), ("30 s", records[8:])]:
        run.op = _by_key(interval)
        run.add_batch(batch)
        run.run()
        if interval == "5 s":  # the state shows what the next record meets: entries live under 5 s
            shown = read_state(spark, str(tmp_path / "checkpoint")).collect()
            assert [(r.partition, r.key, r.live_until) for r in shown] == [
                (0, "a", (BASE + dt.timedelta(seconds=27)).replace(tzinfo=None)),
                (0, "b", (BASE + dt.timedelta(seconds=31)).replace(tzinfo=None)),
                (1, "y", (BASE + dt.timedelta(seconds=15)).replace(tzinfo=None)),
            ]
    assert _forwarded(run) == [
        (0, 0, "a"),
        (0, 1, "b"),
        (0, 2, "c"),
        (0, 3, "a"),
        (0, 5, "b"),
        (0, 6, "c"),
        (1, 0, "x"),
        (1, 1, "y"),
        (1, 2, "x"),
    ]


def _global(interval: str):
    return lambda d: KStream(d).deduplicate("key", interval).df


def _at(seconds: int) -> dt.datetime:
    return (BASE + dt.timedelta(seconds=seconds)).replace(tzinfo=None)


@pytest.mark.parametrize("memory", [None, "1"], ids=["in_memory", "spilled"])
def test_the_global_stores_longer_intervals_keep_what_died_for_each_partition_dead(spark, tmp_path, memory):
    """The global store (one entry per id over all partitions, each record judged by its own
    partition's stream time), 10 s, then 30 s, then 60 s, over two partitions.

    * Run 1 (10 s): partition 0 stores a@0, e@1, b@15, d@25 (stream time 25), partition 1 c@5
      (stream time 5). Nothing is evicted (partition 1 lags). When the run stops a@0, e@1 and c@5
      are dead for partition 0 (below 25 - 10) and live for partition 1 (5 - 10).
    * Run 2 (30 s): a@26 on partition 0 is forwarded (a@0 stays dead for it, though 30 s reaches
      it); e@20 on partition 1 is dropped (e@1 is live for partition 1, and 30 s reaches it where
      10 s would not); f@12 on partition 0 is new (not late under 30 s) and stored, and f@14 is its
      duplicate: an entry written after the restart is judged by the new interval alone, though it
      lies below what died for partition 0; e@27 on partition 0 is forwarded (e@1 still dead for
      it). The state then shows c@5 live for partition 1 only, while 30 s alone would make it live
      for partition 0 too (stream time 27).
    * Run 3 (60 s): c@30 on partition 1 is dropped (c@5 live for it); c@40 on partition 0 is
      forwarded: c@5 died for partition 0 in run 1, and stays dead though neither 30 s at the end of
      run 2 (27 - 30) nor 60 s would kill it."""
    records = with_offsets(
        [Rec("a", 0), Rec("e", 1), Rec("b", 15), Rec("c", 5, partition=1)]
        + [Rec("d", 25)]
        + [Rec("a", 26), Rec("f", 12), Rec("e", 20, partition=1)]
        + [Rec("f", 14), Rec("e", 27)]
        + [Rec("c", 30, partition=1)]
        + [Rec("c", 40)]
    )
    run = StreamRun(spark, str(tmp_path), _global("10 s"))
    try:
        if memory:
            spark.conf.set(MEMORY_CONF, memory)
        run.add_batch(records[:4])
        run.add_batch(records[4:5])
        run.run()
        run.op = _global("30 s")
        run.add_batch(records[5:8])
        run.add_batch(records[8:10])
        run.run()
        shown = read_state(spark, str(tmp_path / "checkpoint")).collect()
        run.op = _global("60 s")
        run.add_batch(records[10:11])
        run.add_batch(records[11:])
        run.run()
    finally:
        spark.conf.unset(MEMORY_CONF)
    assert _forwarded(run) == [
        (0, 0, "a"),
        (0, 1, "e"),
        (0, 2, "b"),
        (0, 3, "d"),
        (0, 4, "a"),
        (0, 5, "f"),
        (0, 7, "e"),
        (0, 8, "c"),
        (1, 0, "c"),
    ]
    assert [(r.id, r.timestamp, r.partition, r.live_until, r.live_for_partitions) for r in shown] == [
        ("c", _at(5), 1, _at(35), [1]),
        ("f", _at(12), 0, _at(42), [0, 1]),
        ("b", _at(15), 0, _at(45), [0, 1]),
        ("d", _at(25), 0, _at(55), [0, 1]),
        ("a", _at(26), 0, _at(56), [0, 1]),
        ("e", _at(27), 0, _at(57), [0, 1]),
    ]


def test_the_global_stores_mark_goes_with_its_entry_without_an_offset_column(spark, tmp_path):
    """Without an offset column every entry's offset is unknown, so an entry written after the
    restart can look exactly like the one a mark was made for: e@5 is dead for partition 0 when run 1
    (10 s) stops at stream time 20; in run 2 (30 s) e@5 comes again, is forwarded and stored, and
    e@6 is its duplicate (the mark went with the entry it was made for)."""
    records = with_offsets([Rec("e", 5), Rec("x", 20), Rec("e", 5, value="again"), Rec("e", 6)])

    def op(interval):
        return lambda d: KStream(d, offset=None).deduplicate("key", interval).df

    run = StreamRun(spark, str(tmp_path), op("10 s"))
    run.add_batch(records[:2])
    run.run()
    run.op = op("30 s")
    run.add_batch(records[2:3])
    run.add_batch(records[3:])
    run.run()
    assert sorted(r.value for r in run.output().collect()) == ["again", "v0", "v1"]


def test_the_global_stores_mark_outlives_the_eviction_bound_of_the_others(spark, tmp_path):
    """A mark holds as long as its entry, whatever the eviction bound of the partitions still
    delivering. 10 s, then 30 s: run 1 stores e@5 and a@12 on partition 0 and b@25 on partition 1,
    so e@5 is dead for partition 1 only. Run 2 counts a partition idle at once (idle timeout 0 s):
    x@38 on partition 0; at the next micro-batch every partition is idle and the most advanced one,
    at 38, sets the eviction bound 8: e@5 stays stored (its bucket [0 s, 10 s) ends after 8). Then
    e@20 on partition 1 is forwarded: e@5 died for partition 1 under 10 s and stays dead (had the
    bound reached 10, eviction would have removed it: the same answer)."""
    records = with_offsets(
        [Rec("e", 5), Rec("a", 12), Rec("b", 25, partition=1)] + [Rec("x", 38)] + [Rec("e", 20, partition=1)]
    )
    run = StreamRun(spark, str(tmp_path), _global("10 s"))
    run.add_batch(records[:3])
    run.run()
    spark.conf.set("spark.kstreams.partitionIdleTimeout", "0 s")  # read when run 2 is planned
    try:
        run.op = _global("30 s")
        run.add_batch(records[3:4])
        run.add_batch(records[4:])
        run.run()
    finally:
        spark.conf.unset("spark.kstreams.partitionIdleTimeout")
    assert _forwarded(run) == [(0, 0, "e"), (0, 1, "a"), (0, 2, "x"), (1, 0, "b"), (1, 1, "e")]


def _join(grace: str, kind: str = "join"):
    """A stream-stream join (time difference 10 s) of the records whose value starts with L with those
    whose value starts with R, on the same partitions (co-partitioned, as Kafka needs them)."""
    windows = JoinWindows("10 s", grace)

    def op(d):
        ks = KStream(d)
        left, right = ks.filter(F.col("value").startswith("L")), ks.filter(F.col("value").startswith("R"))
        return getattr(left, kind)(right, lambda lv, rv: F.concat_ws("+", lv, rv), windows).df

    return op


def _joined(run: StreamRun) -> list[tuple]:
    return sorted(
        (r.key, r.value, int((r.timestamp - _at(0)).total_seconds())) for r in run.output().collect()
    )


def test_a_joins_longer_grace_keeps_unjoinable_records_unjoinable(spark, tmp_path):
    """Inner join, grace 0 s then 20 s, one record per micro-batch on partition 0. A left record at t
    stays joinable while t + 2 * 10 s + grace is after the left side's time.

    * Run 1 (0 s): La@0, Lc@12, Lb@25: the left side's time is 25, so La@0 (0 + 20 <= 25) is no
      longer joinable when the run stops, Lc@12 (32) is.
    * Run 2 (20 s): Ra@5 joins nothing (La@0 stays unjoinable, though 0 + 40 > 25); after Le@35, Rc@20
      joins Lc@12 (12 + 40 > 35, where 0 s would have expired it); Lf@3, new after the restart,
      is kept by the new grace (3 + 40 > 35) and joins Rf@8, though it lies below what had expired
      (an unjoinable mark is for the records buffered when the grace changed)."""
    records = with_offsets(
        [Rec("a", 0, value="La"), Rec("c", 12, value="Lc"), Rec("b", 25, value="Lb")]
        + [Rec("a", 5, value="Ra"), Rec("e", 35, value="Le"), Rec("c", 20, value="Rc")]
        + [Rec("f", 3, value="Lf"), Rec("f", 8, value="Rf")]
    )
    run = StreamRun(spark, str(tmp_path), _join("0 s"))
    for r in records[:3]:
        run.add_batch([r])
    run.run()
    run.op = _join("20 s")
    for r in records[3:]:
        run.add_batch([r])
    run.run()
    assert _joined(run) == [("c", "Lc+Rc", 20), ("f", "Lf+Rf", 8)]


def test_a_left_joins_shorter_grace_emits_what_it_closed_from_the_first_micro_batch(spark, tmp_path):
    """Left join, grace 20 s then 0 s. An unmatched record owed at t is emitted once its partition's
    time passes t + 10 s + grace, at the end of the micro-batch whose time passes the bucket its
    close is listed under (the first grace's width, 30 s: a key that gets no record is not read
    before). Lg@35 is still owed when run 1 stops at 50 (it closes at 65 under 20 s); under 0 s it
    closes at 45, so run 2's first micro-batch (Li@62, past the bucket [30 s, 60 s)) emits it, though
    no record of its key comes; the old grace would keep it until 65. Lh@50 closes at 60 under 0 s,
    in the bucket [60 s, 90 s) not yet passed: still owed, as in a run that had 0 s from the start."""
    records = with_offsets([Rec("g", 35, value="Lg"), Rec("h", 50, value="Lh"), Rec("i", 62, value="Li")])
    run = StreamRun(spark, str(tmp_path), _join("20 s", "left_join"))
    for r in records[:2]:
        run.add_batch([r])
    run.run()
    assert _joined(run) == []
    run.op = _join("0 s", "left_join")
    run.add_batch(records[2:])
    run.run()
    assert _joined(run) == [("g", "Lg", 35)]


def test_a_left_joins_longer_grace_emits_what_was_due_when_it_stopped(spark, tmp_path):
    """Left join, grace 0 s then 20 s: La@0 closed at 10, and Lz@12 moved the time past it in run 1,
    but La's unmatched result waits for its key or its index bucket [10 s, 20 s) to be visited. It
    was due when the run stopped, so the first micro-batch of run 2 emits it, before Ra@5 joins La@0
    (still joinable: 0 + 20 > 12), as a run that kept 0 s would have (Kafka emits it before the next
    record)."""
    records = with_offsets([Rec("a", 0, value="La"), Rec("z", 12, value="Lz"), Rec("a", 5, value="Ra")])
    run = StreamRun(spark, str(tmp_path), _join("0 s", "left_join"))
    for r in records[:2]:
        run.add_batch([r])
    run.run()
    run.op = _join("20 s", "left_join")
    run.add_batch(records[2:])
    run.run()
    assert _joined(run) == [("a", "La", 0), ("a", "La+Ra", 5)]


def test_a_run_that_committed_nothing_does_not_count(spark, tmp_path):
    """30 s, then a 5 s run whose first micro-batch fails (nothing committed, so nothing was judged
    under 5 s), then 30 s again: a@0 is still live when run 3 replays that micro-batch, and a@22 is
    its duplicate. Counted as a run, 5 s would have killed a@0 (20 - 5 > 0)."""
    records = with_offsets([Rec("a", 0), Rec("b", 10), Rec("c", 20), Rec("a", 22)])
    run = StreamRun(spark, str(tmp_path), _by_key("30 s"))
    run.add_batch(records[:3])
    run.run()

    @F.udf("string")
    def fail(key):
        raise ValueError("this micro-batch fails")

    run.op = lambda d: KStream(d).deduplicate_by_key("5 s").df.withColumn("value", fail("key"))
    run.add_batch(records[3:])
    with pytest.raises(StreamingQueryException):
        run.run()
    run.op = _by_key("30 s")
    run.run()
    assert _forwarded(run) == [(0, 0, "a"), (0, 1, "b"), (0, 2, "c")]


def _restarted(spark, tmp_path, first, then, records, split: int) -> StreamRun:
    """``first`` over ``records[:split]``, then ``then`` over the rest from the same checkpoint."""
    run = StreamRun(spark, str(tmp_path), first)
    run.add_batch(records[:split])
    run.run()
    run.op = then
    run.add_batch(records[split:])
    run.run()
    return run


def _tumbling(grace: str, count: bool = False):
    """10 s tumbling windows with ``grace``: a windowed distinct, or with ``count`` a windowed count."""
    return _windowed(TimeWindows.of_size_and_grace("10 seconds", grace), count)


def _sessions(grace: str, count: bool = False):
    """Sessions with a 5 s gap and ``grace``: a session distinct, or with ``count`` a session count."""
    return _windowed(SessionWindows.of_inactivity_gap_and_grace("5 seconds", grace), count)


def _windowed(windows, count: bool):
    def op(d):
        windowed = KStream(d).group_by_key().windowed_by(windows)
        return (windowed.count() if count else windowed.distinct()).df

    return op


def test_a_longer_grace_keeps_closed_windows_closed_and_judges_open_ones_by_itself(spark, tmp_path):
    """Tumbling 10 s windows, grace 0 s, then 20 s. Partition 0 stops at stream time 25 s: the
    windows [0 s, 10 s) and [10 s, 20 s) are closed (swept or not), [20 s, 30 s) is open. After the
    restart a@5, d@8 and b@15 are late (their windows stay closed, though 20 s of grace would
    reach them), c@28 is a duplicate, e@22 opens its window; f@35 moves stream time to 35 s, and
    a@26 is still in time ([20 s, 30 s) closes at 50 s under 20 s of grace; 0 s would have closed it
    at 30 s)."""
    records = with_offsets(
        [Rec("a", 1), Rec("b", 12), Rec("c", 25)]
        + [Rec("a", 5), Rec("b", 15), Rec("c", 28), Rec("d", 8), Rec("e", 22), Rec("f", 35), Rec("a", 26)]
    )
    run = _restarted(spark, tmp_path, _tumbling("0 seconds"), _tumbling("20 seconds"), records, 3)
    assert _forwarded(run) == [(0, 0, "a"), (0, 1, "b"), (0, 2, "c"), (0, 7, "e"), (0, 8, "f"), (0, 9, "a")]
    # the open windows shown are those the next record meets: none ending at or below 25 s
    shown = read_state(spark, str(tmp_path / "checkpoint")).collect()
    at = lambda s: (BASE + dt.timedelta(seconds=s)).replace(tzinfo=None)  # noqa: E731
    assert sorted((r.key, r.window_start, r.open_until) for r in shown) == [
        ("a", at(20), at(50) - dt.timedelta(microseconds=1)),
        ("c", at(20), at(50) - dt.timedelta(microseconds=1)),
        ("e", at(20), at(50) - dt.timedelta(microseconds=1)),
        ("f", at(30), at(60) - dt.timedelta(microseconds=1)),
    ]


def test_a_shorter_grace_closes_windows_from_the_first_record(spark, tmp_path):
    """Tumbling 10 s windows, grace 20 s, then 0 s: [0 s, 10 s) was open at stream time 25 s; after
    the restart a@3 is late (10 <= 25 - 0), c@26 opens its window."""
    records = with_offsets([Rec("a", 1), Rec("b", 25), Rec("a", 3), Rec("c", 26)])
    run = _restarted(spark, tmp_path, _tumbling("20 seconds"), _tumbling("0 seconds"), records, 2)
    assert _forwarded(run) == [(0, 0, "a"), (0, 1, "b"), (0, 3, "c")]


def test_a_longer_session_grace_keeps_closed_sessions_closed(spark, tmp_path):
    """Sessions with a 5 s gap, grace 0 s, then 20 s. Partition 0 stops at stream time 20 s: a's
    session [0 s, 0 s] is closed. After the restart a@2 (it would join it) and c@5 are late (their
    sessions end before 20 s); d@30 opens a session, and f@22 too (22 s is within 20 s of grace of
    stream time 30 s; 0 s would make it late)."""
    records = with_offsets([Rec("a", 0), Rec("b", 20), Rec("a", 2), Rec("c", 5), Rec("d", 30), Rec("f", 22)])
    run = _restarted(spark, tmp_path, _sessions("0 seconds"), _sessions("20 seconds"), records, 2)
    assert _forwarded(run) == [(0, 0, "a"), (0, 1, "b"), (0, 4, "d"), (0, 5, "f")]


def _updates(run: StreamRun) -> list[tuple]:
    """The table's updates: (key, window start s, window end s, count; None for a tombstone), sorted."""

    def seconds(t):
        return (t - BASE.replace(tzinfo=None)) // dt.timedelta(seconds=1)

    updates = [
        (r.key, seconds(r.window.start), seconds(r.window.end), r.value) for r in run.output().collect()
    ]
    return sorted(updates, key=lambda u: (*u[:3], u[3] is not None, u[3] or 0))  # a tombstone first


def test_a_longer_grace_keeps_a_windowed_counts_closed_windows_closed(spark, tmp_path):
    """The first test's records through a windowed count (10 s windows, grace 0 s, then 20 s): after
    the restart a@5, b@15 and d@8 are late (their windows closed at stream time 25 s, and their
    results were emitted: 20 s of grace cannot open them again, though it would reach them);
    c@28 counts 2 in [20 s, 30 s), which stays open under 20 s of grace past f@35, so a@26 counts
    there too (0 s would have closed it at 30 s)."""
    records = with_offsets(
        [Rec("a", 1), Rec("b", 12), Rec("c", 25)]
        + [Rec("a", 5), Rec("b", 15), Rec("c", 28), Rec("d", 8), Rec("e", 22), Rec("f", 35), Rec("a", 26)]
    )
    run = _restarted(
        spark, tmp_path, _tumbling("0 seconds", count=True), _tumbling("20 seconds", count=True), records, 3
    )
    assert _updates(run) == [
        ("a", 0, 10, 1),
        ("a", 20, 30, 1),
        ("b", 10, 20, 1),
        ("c", 20, 30, 1),
        ("c", 20, 30, 2),
        ("e", 20, 30, 1),
        ("f", 30, 40, 1),
    ]


def test_a_shorter_grace_closes_a_windowed_counts_windows_from_the_first_record(spark, tmp_path):
    """Tumbling 10 s windows, grace 20 s, then 0 s: [0 s, 10 s) was open at stream time 25 s; after
    the restart a@3 is late (10 <= 25 - 0) and c@26 counts in its window."""
    records = with_offsets([Rec("a", 1), Rec("b", 25), Rec("a", 3), Rec("c", 26)])
    run = _restarted(
        spark, tmp_path, _tumbling("20 seconds", count=True), _tumbling("0 seconds", count=True), records, 2
    )
    assert _updates(run) == [("a", 0, 10, 1), ("b", 20, 30, 1), ("c", 20, 30, 1)]


def test_a_longer_grace_keeps_a_session_counts_closed_sessions_closed(spark, tmp_path):
    """Session count, 5 s gap, grace 0 s, then 20 s. Partition 0 stops at stream time 20 s: a's
    session [0 s, 0 s] is closed (and evicted). After the restart a@2 (it would join it) and c@5
    are late (their sessions end before 20 s - 5 s); d@30 opens a session, and so does f@22 (22 s
    is within 20 s of grace of stream time 30 s; 0 s would make it late)."""
    records = with_offsets([Rec("a", 0), Rec("b", 20), Rec("a", 2), Rec("c", 5), Rec("d", 30), Rec("f", 22)])
    run = _restarted(
        spark, tmp_path, _sessions("0 seconds", count=True), _sessions("20 seconds", count=True), records, 2
    )
    assert _updates(run) == [("a", 0, 0, 1), ("b", 20, 20, 1), ("d", 30, 30, 1), ("f", 22, 22, 1)]


def test_a_partition_idle_in_a_run_is_held_to_that_runs_grace(spark, tmp_path):
    """A windowed count over three runs, grace 20 s, 0 s, then 20 s again; both partitions at stream
    time 25 s after the first, where [0 s, 10 s) is open (it closes at 30 s under 20 s of grace).
    Partition 1 gets no record in the middle run: its stream time stays at 25 s, so under that
    run's 0 s its window [0 s, 10 s) closed there, and x@2 is late in the third run although 20 s
    of grace would reach it; y@26 counts 2 in the open [20 s, 30 s)."""
    records = with_offsets(
        [Rec("a", 1), Rec("b", 25), Rec("x", 1, partition=1), Rec("y", 25, partition=1)]
        + [Rec("c", 26)]
        + [Rec("x", 2, partition=1), Rec("a", 3), Rec("y", 26, partition=1)]
    )
    run = StreamRun(spark, str(tmp_path), _tumbling("20 seconds", count=True))
    for grace, batch in [
        ("20 seconds", records[:4]),
        ("0 seconds", records[4:5]),
        ("20 seconds", records[5:]),
    ]:
        run.op = _tumbling(grace, count=True)
        run.add_batch(batch)
        run.run()
    assert _updates(run) == [
        ("a", 0, 10, 1),
        ("b", 20, 30, 1),
        ("c", 20, 30, 1),
        ("x", 0, 10, 1),
        ("y", 20, 30, 1),
        ("y", 20, 30, 2),
    ]
