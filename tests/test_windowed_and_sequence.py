"""SEMANTICS.md sections 3 and 4: windowed distinct (tumbling and session) and sequence-number
dedup, as a batch DataFrame, in one micro-batch, and one per record through a restart."""

import datetime as dt

import pytest
from kstreams_spark import KStream, KStreamsError, SessionWindows, TimeWindows, operator_metrics
from pyspark.sql import functions as F
from streams import (
    BASE,
    Rec,
    StreamRun,
    batch_df,
    each_example,
    forwarded,
    run_examples,
    run_mode,
    with_offsets,
)

SECONDS = [4, 5, 6, 23, 22, 24, 34, 33, 32, 7, 22, 35]


def ts(seconds):
    return (BASE + dt.timedelta(seconds=seconds)).replace(tzinfo=None)


# Counts: tumbling drops 7 and the second 22 as late (their windows closed at stream time 34).
# Session gap 9: 32 bridges [22, 24] and [33, 34], so the second 22 joins [22, 34] (a duplicate)
# and only 7 is late.


def windowed(windows):
    return lambda df: KStream(df).group_by_key().windowed_by(windows).distinct().df


CASES = {
    "tumbling_10s": (
        TimeWindows.of_size_with_no_grace("10 seconds"),
        [(4, 0, 10), (23, 20, 30), (34, 30, 40)],
        {"forwarded": 3, "duplicates_dropped": 7, "late_dropped": 2},
    ),
    "session_gap_10s": (
        SessionWindows.of_inactivity_gap_with_no_grace("10 seconds"),
        [(4, 4, 4), (23, 23, 23)],
        {"forwarded": 2, "duplicates_dropped": 9, "late_dropped": 1},
    ),
    "session_gap_9s": (
        SessionWindows.of_inactivity_gap_with_no_grace("9 seconds"),
        [(4, 4, 4), (23, 23, 23), (34, 34, 34)],
        {"forwarded": 3, "duplicates_dropped": 8, "late_dropped": 1},
    ),
}


# The three cases in one query per mode, each on partitions and keys of its own
# (streams.run_examples); "split_restart" is the one-record-per-micro-batch run, with a restart.
@pytest.mark.parametrize("mode", ["batch", "one_micro_batch", "split_restart"])
def test_spec_example_windowed_distinct(spark, tmp_path, mode):
    cases = list(CASES)

    each_case = each_example([([i], windowed(CASES[case][0])) for i, case in enumerate(cases)])

    rows = run_examples(
        spark, tmp_path, {case: [Rec("k", s) for s in SECONDS] for case in cases}, each_case, mode
    )
    got = {
        case: [(r["timestamp"], r["window"]["start"], r["window"]["end"]) for r in out]
        for case, out in rows.items()
    }
    assert got == {case: [(ts(t), ts(s), ts(e)) for t, s, e in CASES[case][1]] for case in cases}
    # the output's columns, in this mode's output (the sink's rows in streaming modes)
    for out in rows.values():
        assert [list(r) for r in out] == [
            ["key", "value", "timestamp", "partition", "offset", "window"]
        ] * len(out)


@pytest.mark.parametrize("case", list(CASES))
def test_windowed_distinct_counts_duplicates_and_late_records(spark, tmp_path, case):
    windows, _, counts = CASES[case]
    run = StreamRun(spark, str(tmp_path), windowed(windows))
    for r in with_offsets([Rec("k", s) for s in SECONDS]):
        run.add_batch([r])
    run.run()
    metrics = operator_metrics(run.progress)
    assert len(metrics) == 1
    ((name, got),) = metrics.items()
    assert name.startswith("kstreams_")
    assert got == counts


def test_null_key_passes_with_null_window(spark):
    df = batch_df(spark, with_offsets([Rec(None, 1), Rec(None, 2), Rec("a", 3)]))
    out = windowed(TimeWindows.of_size_with_no_grace("10 s"))(df)
    got = [(r["key"], r["window"]) for r in out.orderBy("offset").collect()]
    assert got == [(None, None), (None, None), ("a", (ts(0), ts(10)))]


@pytest.mark.parametrize("mode", ["one_micro_batch", "split_restart"])
def test_tumbling_grace_keeps_a_window_open(spark, tmp_path, mode):
    # with 5 s grace, window [0,10) closes at stream time 15: 7 after 14 is on time, 8 after 15 late
    records = [Rec("k", 14), Rec("k", 7), Rec("j", 15), Rec("j", 8)]
    out = run_mode(
        spark, tmp_path, records, windowed(TimeWindows.of_size_and_grace("10 s", timedelta_s(5))), mode
    )
    assert [(r["key"], r["window"]["start"]) for r in out.orderBy("offset").collect()] == [
        ("k", ts(10)),
        ("k", ts(0)),
        ("j", ts(10)),
    ]


def timedelta_s(s):
    return dt.timedelta(seconds=s)


@pytest.mark.parametrize("mode", ["one_micro_batch", "split_restart"])
def test_session_bridging_record_merges_two_sessions(spark, tmp_path, mode):
    # gap 5: 0, 12 and 6 each open a session (6 is 6 s from both); 17 and 11 join [12, 17];
    # 6.5 joins [6] and bridges it with [11, 17] (11 - 6.5 <= 5); 23 is 6 s after 17: a new one.
    records = [
        Rec("k", 0),
        Rec("k", 12),
        Rec("k", 6),
        Rec("k", 17),
        Rec("k", 11),
        Rec("k", 6.5),
        Rec("k", 23),
    ]
    out = run_mode(
        spark, tmp_path, records, windowed(SessionWindows.of_inactivity_gap_and_grace("5 s", "30 s")), mode
    )
    assert [r["timestamp"] for r in out.orderBy("offset").collect()] == [ts(0), ts(12), ts(6), ts(23)]


@pytest.mark.parametrize("mode", ["batch", "one_micro_batch", "split_restart"])
def test_sequence_dedup_seed_example(spark, tmp_path, mode):
    seqs = list(range(1, 8)) + [4, 5, 6, 7] + list(range(8, 12))
    records = [Rec("k", i, value=str(s)) for i, s in enumerate(seqs)]
    op = lambda df: KStream(df).deduplicate_by_sequence(F.col("value").cast("long")).df  # noqa
    out = run_mode(spark, tmp_path, records, op, mode)
    assert [int(v) for _, v in forwarded(out)] == list(range(1, 12))


def test_sequence_dedup_incident_over_several_partitions(spark, tmp_path):
    """A producer retry on three partitions (spec section 4): ids 1..7 sent, the producer fails, 4..11 are sent
    again after the failure; each partition keeps its own high-water mark."""
    records = []
    for p in range(3):
        records += [Rec(f"p{p}", i, partition=p, value=str(i)) for i in range(1, 8)]
    for p in range(3):
        records += [Rec(f"p{p}", 10 + i, partition=p, value=str(i)) for i in range(4, 12)]
    records.append(Rec("p0", 30, partition=0, value=None))  # null sequence passes
    op = lambda df: KStream(df).deduplicate_by_sequence(F.col("value").cast("long")).df  # noqa
    run = StreamRun(spark, str(tmp_path), op)
    numbered = with_offsets(records)
    run.add_batch(numbered[:21])
    run.run()
    run.add_batch(numbered[21:30])
    run.add_batch(numbered[30:])
    run.run()
    got = {}
    for r in run.output().collect():
        got.setdefault(r["partition"], []).append(None if r["value"] is None else int(r["value"]))
    assert {p: sorted(v, key=lambda x: (x is None, x)) for p, v in got.items()} == {
        0: list(range(1, 12)) + [None],
        1: list(range(1, 12)),
        2: list(range(1, 12)),
    }
    metrics = operator_metrics(run.progress)
    (counts,) = metrics.values()
    assert counts == {"forwarded": 34, "duplicates_dropped": 12}


def test_sequence_dedup_works_without_a_timestamp_column(spark):
    df = spark.createDataFrame(
        [(0, 0, 1), (0, 1, 2), (0, 2, 1), (1, 0, 1)], "partition int, offset long, seq long"
    )
    out = KStream(df).deduplicate_by_sequence("seq").df
    assert sorted((r["partition"], r["offset"]) for r in out.collect()) == [(0, 0), (0, 1), (1, 0)]


def test_sequence_of_wrong_type(spark):
    df = batch_df(spark, with_offsets([Rec("a", 1)]))
    with pytest.raises(
        KStreamsError, match="sequence expression .*value.* has type string; it must be an integer"
    ):
        KStream(df).deduplicate_by_sequence("value")


def test_dedup_counts_duplicates_in_query_progress(spark, tmp_path):
    run = StreamRun(spark, str(tmp_path), lambda df: KStream(df).deduplicate_by_key("10 s").df)
    run.add_batch(with_offsets([Rec("a", 1), Rec("a", 2), Rec("b", 3), Rec("a", 4)]))
    run.run()
    (counts,) = operator_metrics(run.progress).values()
    assert counts == {"forwarded": 2, "duplicates_dropped": 2}
    last = [p for p in run.progress if p["numInputRows"]][-1]
    assert list(last["observedMetrics"]) == ["kstreams_deduplicate_by_key"]


def test_two_operators_in_one_query_get_distinct_metric_names(spark, tmp_path):
    op = lambda df: KStream(KStream(df).deduplicate_by_key("10 s").df).deduplicate_by_key("1 s").df  # noqa
    run = StreamRun(spark, str(tmp_path), op)
    run.add_batch(with_offsets([Rec("a", 1), Rec("a", 2), Rec("a", 30)]))
    run.run()
    assert operator_metrics(run.progress) == {
        "kstreams_deduplicate_by_key": {"forwarded": 2, "duplicates_dropped": 1},
        "kstreams_deduplicate_by_key_2": {"forwarded": 2, "duplicates_dropped": 0},
    }


def test_bad_windows(spark):
    df = batch_df(spark, with_offsets([Rec("a", 1)]))
    with pytest.raises(KStreamsError, match="window size must be positive"):
        KStream(df).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace("0 s")).distinct()
    with pytest.raises(KStreamsError, match="windowed_by takes TimeWindows or SessionWindows"):
        KStream(df).group_by_key().windowed_by("10 s")


def test_window_state_is_removed_once_windows_close(spark, tmp_path):
    """60 keys, one per second, 1-second tumbling windows: without eviction 60 entries would stay."""
    run = StreamRun(spark, str(tmp_path), windowed(TimeWindows.of_size_with_no_grace("1 second")))
    records = with_offsets([Rec(f"k{i}", i) for i in range(60)])
    for i in range(0, 60, 10):
        run.add_batch(records[i : i + 10])
    run.run()
    state_rows = [p["stateOperators"][0]["numRowsTotal"] for p in run.progress if p["stateOperators"]]
    assert run.output().count() == 60
    assert state_rows[-1] < 25, state_rows
