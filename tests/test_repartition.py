"""Moving a stopped query's state to another number of state partitions (issue 39):
``repartition_state`` and ``kstreams-spark state repartition``.

One query runs an operator of each state shape (per input partition, as bytes and as rows; the
global store spread over id groups; per key; per key hash group with each partition's clock; a
join; a Python processor) over the crash harness's at-least-once stream (tests/crash.py: replays,
out-of-order, late records, null keys, 3 partitions), one file per micro-batch. Its checkpoint is
moved between micro-batches from 2 to 4 and then to 3 state partitions; the restarted query must
write exactly the rows of the same query that never stopped (the oracle: Spark's and kstreams'
results do not depend on the number of state partitions; the uninterrupted run is the reference,
as in the crash test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest
from crash import all_operators, as_stored, file_source, records, write_files
from kstreams_spark import KStream, KStreamsError, read_state, repartition_state
from streams import Rec, StreamRun, with_offsets

SCRIPT = os.path.join(os.path.dirname(sys.executable), "kstreams-spark")
OPERATORS = [
    "deduplicate_by_key",
    "deduplicate_across_partitions",
    "deduplicate_by_sequence",
    "distinct_session",
    "count",
    "count_tumbling",
    "to_table",
    "stream_stream_left_join",
    "python_processor",
]
FILES = 3


def start(spark, folder: str, root: str):
    return (
        all_operators(file_source(spark, folder), OPERATORS)
        .writeStream.format("parquet")
        .option("path", os.path.join(root, "out"))
        .option("checkpointLocation", os.path.join(root, "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )


def rows(spark, root: str) -> Counter:
    return Counter((r["key"], r["value"]) for r in spark.read.parquet(os.path.join(root, "out")).collect())


def state_partitions(checkpoint: str) -> int:
    """The number of state partitions of the checkpoint's last micro-batch (its offset log)."""
    offsets = os.path.join(checkpoint, "offsets")
    last = max(int(n) for n in os.listdir(offsets) if n.isdigit())
    with open(os.path.join(offsets, str(last))) as f:
        return int(json.loads(f.read().splitlines()[1])["conf"]["spark.sql.shuffle.partitions"])


def test_a_moved_checkpoint_continues_with_the_output_of_the_query_that_never_stopped(spark, tmp_path):
    stored = as_stored(records(12, seed=7))
    write_files(str(tmp_path / "all"), stored, FILES)
    clean = start(spark, str(tmp_path / "all"), str(tmp_path / "clean"))

    moved_in, moved = tmp_path / "in", str(tmp_path / "moved")
    checkpoint = os.path.join(moved, "checkpoint")
    os.makedirs(moved_in)
    files = sorted(os.listdir(tmp_path / "all"))
    # one file per run: 2 state partitions (the session's), then moved to 4, then to 3
    for i, partitions in enumerate([None, 4, 3]):
        if partitions is not None:
            before, settings = state_partitions(checkpoint), spark.conf.getAll
            assert repartition_state(spark, checkpoint, partitions, [os.path.join(moved, "out")]) == before
            assert state_partitions(checkpoint) == partitions
            # Spark's repartitioner sets the checkpoint's settings in the session: all put back
            assert spark.conf.getAll == settings
        shutil.copy2(tmp_path / "all" / files[i], moved_in / files[i])
        start(spark, str(moved_in), moved).awaitTermination()
    assert state_partitions(checkpoint) == 3
    clean.awaitTermination()

    expected = rows(spark, str(tmp_path / "clean"))
    assert {op for op, _ in expected} == set(OPERATORS)  # every operator gave rows
    got = rows(spark, moved)
    assert got == expected, (
        f"doubled {sorted((got - expected).elements())[:5]}, lost {sorted((expected - got).elements())[:5]}"
    )


def test_moving_is_refused_before_anything_is_written(spark, tmp_path):
    run = StreamRun(spark, str(tmp_path), lambda d: KStream(d).deduplicate_by_key("10 seconds").df)
    checkpoint = str(tmp_path / "checkpoint")
    with pytest.raises(KStreamsError, match="is not the checkpoint of a query with kstreams operators"):
        repartition_state(spark, str(tmp_path / "in"), 3)
    run.add_batch(with_offsets([Rec("a", 1), Rec("b", 2)]))
    run.run()
    with pytest.raises(KStreamsError, match="already has 2 state partitions"):
        repartition_state(spark, checkpoint, 2)
    with pytest.raises(KStreamsError, match="must be at least 1, got 0"):
        repartition_state(spark, checkpoint, 0)
    # a micro-batch planned but not committed: a query elsewhere, or one stopped by a failure
    offsets = os.path.join(checkpoint, "offsets")
    last = max(int(n) for n in os.listdir(offsets) if n.isdigit())
    planned = os.path.join(offsets, str(last + 1))
    shutil.copy(os.path.join(offsets, str(last)), planned)
    with pytest.raises(KStreamsError, match=f"micro-batch {last + 1} of .* was planned but not committed"):
        repartition_state(spark, checkpoint, 3)
    os.remove(planned)
    # a query running on it in this driver
    source = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
    running = (
        KStream(
            source.selectExpr("cast(value as string) as key", "'v' as value", "timestamp", "0 as partition")
        )
        .deduplicate_by_key("10 seconds")
        .df.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "running"))
        .start()
    )
    try:
        running.processAllAvailable()
        with pytest.raises(KStreamsError, match="is running on .*: stop it"):
            repartition_state(spark, str(tmp_path / "running"), 3)
    finally:
        running.stop()
    # a file sink whose log does not reach the checkpoint's last micro-batch is not this query's
    with pytest.raises(KStreamsError, match="is not the file sink of the query of"):
        repartition_state(spark, checkpoint, 3, [str(tmp_path / "elsewhere")])
    # nothing was written by the refusals: the checkpoint moves, and its entries are still there
    assert max(int(n) for n in os.listdir(offsets) if n.isdigit()) == last
    assert repartition_state(spark, checkpoint, 3) == 2
    assert sorted(r.key for r in read_state(spark, checkpoint).collect()) == ["a", "b"]


def test_state_repartition_command(spark, tmp_path):
    run = StreamRun(spark, str(tmp_path), lambda d: KStream(d).deduplicate_by_key("10 seconds").df)
    run.add_batch(with_offsets([Rec("a", 1), Rec("a", 2), Rec("b", 3, partition=1)]))
    run.run()
    checkpoint = str(tmp_path / "checkpoint")
    sink = ["--file-sink", str(tmp_path / "out")]
    done = subprocess.run(
        [SCRIPT, "state", "repartition", checkpoint, "--partitions", "4", *sink],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"checkpoint {checkpoint}: state moved from 2 to 4 state partitions (1 kstreams operator(s))"
        in done.stdout
    )
    again = subprocess.run(
        [SCRIPT, "state", "repartition", checkpoint, "--partitions", "4"], capture_output=True, text=True
    )
    assert (again.returncode, again.stderr) == (
        2,
        f"kstreams-spark state: error: {checkpoint} already has 4 state partitions\n",
    )
    bad = subprocess.run(
        [SCRIPT, "state", "repartition", checkpoint, "--partitions", "0"], capture_output=True, text=True
    )
    assert (bad.returncode, bad.stdout, bad.stderr) == (
        2,
        "",
        "kstreams-spark state: error: --partitions is a number of state partitions from 1, got 0\n",
    )
    # the restarted query takes 4 from the checkpoint, and still knows a
    run.add_batch([Rec("a", 4, offset=2), Rec("c", 5, offset=3)])
    run.run()
    assert sorted(r.key for r in run.output().collect()) == ["a", "b", "c"]
    assert state_partitions(checkpoint) == 4
