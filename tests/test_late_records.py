"""``late_records=`` of the dedup operators and windowed distinct (README, "Late records"):
"forward" is spec section 2 (test_dedup_spec.py); "drop" drops and counts the late records; with
"side_output" they go to a second output with ``kstreams_reason``. Every policy as a batch
DataFrame, in one micro-batch, and one micro-batch per record with a restart from the checkpoint,
against the reference model and by hand."""

import pytest
from kstreams_spark import KStream, KStreamsError, operator_metrics
from pyspark.sql import functions as F
from reference import dedup_reference_with_late
from streams import Rec, StreamRun, with_offsets

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


def run(spark, tmp_path, op, mode, records=RECORDS):
    """``op``'s output rows over ``records`` as (value, kstreams_reason or None), sorted by value."""
    if mode == "batch":
        from streams import batch_df

        out = op(batch_df(spark, records))
    else:
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
        out = stream.output()
    reason = "kstreams_reason" in out.columns
    return sorted((r["value"], r["kstreams_reason"] if reason else None) for r in out.collect())


def test_the_reference_model_agrees_with_the_hand_written_expectations():
    forwarded, late = dedup_reference_with_late(RECORDS, 10.0)
    assert sorted(r.value for r in late) == LATE_VALUES
    assert sorted(r.value for r in forwarded) == sorted(
        r.value for r in RECORDS if r.value not in DUPLICATE_VALUES
    )


@pytest.mark.parametrize("mode", ["batch", "one_micro_batch", "split_restart"])
@pytest.mark.parametrize("op", ["by_key", "by_key_value", "deduplicate"])
@pytest.mark.parametrize("late", ["drop", "side_output"])  # "forward": test_dedup_spec.py
def test_late_records_policy(spark, tmp_path, late, op, mode):
    forwarded, late_records = dedup_reference_with_late(RECORDS, 10.0)
    on_time = sorted(r.value for r in forwarded if r not in late_records)
    dedup = dedup_ops(late)[op]
    if late == "side_output":
        out = run(spark, tmp_path, lambda df: dedup(df).with_side_output, mode)
        assert out == sorted([(v, None) for v in on_time] + [(v, "late") for v in LATE_VALUES])
    else:
        out = run(spark, tmp_path, lambda df: dedup(df).df, mode)
        assert out == [(v, None) for v in on_time]


def test_side_output_and_df_alone_and_the_counters(spark, tmp_path):
    """Each output written by its own query, and the counters of one split over micro-batches."""
    ks = lambda df: KStream(df).deduplicate_by_key("10 seconds", late_records="side_output")  # noqa: E731
    assert run(spark, tmp_path / "main", lambda df: ks(df).df, "split_restart") == [
        (r.value, None)
        for r in sorted(RECORDS, key=lambda r: r.value)
        if r.value not in LATE_VALUES + DUPLICATE_VALUES
    ]
    side = run(spark, tmp_path / "side", lambda df: ks(df).side_output, "split_restart")
    assert side == [(v, "late") for v in LATE_VALUES]

    for late, counter in [("side_output", "late_side_output"), ("drop", "late_dropped")]:
        stream = StreamRun(
            spark, str(tmp_path / late), lambda df, late=late: dedup_ops(late)["by_key"](df).df
        )
        for i in range(0, len(RECORDS), 5):
            stream.add_batch(RECORDS[i : i + 5])
        stream.run()
        assert operator_metrics(stream.progress)["kstreams_deduplicate_by_key"] == {
            "forwarded": len(RECORDS) - 8,
            "duplicates_dropped": 4,
            counter: 4,
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
