"""One candidate of benchmarks/latency.py: a Kafka -> dedup -> Kafka streaming query, run in a
process of its own until SIGTERM (then the query stops cleanly) or SIGKILL.

    python benchmarks/latency_job.py CANDIDATE BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC CHECKPOINT MASTER

Prints "ready" once the query has started, "error: ..." (one line) if it cannot start or fails, and
"progress {json}" (progress_summary) when stopped; the driver (latency.py) measures latency from
the topics alone. The session: configure_spark, MASTER, 2 shuffle partitions, a 2 GB driver, the UI
off, every batch's progress kept; Spark's candidates add SPARK_CONF.
The candidates (CANDIDATES below; latency.py's docstring says why these settings):

* kstreams_real_time: KStream(df).deduplicate_by_key(interval), update mode, trigger(realTime=batch)
* kstreams_micro_batch: the same operator, append mode, trigger(processingTime="0 seconds")
* spark_real_time: df.withWatermark("timestamp", interval).dropDuplicates(["key"]), update mode,
  trigger(realTime=batch)
* spark_micro_batch: df.withWatermark("timestamp", interval).dropDuplicatesWithinWatermark(["key"]),
  append mode, trigger(processingTime="0 seconds")
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import threading

from bench.candidates import SPARK_ROCKSDB_CONF

CANDIDATES = ("kstreams_real_time", "kstreams_micro_batch", "spark_real_time", "spark_micro_batch")
# the progress summary leaves out this many first batches with input (JIT, first state loads); a
# real-time batch lasts the batch duration, its first one spans the warm-up
WARM_UP_BATCHES = {"micro_batch": 3, "real_time": 1}
# Spark's candidates: RocksDB (configure_spark) with the settings benchmarks/bench chose for Spark's RocksDB
# dedup (changelog checkpointing, no row count; see SPARK_ROCKSDB_CONF there). A real-time query
# also gets Spark's real-time soft defaults at start: checkpoint format v2 (it refuses v1),
# changelog checkpointing, sortBeforeRepartition off.
SPARK_CONF = dict(SPARK_ROCKSDB_CONF)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("candidate", choices=CANDIDATES)
    p.add_argument("bootstrap")
    p.add_argument("input_topic")
    p.add_argument("output_topic")
    p.add_argument("checkpoint")
    p.add_argument("master")
    p.add_argument("--interval", default="10 seconds", help="the dedup interval / watermark delay")
    p.add_argument("--batch-duration", default="5 seconds", help="real-time candidates' batch duration")
    p.add_argument("--shuffle-partitions", type=int, default=2)
    p.add_argument("--driver-memory", default="2g")
    p.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="an extra Spark setting (repeatable)"
    )
    return p.parse_args(argv)


def session(args):
    from kstreams_spark import configure_spark
    from pyspark.sql import SparkSession

    builder = (
        configure_spark(SparkSession.builder.master(args.master))
        .appName(f"latency {args.candidate}")
        .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # keep every batch's progress for the summary (Spark keeps the last 100), nothing else
        .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
    )
    settings = dict(SPARK_CONF) if args.candidate.startswith("spark_") else {}
    settings.update(setting.split("=", 1) for setting in args.conf)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def query(spark, args):
    from kstreams_spark import KStream

    df = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    real_time = args.candidate.endswith("_real_time")
    if args.candidate.startswith("kstreams_"):
        out = KStream(df).deduplicate_by_key(args.interval).df
    elif real_time:
        # Spark 4.3's real-time mode runs dropDuplicates, not dropDuplicatesWithinWatermark (5.0);
        # with a watermark but without the event time among its columns it keeps every key
        out = df.withWatermark("timestamp", args.interval).dropDuplicates(["key"])
    else:
        out = df.withWatermark("timestamp", args.interval).dropDuplicatesWithinWatermark(["key"])
    # key and value only: a `partition` column would name the output partition
    writer = (
        out.select("key", "value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output_topic)
        .option("checkpointLocation", args.checkpoint)
        .queryName(args.candidate)
    )
    if real_time:
        writer = writer.outputMode("update").trigger(realTime=args.batch_duration)
    else:
        writer = writer.trigger(processingTime="0 seconds")
    return writer.start()


def progress_summary(progress, skip):
    """What the query's progress says of its batches with input: how many, their input rows, and
    the median of each `durationMs` part (a micro-batch's planning, Kafka offsets, write...) over
    them, the first `skip` left out (warm-up)."""
    data = [p for p in progress if p.numInputRows]
    measured = data[skip:] or data
    parts = sorted({k for p in measured for k in p.durationMs})
    return {
        "batches": len(progress),
        "data_batches": len(data),
        "input_rows": sum(p.numInputRows for p in data),
        "median_duration_ms": {k: statistics.median(p.durationMs.get(k, 0) for p in measured) for k in parts},
    }


def first_line(error):
    lines = str(error).strip().splitlines()
    return lines[0][:500] if lines else type(error).__name__


def main(argv=None):
    args = parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    spark = session(args)
    try:
        try:
            q = query(spark, args)
        except Exception as e:  # one line for the driver's report
            print(f"error: {first_line(e)}", flush=True)
            return 1
        print("ready", flush=True)
        skip = WARM_UP_BATCHES["real_time" if args.candidate.endswith("_real_time") else "micro_batch"]
        while not stop.is_set():
            if not q.isActive:
                print(f"error: the query ended: {first_line(q.exception())}", flush=True)
                return 1
            stop.wait(0.5)
        print("progress " + json.dumps(progress_summary(q.recentProgress, skip)), flush=True)
        q.stop()
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
