"""One candidate of the DSL benchmark (`benchmarks/dsl.py`) in a process of its own, over the
benchmark's Parquet input read one file per micro-batch. `--workload count`: a windowed count, each
micro-batch's results reduced to the largest count per (key, window) and appended to ``--out``.
`--workload join`: an inner stream-stream join of ``--input`` (left) and ``--right``, each joined
pair appended to ``--out`` as (left id, right id). Prints one JSON line: the query's wall time and
each micro-batch's `triggerExecution` duration.

    .venv/bin/python benchmarks/dsl_job.py --candidate kstreams --input DIR --out DIR --checkpoint DIR
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--candidate", choices=["kstreams", "spark", "spark_hdfs"], required=True)
    p.add_argument("--jar", help="a kstreams jar other than the bundled one (an earlier version)")
    p.add_argument("--input", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--window", default="60 seconds")
    p.add_argument("--grace", default="10 seconds")
    p.add_argument("--workload", choices=["count", "join"], default="count")
    p.add_argument("--right", help="the right side's input (--workload join)")
    p.add_argument("--difference", default="10 seconds", help="the join's time difference")
    args = p.parse_args()

    if args.jar:
        # the benchmark's "before" candidate: the same Python API over an earlier build's jar
        import kstreams_spark.session as session

        session.jar_path = lambda: args.jar
    from kstreams_spark import configure_spark
    from pyspark.sql import SparkSession

    builder = (
        configure_spark(SparkSession.builder.master("local[2]"))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
    )
    if args.candidate == "spark_hdfs":
        # Spark's default state store, faster than RocksDB for its aggregation at this size
        builder = builder.config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    def read(path):
        schema = spark.read.parquet(path).schema
        return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(path)

    stream = read(args.input)
    if args.workload == "join":
        result, mode, reduce = join(args, stream, read(args.right))
    else:
        result, mode, reduce = count(args, stream)

    started = time.time()
    query = (
        result.writeStream.outputMode(mode)
        .option("checkpointLocation", args.checkpoint)
        .foreachBatch(reduce)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.time() - started
    batches = [p["durationMs"]["triggerExecution"] for p in query.recentProgress if p["numInputRows"] > 0]
    print(json.dumps({"seconds": seconds, "batch_ms": batches}))
    spark.stop()


def count(args, stream):
    """The windowed count, its output mode, and the foreachBatch that keeps each micro-batch's
    largest count per (key, window)."""
    from kstreams_spark import KStream, TimeWindows
    from pyspark.sql import functions as F

    if args.candidate == "kstreams":
        windows = TimeWindows.of_size_and_grace(args.window, args.grace)
        counts = KStream(stream).group_by_key().windowed_by(windows).count().df
    else:
        counts = (
            stream.withWatermark("timestamp", args.grace)
            .groupBy(F.window("timestamp", args.window), "key")
            .agg(F.count("*").alias("value"))
        )

    def reduce(batch, batch_id):
        (
            batch.groupBy("key", F.unix_millis(F.col("window.start")).alias("start"))
            .agg(F.max("value").alias("count"))
            .write.mode("append")
            .parquet(args.out)
        )

    return counts, "update", reduce


def join(args, left, right):
    """The inner join (records of equal keys within `--difference`), its output mode, and the
    foreachBatch that writes each joined pair's (left id, right id); a value is its row's id."""
    from kstreams_spark import JoinWindows, KStream
    from pyspark.sql import functions as F

    if args.candidate == "kstreams":
        windows = JoinWindows.of_time_difference_and_grace(args.difference, args.grace)
        joined = KStream(left).join(KStream(right), lambda lv, rv: F.concat_ws(",", lv, rv), windows).df
        mode = "update"
    else:
        # Spark's stream-stream inner join at its best: a watermark on both sides (so it evicts)
        # and the time-range condition that bounds its state
        lw = left.withWatermark("timestamp", args.grace).alias("l")
        rw = right.withWatermark("timestamp", args.grace).alias("r")
        within = f"interval {args.difference}"
        joined = lw.join(
            rw,
            F.expr(
                f"l.key = r.key AND r.timestamp BETWEEN l.timestamp - {within} AND l.timestamp + {within}"
            ),
        ).select(F.concat_ws(",", "l.value", "r.value").alias("value"))
        mode = "append"

    def reduce(batch, batch_id):
        ids = F.split("value", ",")
        (
            batch.select(ids[0].cast("long").alias("left"), ids[1].cast("long").alias("right"))
            .write.mode("append")
            .parquet(args.out)
        )

    return joined, mode, reduce


if __name__ == "__main__":
    main()
