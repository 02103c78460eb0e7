"""One candidate of the DSL benchmark (`benchmarks/dsl.py`) in a process of its own: a windowed
count over the benchmark's Parquet input, one file per micro-batch, each micro-batch's results
reduced to the largest count per (key, window) and appended to ``--out``. Prints one JSON line:
the query's wall time and each micro-batch's `triggerExecution` duration.

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
    args = p.parse_args()

    if args.jar:
        # the benchmark's "before" candidate: the same Python API over an earlier build's jar
        import kstreams_spark.session as session

        session.jar_path = lambda: args.jar
    from kstreams_spark import KStream, TimeWindows, configure_spark
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

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
    source = spark.read.parquet(args.input)
    stream = spark.readStream.schema(source.schema).option("maxFilesPerTrigger", 1).parquet(args.input)
    if args.candidate == "kstreams":
        windows = TimeWindows.of_size_and_grace(args.window, args.grace)
        counts = KStream(stream).group_by_key().windowed_by(windows).count().df
        mode = "update"
    else:
        counts = (
            stream.withWatermark("timestamp", args.grace)
            .groupBy(F.window("timestamp", args.window), "key")
            .agg(F.count("*").alias("value"))
        )
        mode = "update"

    def reduce(batch, batch_id):
        (
            batch.groupBy("key", F.unix_millis(F.col("window.start")).alias("start"))
            .agg(F.max("value").alias("count"))
            .write.mode("append")
            .parquet(args.out)
        )

    started = time.time()
    query = (
        counts.writeStream.outputMode(mode)
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


if __name__ == "__main__":
    main()
