"""Every example of SEMANTICS.md section 2, for all three dedup operators, as a batch DataFrame,
in one micro-batch, and one micro-batch per record through a restart from the checkpoint."""

import pytest
from kstreams_spark import KStream
from pyspark.sql import functions as F
from streams import Rec, each_example, forwarded, run_examples

T0 = 100  # "t" in the spec's examples

# (name, interval, records as (key, seconds) or Rec, indices of the forwarded records)
EXAMPLES = [
    ("t_t+8_t+11", "10 seconds", [("a", T0), ("a", T0 + 8), ("a", T0 + 11)], [0, 2]),
    ("t_t-8_t-11", "10 seconds", [("a", T0), ("a", T0 - 8), ("a", T0 - 11)], [0, 2]),
    ("5_15_16", "10 seconds", [("a", 5), ("a", 15), ("a", 16)], [0, 2]),
    ("15_5_4", "10 seconds", [("a", 15), ("a", 5), ("a", 4)], [0, 2]),
    ("interval_0", "0 seconds", [("a", 5), ("a", 5), ("a", 6)], [0, 2]),
    ("20_25_11_9", "10 seconds", [("k", 20), ("k", 25), ("k", 11), ("k", 9)], [0, 3]),
    ("k1_k2_20_k1_9", "10 seconds", [("k1", 10), ("k2", 20), ("k1", 9)], [0, 1]),
    ("k1_k2_21_k1_9", "10 seconds", [("k1", 10), ("k2", 21), ("k1", 9)], [0, 1, 2]),
    ("ms_150_200_60", "100 ms", [("k1", 0.150), ("x", 0.200), ("k1", 0.060)], [0, 1]),
    ("ms_200_50_10", "100 ms", [("x", 0.200), ("k1", 0.050), ("k1", 0.010)], [0, 1, 2]),
    # not in the spec's table, from rule 4: the late a@4 (no duplicate: 11 s from a@15) is
    # forwarded and never stored, and the live entry a@15 stays, so a@14 is its duplicate
    ("15_4_14_late_keeps_entry", "10 seconds", [("a", 15), ("a", 4), ("a", 14)], [0, 1]),
]


def by_key(interval):
    return lambda df: KStream(df).deduplicate_by_key(interval).df


def by_key_value(interval):
    # The id is constant, so (key, id) dedups exactly like key.
    return lambda df: KStream(df).deduplicate_by_key_value(F.lit("same-id"), interval).df


def global_by_id(interval):
    # The id is the key, so with one partition the global store dedups exactly like by-key.
    return lambda df: KStream(df).deduplicate(F.col("key"), interval).df


OPERATORS = {"by_key": by_key, "by_key_value": by_key_value, "deduplicate": global_by_id}


def records_of(example):
    return [r if isinstance(r, Rec) else Rec(r[0], r[1]) for r in example]


# Every example in one query per operator and mode, each on partitions and keys of its own
# (streams.run_examples); "split_restart" is the one-record-per-micro-batch run, with a restart.
@pytest.mark.parametrize("mode", ["batch", "one_micro_batch", "split_restart"])
@pytest.mark.parametrize("op", list(OPERATORS))
def test_spec_examples(spark, tmp_path, op, mode):
    examples = {name: records_of(recs) for name, _, recs, _ in EXAMPLES}
    want = {name: [(examples[name][i].key, f"v{i}") for i in expected] for name, _, _, expected in EXAMPLES}
    # the operator takes one interval: each interval's examples go through an operator of their own
    intervals = {}
    for i, (_, interval, _, _) in enumerate(EXAMPLES):
        intervals.setdefault(interval, []).append(i)

    each_interval = each_example(
        [(indexes, OPERATORS[op](interval)) for interval, indexes in intervals.items()]
    )

    rows = run_examples(spark, tmp_path, examples, each_interval, mode)
    got = {name: [(r["key"], r["value"]) for r in out] for name, out in rows.items()}
    assert got == want


@pytest.mark.parametrize("op", list(OPERATORS))
def test_same_offset_redelivered_in_next_batch_is_forwarded_again(spark, tmp_path, op):
    # Spec: a@10 offset 7 in batch 1, a@10 offset 7 again in batch 2 -> both.
    from streams import StreamRun

    run = StreamRun(spark, str(tmp_path), OPERATORS[op]("10 seconds"))
    run.add_batch([Rec("a", 10, offset=7, value="first")])
    run.add_batch([Rec("a", 10, offset=7, value="again")])
    run.add_batch([Rec("a", 10, offset=8, value="real duplicate")])
    run.run()
    assert forwarded(run.output()) == [("a", "first"), ("a", "again")]
    # every file was its own micro-batch
    assert [p["numInputRows"] for p in run.progress if p["numInputRows"]] == [1, 1, 1]
