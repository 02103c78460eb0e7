"""Deduplicate a stream on a Spark cluster: one job, two stateful streaming queries.

Reads JSON files (``key``, ``value``, ``timestamp``, ``partition``, ``offset``: the Kafka source's
columns) from ``--input``, one file per micro-batch (``--files-per-batch``), and writes two Parquet
sinks under ``--output``:

* ``dedup/``: ``deduplicate_by_key(--interval)`` (KIP-655),
* ``windowed/``: the first record per key and tumbling ``--window`` (windowed distinct),

each with its checkpoint under ``--checkpoint``, which must be on storage every executor and the
driver can reach (HDFS, S3, NFS; a local folder only on one machine). Run it

* as a plain Python driver, the wheel installed (``configure_spark`` ships the bundled jar)::

      PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python examples/cluster_app.py \\
          --master spark://HOST:7077 --input in/ --output out/ --checkpoint ckpt/

* or with spark-submit (``bin/spark-submit`` of the pyspark wheel or of a Spark distribution)::

      JAR=$(.venv/bin/python -c 'import kstreams_spark; print(kstreams_spark.jar_path())')
      spark-submit --master spark://HOST:7077 --jars "$JAR" examples/cluster_app.py \\
          --input in/ --output out/ --checkpoint ckpt/

The last line printed is a JSON summary (application id, executors, micro-batches with data,
operator metrics, the session's values of the Spark defaults ``configure_spark`` changes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

from kstreams_spark import KStream, TimeWindows, configure_spark, operator_metrics
from kstreams_spark.session import DEFAULT_SETTINGS
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

# the Kafka source's columns (key and value as strings)
SCHEMA = "key STRING, value STRING, timestamp TIMESTAMP, partition INT, offset BIGINT"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--master", help="Spark master URL (default: the one spark-submit was given)")
    p.add_argument("--input", required=True, help="folder of JSON files")
    p.add_argument("--output", required=True, help="folder for the Parquet sinks dedup/ and windowed/")
    p.add_argument("--checkpoint", required=True, help="folder for the checkpoints, on shared storage")
    p.add_argument("--interval", default="10 seconds", help="dedup interval (default: 10 seconds)")
    p.add_argument("--window", default="10 seconds", help="tumbling window size (default: 10 seconds)")
    p.add_argument("--files-per-batch", type=int, default=1, help="input files per micro-batch (default: 1)")
    p.add_argument(
        "--state-partitions",
        type=int,
        default=2,
        help="spark.sql.shuffle.partitions, fixed by the checkpoint at the first start (default: 2)",
    )
    p.add_argument(
        "--min-executors",
        type=int,
        default=1,
        help="wait until this many executors have registered before starting (default: 1)",
    )
    return p.parse_args(argv)


def wait_for_executors(spark: SparkSession, count: int, timeout_s: float = 120) -> list[str]:
    """Blocks until ``count`` executors have registered with the driver; returns their ids."""
    deadline = time.monotonic() + timeout_s
    while True:
        executors = executor_ids(spark)
        if len(executors) >= count:
            return executors
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(executors)} of {count} executors registered in {timeout_s:.0f} s")
        time.sleep(0.2)


def executor_ids(spark: SparkSession) -> list[str]:
    """Ids of the executors registered now (the driver's scheduler's list; no public Python API)."""
    ids = spark.sparkContext._jsc.sc().getExecutorIds().mkString(",")
    return sorted(filter(None, ids.split(",")), key=int)


def deduplicated(source: DataFrame, interval: str) -> DataFrame:
    return KStream(source).deduplicate_by_key(interval).df


def first_per_window(source: DataFrame, window: str) -> DataFrame:
    return KStream(source).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(window)).distinct().df


def start_queries(spark: SparkSession, args: argparse.Namespace) -> dict[str, StreamingQuery]:
    """Starts both streaming queries (``dedup``, ``windowed``) over ``args.input``; available-now
    trigger, so each stops after processing every file there, ``args.files_per_batch`` at a time."""
    ops = {
        "dedup": lambda df: deduplicated(df, args.interval),
        "windowed": lambda df: first_per_window(df, args.window),
    }
    queries = {}
    for name, op in ops.items():
        source = (
            spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", args.files_per_batch)
            .json(args.input)
        )
        queries[name] = (
            op(source)
            .writeStream.format("parquet")
            .queryName(name)
            .option("path", os.path.join(args.output, name))
            .option("checkpointLocation", os.path.join(args.checkpoint, name))
            .trigger(availableNow=True)
            .start()
        )
    return queries


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    builder = SparkSession.builder.appName("kstreams-spark-cluster-example")
    if args.master:
        builder = builder.master(args.master)
    spark = (
        configure_spark(builder)
        .config("spark.sql.shuffle.partitions", str(args.state_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    executors = wait_for_executors(spark, args.min_executors)
    queries = start_queries(spark, args)
    for query in queries.values():
        query.awaitTermination()
    summary = {
        "application_id": spark.sparkContext.applicationId,
        "executors_at_start": executors,
        "batches_with_data": {
            n: sum(1 for p in q.recentProgress if p["numInputRows"] > 0) for n, q in queries.items()
        },
        "metrics": {n: operator_metrics(q.recentProgress) for n, q in queries.items()},
        # what the session got for the Spark defaults configure_spark changes (a --conf keeps its own)
        "settings": {key: spark.conf.get(key) for key in DEFAULT_SETTINGS},
    }
    print(json.dumps(summary), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
