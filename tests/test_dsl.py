"""SEMANTICS.md sections 5 and 6: the Kafka Streams DSL, result timestamps (KIP-258/259) and emit
on change (KIP-557), with the test vectors of the DSL issue, as a batch DataFrame, in one
micro-batch, one micro-batch per record, and through a restart.

Two-input operators read one source: partition 0 is the left input, partition 1 the right."""

import datetime as dt

import pytest
from kstreams_spark import JoinWindows, KStream, KStreamsError, TimeWindows, operator_metrics
from pyspark.sql import functions as F
from streams import BASE, Rec, StreamRun, batch_df, run_mode, with_offsets

# "split" (one micro-batch per record) is covered by "split_restart", which also restarts
DSL_MODES = ("batch", "one_micro_batch", "split_restart")


def at(ms):
    return (BASE + dt.timedelta(milliseconds=ms)).replace(tzinfo=None)


def _order(row):
    return tuple((x is not None, x) for x in row)


class Rows(list):
    """Rows compared as a multiset (a sink does not keep order); None sorts first."""

    def __eq__(self, other):
        return sorted(self, key=_order) == sorted(other, key=_order)

    __hash__ = None


def table_rows(df, *columns):
    """(key, *columns, timestamp in ms after BASE) of each row."""
    rows = df.select("key", *columns, "timestamp").collect()
    return Rows(tuple(r[:-1]) + ((r["timestamp"] - at(0)) // dt.timedelta(milliseconds=1),) for r in rows)


def sides(df):
    ks = KStream(df)
    return ks.filter(F.col("partition") == 0), ks.filter(F.col("partition") == 1)


def concat_joiner(left, right):
    return F.concat_ws("+", left, right)


# ---- stateless operators keep the timestamp ----

STATELESS = [Rec("a", ms=5, value="x y"), Rec("b", ms=3, value="z"), Rec(None, ms=9, value="w")]


@pytest.mark.parametrize("mode", ["batch", "one_micro_batch"])
def test_stateless_operators_keep_timestamps(spark, tmp_path, mode):
    def op(df):
        ks = KStream(df)
        return (
            ks.filter(lambda k, v: k.isNotNull())
            .map_values(lambda v: F.upper(v))
            .flat_map_values(lambda v: F.split(v, " "))
            .select_key(lambda k, v: F.concat(k, F.lit("-"), v))
            .df
        )

    out = run_mode(spark, tmp_path, STATELESS, op, mode)
    assert table_rows(out, "value") == [("a-X", "X", 5), ("a-Y", "Y", 5), ("b-Z", "Z", 3)]


def test_map_flat_map_filter_not_merge_split(spark):
    df = batch_df(spark, with_offsets(STATELESS))
    ks = KStream(df)
    assert table_rows(ks.map(lambda k, v: (v, k)).df, "value") == [
        ("w", None, 9),
        ("x y", "a", 5),
        ("z", "b", 3),
    ]
    pairs = ks.flat_map(
        lambda k, v: F.array(
            F.struct(k.alias("key"), v.alias("value")), F.struct(v.alias("key"), k.alias("value"))
        )
    )
    # one record in, two out, each at its input's timestamp (a null key or value is kept)
    assert table_rows(pairs.df, "value") == [
        (None, "w", 9),
        ("a", "x y", 5),
        ("b", "z", 3),
        ("w", None, 9),
        ("x y", "a", 5),
        ("z", "b", 3),
    ]
    assert table_rows(ks.filter_not(F.col("key") == "a").df, "value") == [
        (None, "w", 9),
        ("b", "z", 3),
    ]  # a null predicate counts as false, so filter_not keeps it
    merged = ks.filter(F.col("key") == "a").merge(ks.filter(F.col("key") == "b"))
    assert table_rows(merged.df, "value") == [("a", "x y", 5), ("b", "z", 3)]
    branches = (
        ks.split()
        .branch(F.col("key") == "a", "a")
        .branch(lambda k, v: v.contains("z"), "z")
        .default_branch("rest")
    )
    assert {n: table_rows(b.df, "value") for n, b in branches.items()} == {
        "a": [("a", "x y", 5)],
        "z": [("b", "z", 3)],
        "rest": [(None, "w", 9)],
    }


def test_peek_calls_the_action_once_per_record(spark, tmp_path):
    ks = KStream(batch_df(spark, with_offsets(STATELESS)))
    log = tmp_path / "peeked.txt"

    def action(row):  # runs in a Python worker process: leave a trace in a file
        with open(log, "a") as f:
            f.write(f"{row.key}\n")

    assert table_rows(ks.peek(action).df, "value") == table_rows(ks.df, "value")
    assert sorted(log.read_text().split()) == ["None", "a", "b"]


def test_to_kafka_records(spark):
    df = batch_df(spark, with_offsets(STATELESS))
    writer = KStream(df).to("out-topic", **{"kafka.bootstrap.servers": "127.0.0.1:1"})
    from kstreams_spark._jvm import python_dataframe

    rows = python_dataframe(KStream(df)._j.toKafkaRecords("out-topic"), spark).collect()
    assert sorted(
        (r.key, r.value, r.topic, r.headers[0].key, r.headers[0].value.decode()) for r in rows if r.key
    ) == [
        (
            "a",
            "x y",
            "out-topic",
            "kstreams.timestamp",
            str(int((at(5) - dt.datetime(1970, 1, 1)).total_seconds() * 1000)),
        ),
        (
            "b",
            "z",
            "out-topic",
            "kstreams.timestamp",
            str(int((at(3) - dt.datetime(1970, 1, 1)).total_seconds() * 1000)),
        ),
    ]
    assert writer is not None


# ---- aggregations: timestamp = max folded in (KIP-258) ----

AGG = [Rec("1", ms=5, value="a"), Rec("1", ms=3, value="b"), Rec("1", ms=10, value="c")]


@pytest.mark.parametrize("mode", DSL_MODES)
def test_count_and_reduce_timestamps(spark, tmp_path, mode):
    out = run_mode(spark, tmp_path / "count", AGG, lambda df: KStream(df).group_by_key().count().df, mode)
    assert table_rows(out, "value") == [("1", 1, 5), ("1", 2, 5), ("1", 3, 10)]
    out = run_mode(
        spark,
        tmp_path / "reduce",
        AGG,
        lambda df: KStream(df).group_by_key().reduce(lambda agg, v: F.concat(agg, v)).df,
        mode,
    )
    assert table_rows(out, "value") == [("1", "a", 5), ("1", "ab", 5), ("1", "abc", 10)]


def test_aggregate_keeps_initializer_type_and_skips_nulls(spark, tmp_path):
    records = AGG + [Rec(None, ms=11, value="d"), Rec("1", ms=12, value=None)]
    run = StreamRun(
        spark,
        str(tmp_path),
        lambda df: KStream(df).group_by_key().aggregate(F.lit(0), lambda agg, v: agg + F.length(v)).df,
    )
    run.add_batch(with_offsets(records))
    run.run()
    assert table_rows(run.output(), "value") == [("1", 1, 5), ("1", 2, 5), ("1", 3, 10)]
    assert operator_metrics(run.progress)["kstreams_aggregate"] == {
        "forwarded": 3,
        "null_keys_dropped": 1,
        "null_values_dropped": 1,
        "late_dropped": 0,
        "idempotent-updates-dropped": 0,
    }


def test_reduce_drops_idempotent_updates(spark):
    records = [Rec("k", ms=1, value="x"), Rec("k", ms=2, value="x"), Rec("k", ms=3, value="y")]
    out = (
        KStream(batch_df(spark, with_offsets(records)))
        .group_by_key()
        .reduce(lambda agg, v: F.greatest(agg, v))
        .df
    )
    assert table_rows(out, "value") == [("k", "x", 1), ("k", "y", 3)]


WINDOWED = [Rec("k", ms=t) for t in (1, 2, 5, 8, 3)]


@pytest.mark.parametrize("mode", DSL_MODES)
def test_windowed_count_timestamp_is_max_in_window(spark, tmp_path, mode):
    windows = TimeWindows.of_size_with_no_grace("10 milliseconds")
    out = run_mode(
        spark, tmp_path, WINDOWED, lambda df: KStream(df).group_by_key().windowed_by(windows).count().df, mode
    )
    assert table_rows(out, "value") == [("k", 1, 1), ("k", 2, 2), ("k", 3, 5), ("k", 4, 8), ("k", 5, 8)]
    assert {(r.window.start, r.window.end) for r in out.collect()} == {(at(0), at(10))}


def test_windowed_count_drops_records_of_closed_windows(spark, tmp_path):
    windows = TimeWindows.of_size_and_grace("10 milliseconds", "5 milliseconds")
    run = StreamRun(
        spark, str(tmp_path), lambda df: KStream(df).group_by_key().windowed_by(windows).count().df
    )
    for r in with_offsets([Rec("k", ms=1), Rec("k", ms=14), Rec("k", ms=2), Rec("k", ms=15), Rec("k", ms=3)]):
        run.add_batch([r])
    run.run()
    # window [0,10) closes when the watermark (delay 0) reaches 10 + 5: the record at 3 is late
    assert table_rows(run.output(), "value") == [("k", 1, 1), ("k", 1, 14), ("k", 2, 2), ("k", 2, 15)]
    assert operator_metrics(run.progress)["kstreams_count_windowed"]["late_dropped"] == 1


# ---- stream-stream join: timestamp = max(t1, t2) (KIP-259) ----


def join_records():
    left = [Rec(str(i), ms=1000 + i, partition=0, value=f"B{i}") for i in range(4)]
    right = [
        Rec(str(i), ms=ms, partition=1, value=f"{p}{i}")
        for p, ms in (("h", 900), ("i", 901), ("b", 1100))
        for i in range(4)
    ]
    return left + right


JOINED = [
    ("0", "B0+b0", 1100),
    ("0", "B0+h0", 1000),
    ("0", "B0+i0", 1000),
    ("1", "B1+b1", 1100),
    ("1", "B1+i1", 1001),
    ("2", "B2+b2", 1100),
    ("3", "B3+b3", 1100),
]


@pytest.mark.parametrize("mode", DSL_MODES)
def test_stream_stream_join_vector(spark, tmp_path, mode):
    windows = JoinWindows.of_time_difference_with_no_grace("100 milliseconds")

    def op(df):
        left, right = sides(df)
        return left.join(right, concat_joiner, windows).df

    out = run_mode(spark, tmp_path, join_records(), op, mode)
    assert table_rows(out, "value") == JOINED
    assert out.columns == ["key", "value", "timestamp"]


@pytest.mark.parametrize("mode", ["batch", "split_restart"])
def test_left_and_outer_join_emit_unmatched_when_window_closes(spark, tmp_path, mode):
    windows = JoinWindows.of_time_difference_with_no_grace("100 milliseconds")
    records = [
        Rec("a", ms=0, partition=0, value="L1"),
        Rec("a", ms=50, partition=1, value="R1"),
        Rec("b", ms=60, partition=0, value="L2"),
        Rec("c", ms=70, partition=1, value="R2"),
        Rec("z", ms=500, partition=0, value="L3"),  # moves the watermark past the others
        Rec("y", ms=501, partition=1, value="R3"),
    ]  # a batch after that fires the timers

    def op(kind):
        def run(df):
            left, right = sides(df)
            return getattr(left, kind)(right, concat_joiner, windows).df

        return run

    left = run_mode(spark, tmp_path / "left", records, op("left_join"), mode)
    outer = run_mode(spark, tmp_path / "outer", records, op("outer_join"), mode)
    expected_left = [("a", "L1+R1", 50), ("b", "L2", 60)]
    expected_outer = expected_left + [("c", "R2", 70)]
    if mode == "batch":  # a batch DataFrame's end closes every window
        expected_left = expected_left + [("z", "L3", 500)]
        expected_outer = expected_outer + [("z", "L3", 500), ("y", "R3", 501)]
    assert table_rows(left, "value") == sorted(expected_left)
    assert table_rows(outer, "value") == sorted(expected_outer)


# ---- table-table join: timestamp = max of the two current rows ----

TABLE_JOIN_SPLIT = [
    Rec("0", ms=5, partition=0, value="X0"),
    Rec("1", ms=6, partition=0, value="X1"),
    Rec("0", ms=0, partition=1, value="Y0"),
    Rec("1", ms=10, partition=1, value="Y1"),
    Rec("0", ms=7, partition=0, value="XX0"),
    Rec("1", ms=7, partition=0, value="XX1"),
]


def table_join(df):
    left, right = sides(df)
    return left.to_table().join(right.to_table(), concat_joiner).df


@pytest.mark.parametrize("mode", ["split_restart"])
def test_table_table_join_vector(spark, tmp_path, mode):
    out = run_mode(spark, tmp_path, TABLE_JOIN_SPLIT, table_join, mode)
    assert table_rows(out, "value") == [
        ("0", "X0+Y0", 5),
        ("0", "XX0+Y0", 7),
        ("1", "X1+Y1", 10),
        ("1", "XX1+Y1", 10),
    ]


@pytest.mark.parametrize("mode", ["batch", "one_micro_batch"])
def test_table_table_join_in_one_micro_batch_merges_sides_by_timestamp(spark, tmp_path, mode):
    # in one micro-batch the tables' changes meet in timestamp order: XX1@7 comes before Y1@10
    out = run_mode(spark, tmp_path, TABLE_JOIN_SPLIT, table_join, mode)
    assert table_rows(out, "value") == [("0", "X0+Y0", 5), ("0", "XX0+Y0", 7), ("1", "XX1+Y1", 10)]


@pytest.mark.parametrize("mode", ["one_micro_batch", "split_restart"])
def test_table_join_delete_gives_tombstone_at_max(spark, tmp_path, mode):
    records = [
        Rec("0", ms=6, partition=0, value="X0"),
        Rec("0", ms=0, partition=1, value="Y0"),
        Rec("0", ms=5, partition=1, value=None),
    ]
    out = run_mode(spark, tmp_path, records, table_join, mode)
    if mode == "one_micro_batch":  # merged by timestamp, the delete@5 comes before X0@6: no row
        assert table_rows(out, "value") == []
    else:
        assert table_rows(out, "value") == [("0", None, 6), ("0", "X0+Y0", 6)]


TABLE_LEFT_OUTER = [
    Rec("0", ms=1, partition=0, value="X0"),
    Rec("1", ms=2, partition=1, value="Y1"),
    Rec("0", ms=3, partition=1, value="Y0"),
    Rec("1", ms=4, partition=1, value=None),
    Rec("0", ms=5, partition=0, value=None),
]


@pytest.mark.parametrize("mode", DSL_MODES)
def test_table_left_and_outer_join(spark, tmp_path, mode):
    """Kafka Streams' KTableKTableLeftJoin / KTableKTableOuterJoin, each result at the max of the
    two current rows' timestamps. Left join: a right-side change joins only when the left row is
    there (Y1 and its delete, with no left 1, give nothing); the left delete X0 -> null gives a
    tombstone at max(5, Y0's 3). Outer join: every change with a row on either side gives a result
    (Y1 alone, then its delete a tombstone at 4); the left delete leaves joiner(null, Y0) at 5.
    Both joins run in one query, their keys prefixed to tell them apart. The records are in
    timestamp order, so merging the sides by timestamp (one micro-batch) and taking them in
    micro-batch order (one record each) see the same sequence."""

    def op(df):
        joins = []
        for kind in ("left_join", "outer_join"):
            left, right = sides(df)
            joined = getattr(left.to_table(), kind)(right.to_table(), concat_joiner).to_stream()
            joins.append(joined.select_key(lambda k, v, kind=kind: F.concat(F.lit(f"{kind}/"), k)))
        return joins[0].merge(joins[1]).df

    out = run_mode(spark, tmp_path, TABLE_LEFT_OUTER, op, mode)
    assert table_rows(out, "value") == [
        ("left_join/0", "X0", 1),
        ("left_join/0", "X0+Y0", 3),
        ("left_join/0", None, 5),
        ("outer_join/0", "X0", 1),
        ("outer_join/0", "X0+Y0", 3),
        ("outer_join/0", "Y0", 5),
        ("outer_join/1", "Y1", 2),
        ("outer_join/1", None, 4),
    ]


# ---- emit on change (KIP-557) ----

EMIT = [
    Rec("A", ms=10, value="1"),
    Rec("B", ms=11, value="2"),
    Rec("A", ms=12, value="1"),
    Rec("B", ms=13, value="3"),
    Rec("A", ms=9, value="1"),
]


@pytest.mark.parametrize("mode", DSL_MODES)
def test_emit_on_change_vector(spark, tmp_path, mode):
    out = run_mode(spark, tmp_path, EMIT, lambda df: KStream(df).to_table().df, mode)
    assert table_rows(out, "value") == [("A", "1", 9), ("A", "1", 10), ("B", "2", 11), ("B", "3", 13)]


def test_emit_on_change_metric_total_and_rate(spark, tmp_path):
    run = StreamRun(spark, str(tmp_path), lambda df: KStream(df).to_table().df)
    for r in with_offsets(EMIT):
        run.add_batch([r])
    run.run()
    metrics = operator_metrics(run.progress, rates=True)["kstreams_to_table"]
    assert metrics["idempotent-updates-dropped"] == 1
    assert metrics["forwarded"] == 4
    assert metrics["idempotent-updates-dropped-rate"] > 0
    observed = [p["observedMetrics"]["kstreams_to_table"]["idempotent-updates-dropped"] for p in run.progress]
    assert sorted(observed) == [0, 0, 0, 0, 1]


def test_merge_of_two_tables_streams_keeps_both_metrics(spark, tmp_path):
    """Spark refuses two different observed metrics of one name in a query; merge renames the other
    side's (``kstreams_to_table_2``) so both tables can feed one sink."""

    def op(df):
        left = KStream(df.where("key = 'A'")).to_table().to_stream()
        right = KStream(df.where("key = 'B'")).to_table().to_stream()
        return left.merge(right).df

    run = StreamRun(spark, str(tmp_path), op)
    run.add_batch(with_offsets(EMIT))
    run.run()
    assert table_rows(run.output(), "value") == [
        ("A", "1", 9),
        ("A", "1", 10),
        ("B", "2", 11),
        ("B", "3", 13),
    ]
    metrics = operator_metrics(run.progress)
    assert metrics["kstreams_to_table"]["forwarded"] == 2
    assert metrics["kstreams_to_table"]["idempotent-updates-dropped"] == 1
    assert metrics["kstreams_to_table_2"]["forwarded"] == 2
    assert metrics["kstreams_to_table_2"]["idempotent-updates-dropped"] == 0


# ---- results carry the watermark: event-time operators can follow in the same query ----


def test_dedup_and_windowed_distinct_follow_a_join_and_an_aggregation(spark, tmp_path):
    windows = JoinWindows.of_time_difference_with_no_grace("100 milliseconds")

    def op(df):
        left, right = sides(df)
        joined = left.join(right, lambda _left, _right: F.lit("same"), windows)
        return joined.deduplicate_by_key("1 second").df

    out = run_mode(spark, tmp_path / "join", join_records(), op, "one_micro_batch")
    assert table_rows(out, "value") == [
        ("0", "same", 1000),
        ("1", "same", 1001),
        ("2", "same", 1100),
        ("3", "same", 1100),
    ]

    def counted(df):
        counts = KStream(df).group_by_key().count().to_stream()
        return (
            counts.group_by_key()
            .windowed_by(TimeWindows.of_size_with_no_grace("10 milliseconds"))
            .distinct()
            .df
        )

    out = run_mode(spark, tmp_path / "agg", WINDOWED, counted, "split")
    assert table_rows(out, "value") == [("k", 1, 1)]
    assert (
        KStream(batch_df(spark, with_offsets(WINDOWED)))
        .group_by_key()
        .count()
        .df.schema["timestamp"]
        .metadata
        == {}
    )


def test_spark_window_aggregation_follows_a_join(spark, tmp_path):
    windows = JoinWindows.of_time_difference_with_no_grace("100 milliseconds")

    def op(df):
        left, right = sides(df)
        joined = left.join(right, concat_joiner, windows).df
        assert joined.schema["timestamp"].metadata == {"spark.watermarkDelayMs": 0}
        return joined.groupBy(F.window("timestamp", "1 second")).count()

    run = StreamRun(spark, str(tmp_path), op)
    run.add_batch(with_offsets(join_records()))
    # two later batches move both sides' watermarks (the query takes the minimum) to 5 s, so
    # Spark emits the window [1 s, 2 s)
    run.add_batch([Rec("8", ms=5000, partition=0, offset=4), Rec("9", ms=5000, partition=1, offset=12)])
    run.add_batch([Rec("8", ms=5001, partition=0, offset=5), Rec("9", ms=5001, partition=1, offset=13)])
    run.run()
    assert [(r.window.start, r["count"]) for r in run.output().collect()] == [(at(1000), 7)]


# ---- bad input ----


def test_adder_that_does_not_resolve_names_the_problem(spark):
    ks = KStream(batch_df(spark, with_offsets(AGG)))
    with pytest.raises(KStreamsError, match="adder of reduce does not resolve"):
        ks.group_by_key().reduce(lambda agg, v: agg + F.col("nope"))


def test_mapper_that_does_not_resolve_is_a_clear_error(spark):
    ks = KStream(batch_df(spark, with_offsets(AGG)))
    with pytest.raises(KStreamsError, match="nope"):
        ks.map_values(lambda v: F.col("nope"))


def test_join_keys_of_different_types(spark):
    ks = KStream(batch_df(spark, with_offsets(AGG)))
    other = KStream(batch_df(spark, with_offsets(AGG)).withColumn("key", F.lit(1)))
    with pytest.raises(KStreamsError, match="keys of the two sides differ in type"):
        ks.join(other, concat_joiner, JoinWindows.of_time_difference_with_no_grace("1 second"))


def test_emit_on_change_loses_nothing_when_the_query_dies_after_the_state_write(spark, tmp_path):
    """KAFKA-12508: Kafka reverted emit-on-change because a crash after the state write and before
    the output commit made the replay see its own update as idempotent and drop it. Spark's state is
    versioned per micro-batch: the replay reads the state of the previous batch."""
    import glob
    import os

    from pyspark.sql import DataFrame

    root = tmp_path
    os.makedirs(root / "in")
    batches = [EMIT[:2], EMIT[2:4], EMIT[4:]]
    offsets = with_offsets(EMIT)
    run = StreamRun(spark, str(root), lambda df: df)
    start = 0
    for batch in batches:
        run.add_batch(offsets[start : start + len(batch)])
        start += len(batch)
    crash = {"batch": 1, "rows": None}

    def sink(batch_df: DataFrame, batch_id: int) -> None:
        rows = batch_df.collect()  # runs the micro-batch: the state store commits its new version
        if batch_id == crash["batch"] and crash["rows"] is None:
            crash["rows"] = rows
            raise RuntimeError("killed between the state write and the sink commit")
        spark.createDataFrame(rows, batch_df.schema).write.mode("overwrite").parquet(
            str(root / "out" / f"batch={batch_id}")
        )

    def start_query():
        source = spark.readStream.schema(run.schema).option("maxFilesPerTrigger", 1).json(str(root / "in"))
        return (
            KStream(source)
            .to_table()
            .df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(root / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )

    query = start_query()
    with pytest.raises(Exception, match="killed between the state write and the sink commit"):
        query.awaitTermination()
    # the crashed batch's state was written (version 2), its output was not committed
    written = glob.glob(str(root / "checkpoint" / "state" / "0" / "*" / "2.*"))
    assert written, os.listdir(root / "checkpoint" / "state" / "0")
    assert not os.path.exists(root / "checkpoint" / "commits" / "1")
    assert [(r.key, r.value) for r in crash["rows"]] == [("B", "3")]

    query = start_query()
    query.awaitTermination()
    out = spark.read.parquet(str(root / "out"))
    assert table_rows(out, "value") == [("A", "1", 9), ("A", "1", 10), ("B", "2", 11), ("B", "3", 13)]
    assert operator_metrics(query.recentProgress)["kstreams_to_table"]["idempotent-updates-dropped"] == 1


# ---- session-windowed aggregations ----

SESSIONS = [Rec("k", ms=t, value=str(t)) for t in (0, 5, 30, 12, 21)]


@pytest.mark.parametrize("mode", DSL_MODES)
def test_session_windowed_count_merges_sessions_with_tombstones(spark, tmp_path, mode):
    """gap 10 ms: 0 and 5 form [0,5]; 30 opens [30,30]; 12 extends [0,5] to [0,12]; 21 bridges
    [0,12] and [30,30] into [0,30] (tombstones for both). A grace of 20 ms keeps 12 and 21 in
    time when each record is its own micro-batch (the watermark is then 30)."""
    from kstreams_spark import SessionWindows

    windows = SessionWindows.of_inactivity_gap_and_grace("10 milliseconds", "20 milliseconds")
    out = run_mode(
        spark, tmp_path, SESSIONS, lambda df: KStream(df).group_by_key().windowed_by(windows).count().df, mode
    )
    got = Rows(
        (
            r.value,
            (r.window.start - at(0)) // dt.timedelta(milliseconds=1),
            (r.window.end - at(0)) // dt.timedelta(milliseconds=1),
            (r.timestamp - at(0)) // dt.timedelta(milliseconds=1),
        )
        for r in out.collect()
    )
    # as Kafka Streams 4.3: a merged-away session's tombstone carries that session's own end
    assert got == [
        (1, 0, 0, 0),
        (None, 0, 0, 0),
        (2, 0, 5, 5),
        (1, 30, 30, 30),
        (None, 0, 5, 5),
        (3, 0, 12, 12),
        (None, 0, 12, 12),
        (None, 30, 30, 30),
        (5, 0, 30, 30),
    ]


def test_session_windowed_count_drops_a_record_whose_session_closed(spark, tmp_path):
    from kstreams_spark import SessionWindows

    windows = SessionWindows.of_inactivity_gap_with_no_grace("10 milliseconds")
    run = StreamRun(
        spark, str(tmp_path), lambda df: KStream(df).group_by_key().windowed_by(windows).count().df
    )
    for r in with_offsets(SESSIONS):
        run.add_batch([r])
    run.run()
    # at watermark 30, 12 would extend [0,5] to [0,12], closed since 12 + gap < 30: late; 21 joins
    # [30,30]
    assert Rows(
        (r.value, (r.timestamp - at(0)) // dt.timedelta(milliseconds=1)) for r in run.output().collect()
    ) == [(1, 0), (None, 0), (2, 5), (1, 30), (None, 30), (2, 30)]
    assert operator_metrics(run.progress)["kstreams_count_session_windowed"]["late_dropped"] == 1


def test_session_windowed_aggregate_needs_a_merger(spark):
    from kstreams_spark import SessionWindows

    grouped = (
        KStream(batch_df(spark, with_offsets(SESSIONS)))
        .group_by_key()
        # a batch DataFrame closes sessions by its partition's stream time too: 20 ms of grace
        # keep 12 and 21 in (after 30 they would be late without it)
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace("10 milliseconds", "20 milliseconds"))
    )
    with pytest.raises(KStreamsError, match="needs a merger"):
        grouped.aggregate(F.lit(""), lambda agg, v: F.concat(agg, v))
    joined = grouped.aggregate(F.lit(""), lambda agg, v: F.concat(agg, v), lambda a, b: F.concat(a, b))
    by_window = {
        (
            (r.window.start - at(0)) // dt.timedelta(milliseconds=1),
            (r.window.end - at(0)) // dt.timedelta(milliseconds=1),
        ): r.value
        for r in joined.df.collect()
        if r.value is not None
    }
    # [0,12] ("0512") and [30,30] ("30") merge in start order, then 21 is added
    assert by_window[(0, 30)] == "05123021"
