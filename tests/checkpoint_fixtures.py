"""Checkpoints written by a release, checked in, so that a later change that could not read them
fails a test (issue 39): one small query per operator family, two micro-batches each.

    .venv/bin/python tests/checkpoint_fixtures.py         # writes the families not there yet
    .venv/bin/python tests/checkpoint_fixtures.py --all   # rewrites every one (a new release)

Spark's file source and Parquet sink record absolute paths in the checkpoint, so every query runs
under ROOT, the same path when written and when tested (tests/test_checkpoint_fixtures.py copies a
fixture back there).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable

from kstreams_spark import JoinWindows, KStream, Processor, SessionWindows, Stores, TimeWindows
from pyspark import cloudpickle
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

sys.path.insert(0, os.path.dirname(__file__))
from streams import Rec, StreamRun, with_offsets  # noqa: E402

# The processor below is defined in this module, which Python workers cannot import.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

ROOT = "/tmp/kstreams-checkpoint-fixtures"
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "checkpoints")
RELEASE = "0.1.0"  # the release that wrote the fixtures

# three micro-batches on two partitions: duplicates within and across micro-batches, a late record,
# a record that reopens a dead key, a null value (a table's delete)
RECORDS = with_offsets(
    [Rec("a", 1), Rec("b", 2), Rec("x", 3, partition=1), Rec("a", 5)]
    + [Rec("c", 20), Rec("b", 9), Rec("x", 8, partition=1), Rec("y", 30, partition=1)]
    # a@9 is late by partition 0's stream time of the written batches (20 s): only a restart that
    # kept that stream time (in whatever layout, PerPartitionGroupValues) forwards it as late rather
    # than as a duplicate of a@5
    + [Rec("a", 9), Rec("a", 21), Rec("c", 25), Rec("b", 22, value=None), Rec("x", 41, partition=1)]
)
BATCHES = [RECORDS[:4], RECORDS[4:8], RECORDS[8:]]  # the fixtures hold the first two
WRITTEN = 2  # micro-batches in a fixture; the test runs the third

FAMILIES: dict[str, Callable] = {
    "deduplicate_by_key": lambda d: KStream(d).deduplicate_by_key("10 seconds").df,
    "deduplicate": lambda d: KStream(d).deduplicate("key", "10 seconds").df,
    "windowed_distinct": lambda d: (
        KStream(d).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace("10 seconds")).distinct().df
    ),
    "deduplicate_by_key_value": lambda d: KStream(d).deduplicate_by_key_value("value", "10 seconds").df,
    "deduplicate_by_sequence": lambda d: KStream(d).deduplicate_by_sequence("offset").df,
    "session_distinct": lambda d: (
        KStream(d)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace("5 seconds"))
        .distinct()
        .df
    ),
    "windowed_count": lambda d: (
        KStream(d)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace("10 seconds", "5 seconds"))
        .count()
        .to_stream()
        .df
    ),
    "count": lambda d: KStream(d).group_by_key().count().to_stream().df,
    "to_table": lambda d: KStream(d).to_table().to_stream().df,
    "session_count": lambda d: (
        KStream(d)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace("5 seconds", "2 seconds"))
        .count()
        .to_stream()
        .df
    ),
    "stream_left_join": lambda d: (
        _even(d)
        .left_join(_odd(d), _joiner, JoinWindows.of_time_difference_and_grace("10 seconds", "5 seconds"))
        .df
    ),
    "table_outer_join": lambda d: _even(d).to_table().outer_join(_odd(d).to_table(), _joiner).to_stream().df,
    "python_processor": lambda d: KStream(d).process(RunningCount, stores=[Stores.key_value("counts")]).df,
    # a Scala processor (the crash test's: deduplicate_by_key written with the Processor API, its
    # store typed with Spark encoders), from the test classes the Makefile builds
    "scala_processor": lambda d: DataFrame(
        d.sparkSession._jvm.kstreams.CrashProcessors.dedupByKey(d._jdf), d.sparkSession
    ),
}


# how many times a family's query reads its input (a join reads both sides from it)
READS = {"stream_left_join": 2, "table_outer_join": 2}


def _even(d):
    """The records of even offsets, against those of odd ones (the two sides of the joins)."""
    return KStream(d.where(F.col("offset") % 2 == 0))


def _odd(d):
    return KStream(d.where(F.col("offset") % 2 == 1))


def _joiner(left, right):
    return F.concat_ws("+", left, right)


class RunningCount(Processor):
    """Per key, counts the records in a store and forwards (key, count); every 10 s of stream time
    forwards ("tick", number of keys)."""

    def init(self, context):
        self.context = context
        self.counts = context.get_state_store("counts")
        context.schedule(10_000, punctuator=self.tick)

    def process(self, record):
        n = (self.counts.get(record.key) or 0) + 1
        self.counts.put(record.key, n)
        self.context.forward(record.key, str(n))

    def tick(self, timestamp):
        self.context.forward("tick", str(sum(1 for _ in self.counts.all())))


def run_batches(spark, root: str, family: str, batches) -> StreamRun:
    """The family's query over `batches`, one micro-batch each, restarted between them."""
    run = StreamRun(spark, root, FAMILIES[family])
    for batch in batches:
        run.add_batch(batch)
        run.run()
    return run


def main() -> None:
    sys.path.insert(0, os.path.dirname(__file__))
    from local_spark import local_spark

    spark = local_spark("kstreams-checkpoint-fixtures")
    for family in FAMILIES:
        if os.path.isdir(os.path.join(FIXTURES, family)) and "--all" not in sys.argv:
            continue  # written by an earlier release: kept, that is the point
        root = os.path.join(ROOT, family)
        shutil.rmtree(root, ignore_errors=True)
        run_batches(spark, root, family, BATCHES[:WRITTEN])
        target = os.path.join(FIXTURES, family)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(root, target)
        print(f"{family}: {target}")
    with open(os.path.join(FIXTURES, "RELEASE"), "w") as f:
        f.write(RELEASE + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
