"""``late_records=`` of the dedup operators, windowed distinct and the windowed aggregations (the manual,
"Late records"):
"forward" is spec section 2 (test_dedup_spec.py); "drop" drops and counts the late records; with
"side_output" they go to a second output with ``kstreams_reason``. Every policy as a batch
DataFrame, in one micro-batch, and one micro-batch per record with a restart from the checkpoint,
against the reference model and by hand."""

import pytest
from kstreams_spark import KStream, KStreamsError, operator_metrics
from pyspark.sql import functions as F
from reference import dedup_reference_with_late
from streams import Rec, StreamRun, each_example, run_examples, with_offsets

# The spec's examples with late records, one per partition (interval 10 s), shifted so that the
# partitions' stream times differ by less than the watermark delay (spec section 8): the late ones
# are a@9 (p0, p1), k@9 (p2) and k1@11 (p3); the null key of p1 is late too, but rule 1 forwards it.
RECORDS = with_offsets(
    [
        Rec("a", 20, partition=0),
        Rec("a", 20, partition=1),
        Rec("k", 20, partition=2),
        Rec("k1", 12, partition=3),
        Rec("a", 12, partition=0),  # duplicate
        Rec("a", 10, partition=1),  # duplicate
        Rec("k", 25, partition=2),  # duplicate
        Rec("k2", 23, partition=3),
        Rec("a", 9, partition=0),  # late
        Rec("a", 9, partition=1),  # late
        Rec("k", 11, partition=2),  # late and a duplicate of k@20: a duplicate
        Rec("k1", 11, partition=3),  # late
        Rec("k", 9, partition=2),  # late
        Rec(None, 6, partition=1),  # null key: forwarded under every policy
    ]
)
LATE_VALUES = sorted(["v8", "v9", "v11", "v12"])
DUPLICATE_VALUES = sorted(["v4", "v5", "v6", "v10"])


def dedup_ops(late):
    # ids unique per partition, so the global store judges like the per-partition ones here
    by_partition_id = F.concat_ws("/", F.col("partition").cast("string"), F.col("key"))
    return {
        "by_key": lambda df: KStream(df).deduplicate_by_key("10 seconds", late_records=late),
        "by_key_value": lambda df: KStream(df).deduplicate_by_key_value(
            F.lit("id"), "10 seconds", late_records=late
        ),
        "deduplicate": lambda df: KStream(df).deduplicate(
            F.when(F.col("key").isNotNull(), by_partition_id), "10 seconds", late_records=late
        ),
    }


def output(spark, tmp_path, op, mode, records=RECORDS, progress=None):
    """``op``'s output over ``records``: a batch DataFrame, one micro-batch, or one micro-batch per
    record with a restart from the checkpoint half-way ("split_restart"); a stream's progress
    reports are appended to ``progress`` if given."""
    if mode == "batch":
        from streams import batch_df

        return op(batch_df(spark, records))
    stream = StreamRun(spark, str(tmp_path), op)
    batches = [records] if mode == "one_micro_batch" else [[r] for r in records]
    half = len(batches) // 2 if mode == "split_restart" else len(batches)
    for b in batches[:half]:
        stream.add_batch(b)
    stream.run()
    if half < len(batches):
        for b in batches[half:]:
            stream.add_batch(b)
        stream.run()
    if progress is not None:
        progress.extend(stream.progress)
    return stream.output()


def run(spark, tmp_path, op, mode, records=RECORDS, progress=None):
    """``op``'s output rows over ``records`` as (value, kstreams_reason or None), sorted by value."""
    out = output(spark, tmp_path, op, mode, records, progress)
    reason = "kstreams_reason" in out.columns
    return sorted((r["value"], r["kstreams_reason"] if reason else None) for r in out.collect())


def test_the_reference_model_agrees_with_the_hand_written_expectations():
    forwarded, late = dedup_reference_with_late(RECORDS, 10.0)
    assert sorted(r.value for r in late) == LATE_VALUES
    assert sorted(r.value for r in forwarded) == sorted(
        r.value for r in RECORDS if r.value not in DUPLICATE_VALUES
    )


@pytest.mark.parametrize("mode", ["batch", "one_micro_batch", "split_restart"])
def test_late_records_policy(spark, tmp_path, mode):
    """Every operator under "drop" and "side_output" ("forward": test_dedup_spec.py), each over its
    own copy of RECORDS in one query (streams.run_examples)."""
    forwarded, late_records = dedup_reference_with_late(RECORDS, 10.0)
    on_time = sorted(r.value for r in forwarded if r not in late_records)
    cases = [
        (late, op) for late in ("drop", "side_output") for op in ("by_key", "by_key_value", "deduplicate")
    ]

    def policy(late, op):
        def run(df):
            dedup = dedup_ops(late)[op](df)
            if late == "side_output":
                return dedup.with_side_output
            # the same columns as the side output's, for the merge
            return dedup.df.withColumn("kstreams_reason", F.lit(None).cast("string"))

        return run

    each_case = each_example([([i], policy(late, op)) for i, (late, op) in enumerate(cases)])

    rows = run_examples(spark, tmp_path, {f"{late}-{op}": RECORDS for late, op in cases}, each_case, mode)
    got = {name: sorted((r["value"], r["kstreams_reason"]) for r in out) for name, out in rows.items()}
    assert got == {
        f"{late}-{op}": (
            sorted([(v, None) for v in on_time] + [(v, "late") for v in LATE_VALUES])
            if late == "side_output"
            else [(v, None) for v in on_time]
        )
        for late, op in cases
    }


def test_side_output_and_df_alone_and_the_counters(spark, tmp_path):
    """Each output written by its own query, and the counters: under "side_output" those of the
    query of the table alone (one micro-batch per record, restarted), under "drop" those of a run
    of five records per micro-batch."""
    ks = lambda df: KStream(df).deduplicate_by_key("10 seconds", late_records="side_output")  # noqa: E731
    progress = []
    assert run(spark, tmp_path / "main", lambda df: ks(df).df, "split_restart", progress=progress) == [
        (r.value, None)
        for r in sorted(RECORDS, key=lambda r: r.value)
        if r.value not in LATE_VALUES + DUPLICATE_VALUES
    ]
    side = run(spark, tmp_path / "side", lambda df: ks(df).side_output, "split_restart")
    assert side == [(v, "late") for v in LATE_VALUES]

    assert operator_metrics(progress)["kstreams_deduplicate_by_key"] == {
        "forwarded": len(RECORDS) - 8,
        "duplicates_dropped": 4,
        "late_side_output": 4,
    }
    stream = StreamRun(spark, str(tmp_path / "drop"), lambda df: dedup_ops("drop")["by_key"](df).df)
    for i in range(0, len(RECORDS), 5):
        stream.add_batch(RECORDS[i : i + 5])
    stream.run()
    assert operator_metrics(stream.progress)["kstreams_deduplicate_by_key"] == {
        "forwarded": len(RECORDS) - 8,
        "duplicates_dropped": 4,
        "late_dropped": 4,
    }


def test_a_bad_policy_and_a_missing_side_output_say_what_is_wrong(spark):
    from streams import batch_df

    ks = KStream(batch_df(spark, RECORDS))
    with pytest.raises(
        KStreamsError, match="late_records must be 'forward', 'drop' or 'side_output', got 'skip'"
    ):
        ks.deduplicate_by_key("10 seconds", late_records="skip")
    with pytest.raises(KStreamsError, match="late_records must be .* got True"):
        ks.deduplicate("key", "10 seconds", late_records=True)
    with pytest.raises(KStreamsError, match="this stream has no side output"):
        _ = ks.deduplicate_by_key("10 seconds").side_output
    with pytest.raises(KStreamsError, match="this stream has no side output"):
        _ = (
            ks.deduplicate_by_key("10 seconds", late_records="side_output")
            .filter(F.lit(True))
            .with_side_output
        )


@pytest.mark.parametrize("mode", ["batch", "one_micro_batch", "split_restart"])
@pytest.mark.parametrize("case", ["tumbling_10s", "session_gap_10s", "session_gap_9s"])
def test_windowed_distinct_routes_the_records_of_closed_windows(spark, tmp_path, case, mode):
    """Spec section 3's example: the records the default drops as late (7 and the second 22 for
    tumbling windows, 7 for sessions) go to the side output instead, with a null window."""
    from test_windowed_and_sequence import CASES, SECONDS

    windows, expected, counts = CASES[case]
    records = with_offsets([Rec("k", s) for s in SECONDS])
    op = lambda df: KStream(df).group_by_key().windowed_by(windows).distinct("side_output").with_side_output  # noqa: E731
    out = run(spark, tmp_path, op, mode, records)
    by_second = {r.value: r.t for r in records}
    late = ["v9", "v10"] if case == "tumbling_10s" else ["v9"]
    assert len(late) == counts["late_dropped"]
    assert sorted((by_second[v], reason) for v, reason in out) == sorted(
        [(t, None) for t, _, _ in expected] + [(by_second[v], "window closed") for v in late]
    )


def test_windowed_distinct_counts_and_refuses_forward(spark, tmp_path):
    from test_windowed_and_sequence import CASES, SECONDS

    windows, _, counts = CASES["tumbling_10s"]
    records = with_offsets([Rec("k", s) for s in SECONDS])
    side = lambda df: KStream(df).group_by_key().windowed_by(windows).distinct("side_output").side_output  # noqa: E731
    stream = StreamRun(spark, str(tmp_path), side)
    for i in range(0, len(records), 4):
        stream.add_batch(records[i : i + 4])
    stream.run()
    output = stream.output()
    assert output.columns == ["key", "value", "timestamp", "partition", "offset", "window", "kstreams_reason"]
    rows = output.orderBy("offset").collect()
    assert [(r.value, r.window, r.kstreams_reason) for r in rows] == [
        ("v9", None, "window closed"),
        ("v10", None, "window closed"),
    ]
    assert operator_metrics(stream.progress)["kstreams_windowed_distinct"] == {
        "forwarded": counts["forwarded"],
        "duplicates_dropped": counts["duplicates_dropped"],
        "late_side_output": counts["late_dropped"],
    }
    from streams import batch_df

    grouped = KStream(batch_df(spark, records)).group_by_key().windowed_by(windows)
    with pytest.raises(KStreamsError, match="windowed distinct cannot forward a record of a closed window"):
        grouped.distinct("forward")


# ---- windowed aggregations: count, reduce, aggregate ----
#
# Spec section 3's example (one key, seconds 4,5,6, 23,22,24, 34,33,32, 7,22,35; values v0..v11).
# An aggregation's window closes by its partition's stream time (spec section 5), in every split
# alike: 34 closes [0,10) and [20,30) (tumbling) and the session [4,6] (gap 10 s) before 7 (v9)
# and the second 22 (v10) arrive: tumbling routes both, sessions only 7 (the second 22 joins
# [22,34], still open).

# Per update, in order: window start, end, the count, the reduce (tumbling: "+"-joined) or aggregate
# (sessions: concatenated) of the values, timestamp; "*" marks the update a late record would have
# made had its window been open.
TUMBLING = [
    (0, 10, 1, "v0", 4), (0, 10, 2, "v0+v1", 5), (0, 10, 3, "v0+v1+v2", 6),
    (20, 30, 1, "v3", 23), (20, 30, 2, "v3+v4", 23), (20, 30, 3, "v3+v4+v5", 24),
    (30, 40, 1, "v6", 34), (30, 40, 2, "v6+v7", 34), (30, 40, 3, "v6+v7+v8", 34),
    (0, 10, 4, "v0+v1+v2+v9", 7, "*"), (20, 30, 4, "v3+v4+v5+v10", 24, "*"),
    (30, 40, 4, "v6+v7+v8+v11", 35),
]  # fmt: skip
# Sessions, gap 10 s: a record that touches a session gives that session a tombstone (value None,
# timestamped with its end) and then the merged session's update (Kafka Streams 4.3).
SESSIONS = [
    (4, 4, 1, "v0", 4),
    (4, 4, None, None, 4), (4, 5, 2, "v0v1", 5),
    (4, 5, None, None, 5), (4, 6, 3, "v0v1v2", 6),
    (23, 23, 1, "v3", 23),
    (23, 23, None, None, 23), (22, 23, 2, "v3v4", 23),
    (22, 23, None, None, 23), (22, 24, 3, "v3v4v5", 24),
    (22, 24, None, None, 24), (22, 34, 4, "v3v4v5v6", 34),
    (22, 34, None, None, 34), (22, 34, 5, "v3v4v5v6v7", 34),
    (22, 34, None, None, 34), (22, 34, 6, "v3v4v5v6v7v8", 34),
    (4, 6, None, None, 6, "*"), (4, 7, 4, "v0v1v2v9", 7, "*"),
    (22, 34, None, None, 34), (22, 34, 7, "v3v4v5v6v7v8v10", 34),
    (22, 34, None, None, 34), (22, 35, 8, "v3v4v5v6v7v8v10v11", 35),
]  # fmt: skip
# the late input records: (key, value, second, partition, offset), kstreams_reason
TUMBLING_LATE = [(("k", "v9", 7, 0, 9), "window closed"), (("k", "v10", 22, 0, 10), "window closed")]
SESSION_LATE = [(("k", "v9", 7, 0, 9), "window closed")]


def windowed_aggregations(late_records):
    from kstreams_spark import SessionWindows, TimeWindows

    tumbling = TimeWindows.of_size_with_no_grace("10 seconds")
    sessions = SessionWindows.of_inactivity_gap_with_no_grace("10 seconds")
    grouped = lambda df, w: KStream(df).group_by_key().windowed_by(w)  # noqa: E731
    return {
        "tumbling_count": (
            lambda df: grouped(df, tumbling).count(late_records=late_records),
            (TUMBLING, 2),
            TUMBLING_LATE,
        ),
        "tumbling_reduce": (
            lambda df: grouped(df, tumbling).reduce(
                lambda agg, v: F.concat(agg, F.lit("+"), v), late_records=late_records
            ),
            (TUMBLING, 3),
            TUMBLING_LATE,
        ),
        "session_count": (
            lambda df: grouped(df, sessions).count(late_records=late_records),
            (SESSIONS, 2),
            SESSION_LATE,
        ),
        "session_aggregate": (
            lambda df: grouped(df, sessions).aggregate(
                F.lit(""),
                lambda agg, v: F.concat(agg, v),
                lambda a, b: F.concat(a, b),
                late_records=late_records,
            ),
            (SESSIONS, 3),
            SESSION_LATE,
        ),
    }


def section_3_records():
    from test_windowed_and_sequence import SECONDS

    return with_offsets([Rec("k", s) for s in SECONDS])


def seconds(t):
    from test_windowed_and_sequence import ts

    return None if t is None else int((t - ts(0)).total_seconds())


def updates(expected):
    """The hand-written updates of ``expected`` (a table above and the index of the operator's
    value in it) as (key, start, end, value, timestamp), without those marked for late records."""
    table, value = expected
    return [("k", u[0], u[1], u[value], u[4]) for u in table if len(u) == 5]


def table_rows(df):
    """(key, window start, window end, value, timestamp) of each table update, in seconds."""
    return [
        (r.key, seconds(r.window.start), seconds(r.window.end), r.value, seconds(r.timestamp))
        for r in df.collect()
    ]


def late_rows(df):
    """((key, value, timestamp, partition, offset), kstreams_reason) of each late input record."""
    return [
        ((r.key, r.value, seconds(r.timestamp), r.partition, r.offset), r.kstreams_reason)
        for r in df.collect()
    ]


def multiset(rows):
    """Rows compared without order (a sink keeps none); None sorts first."""
    return sorted(rows, key=lambda row: repr(row))


@pytest.mark.parametrize("mode", ["batch", "one_micro_batch", "split_restart"])
@pytest.mark.parametrize("op", ["tumbling_count", "tumbling_reduce", "session_count", "session_aggregate"])
def test_windowed_aggregation_routes_the_records_of_closed_windows(spark, tmp_path, op, mode):
    """One query writes the table's updates and the late records (``with_side_output``)."""
    aggregation, expected, late = windowed_aggregations("side_output")[op]
    out = output(spark, tmp_path, lambda df: aggregation(df).with_side_output, mode, section_3_records())
    assert out.columns == ["key", "window", "value", "timestamp", "kstreams_reason", "kstreams_late_record"]
    got_updates = table_rows(
        out.where("kstreams_reason is null").drop("kstreams_reason", "kstreams_late_record")
    )
    assert multiset(got_updates) == multiset(updates(expected))
    assert out.where("kstreams_reason is null and kstreams_late_record is not null").count() == 0
    routed = out.where("kstreams_reason is not null")
    # a late record's row holds only the reason and the record: its table columns are null
    assert [tuple(r)[:4] for r in routed.collect()] == [(None, None, None, None)] * len(late)
    got_late = late_rows(routed.select("kstreams_late_record.*", "kstreams_reason"))
    assert multiset(got_late) == multiset(late)


@pytest.mark.parametrize("op", ["tumbling_count", "session_count"])
def test_windowed_aggregation_side_output_and_df_alone_and_the_counters(spark, tmp_path, op):
    """Each output written by its own query, one micro-batch per record with a restart; the
    counters under "side_output" from the table's query, under "drop" (the default, unchanged: the
    late records are gone) from a run of its own."""
    aggregation, expected, late = windowed_aggregations("side_output")[op]
    progress = []
    table = output(
        spark, tmp_path / "df", lambda df: aggregation(df).df, "split_restart", section_3_records(), progress
    )
    assert table.columns == ["key", "window", "value", "timestamp"]
    assert multiset(table_rows(table)) == multiset(updates(expected))
    side = output(
        spark, tmp_path / "side", lambda df: aggregation(df).side_output, "split_restart", section_3_records()
    )
    # windowed distinct's side output without its result's `window`: the input's columns, the reason
    assert side.columns == ["key", "value", "timestamp", "partition", "offset", "kstreams_reason"]
    assert multiset(late_rows(side)) == multiset(late)

    name = "kstreams_count_windowed" if op == "tumbling_count" else "kstreams_count_session_windowed"
    counters = {
        "forwarded": len(updates(expected)),
        "null_keys_dropped": 0,
        "null_values_dropped": 0,
        "idempotent-updates-dropped": 0,
    }
    assert operator_metrics(progress)[name] == {**counters, "late_side_output": len(late)}
    dropping = windowed_aggregations("drop")[op][0]
    stream = StreamRun(spark, str(tmp_path / "drop"), lambda df: dropping(df).df)
    for r in section_3_records():
        stream.add_batch([r])
    stream.run()
    assert multiset(table_rows(stream.output())) == multiset(updates(expected))
    assert operator_metrics(stream.progress)[name] == {**counters, "late_dropped": len(late)}


def test_windowed_aggregation_refuses_forward_a_bad_policy_and_a_missing_side_output(spark):
    from kstreams_spark import SessionWindows, TimeWindows
    from streams import batch_df

    grouped = KStream(batch_df(spark, section_3_records())).group_by_key()
    tumbling = grouped.windowed_by(TimeWindows.of_size_with_no_grace("10 seconds"))
    sessions = grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace("10 seconds"))
    concat = lambda agg, v: F.concat(agg, v)  # noqa: E731
    for refused in [
        lambda: tumbling.count(late_records="forward"),
        lambda: tumbling.reduce(concat, late_records="forward"),
        lambda: tumbling.aggregate(F.lit(""), concat, late_records="forward"),
        lambda: sessions.count(late_records="forward"),
        lambda: sessions.reduce(concat, late_records="forward"),
        lambda: sessions.aggregate(F.lit(""), concat, concat, late_records="forward"),
    ]:
        with pytest.raises(
            KStreamsError, match=r"cannot forward a record of a closed window \(its window's result"
        ):
            refused()
    with pytest.raises(KStreamsError, match="a windowed count cannot forward"):
        sessions.count(late_records="forward")
    with pytest.raises(
        KStreamsError, match="late_records must be 'forward', 'drop' or 'side_output', got 'skip'"
    ):
        tumbling.count(late_records="skip")
    with pytest.raises(KStreamsError, match="late_records must be .* got None"):
        sessions.reduce(concat, late_records=None)
    for without in [
        lambda: tumbling.count().side_output,
        lambda: tumbling.count(late_records="drop").with_side_output,
        lambda: grouped.count().side_output,
        lambda: tumbling.count(late_records="side_output").to_stream().to_table().side_output,
    ]:
        with pytest.raises(KStreamsError, match="this table has no side output"):
            without()
    # the default is "drop": a batch DataFrame closes windows by its partition's stream time too
    assert multiset(table_rows(tumbling.count().df)) == multiset(updates((TUMBLING, 2)))
