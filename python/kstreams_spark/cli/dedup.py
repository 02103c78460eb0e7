"""``kstreams-spark dedup``: a Kafka topic deduplicated into another."""

from __future__ import annotations

import argparse
import os

from kstreams_spark.cli._parser import DEDUP_BY, REAL_TIME_SLOTS
from kstreams_spark.cli._run import fail, first_line, follow, jvm_start_up_quiet, spark_logs


def run_dedup(args: argparse.Namespace) -> int:
    """``kstreams-spark dedup``: a topic-to-topic dedup query; 0 when it ends cleanly, 1 when the
    query fails, 2 for bad arguments."""
    operator, _ = DEDUP_BY[args.by]
    kafka_options = {}
    for option in args.kafka_option:  # checked: NAME=VALUE
        name, _, value = option.partition("=")
        kafka_options[f"kafka.{name}"] = value

    from pyspark.errors import PySparkException, StreamingQueryException
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from kstreams_spark import KStream, KStreamsError, configure_spark, operator_metrics
    from kstreams_spark.kstream import EXACTLY_ONCE_KAFKA, MARKER_TOPIC_OPTION

    master = args.master or (f"local[{REAL_TIME_SLOTS}]" if args.real_time else "local[*]")
    builder = (
        configure_spark(SparkSession.builder.master(master))
        .appName(f"kstreams-spark dedup {args.topic} -> {args.output_topic}")
        .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    with jvm_start_up_quiet(not args.verbose) as start_up_done:
        spark = builder.getOrCreate()
        spark_logs(spark, args.verbose)  # errors: one line, by main
        start_up_done()
    try:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", args.bootstrap_servers)
            .option("subscribe", args.topic)
            .option("startingOffsets", args.starting_offsets)
            .option("includeHeaders", "true")
            .options(**kafka_options)
        )
        if args.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
        try:
            id_column = F.expr(args.id) if args.id else None
            ks = KStream(reader.load(), on_null_timestamp=args.on_null_timestamp)
            result = operator(ks, id_column, args.interval, args.late_records)
            if args.late_records == "side_output":
                # one query writes both topics: the Kafka sink takes each row's topic column
                reason = F.col("kstreams_reason")
                tagged = F.concat(
                    F.coalesce(F.col("headers"), F.array()),
                    F.array(
                        F.struct(
                            F.lit("kstreams_reason").alias("key"), F.encode(reason, "UTF-8").alias("value")
                        )
                    ),
                )
                out = result.with_side_output.select(
                    "key",
                    "value",
                    F.when(reason.isNull(), F.col("headers")).otherwise(tagged).alias("headers"),
                    F.when(reason.isNull(), F.lit(args.output_topic))
                    .otherwise(F.lit(args.late_topic))
                    .alias("topic"),
                )
            else:
                out = result.df.select("key", "value", "headers", F.lit(args.output_topic).alias("topic"))
        except (KStreamsError, PySparkException) as e:
            return fail(args, first_line(e), 2)
        writer = (
            # each row's topic column says where it goes; the exactly-once sink keeps its batch
            # markers in the output topic
            out.writeStream.format(EXACTLY_ONCE_KAFKA if args.exactly_once else "kafka")
            .option(MARKER_TOPIC_OPTION, args.output_topic)
            .option("kafka.bootstrap.servers", args.bootstrap_servers)
            .option("checkpointLocation", os.path.abspath(args.checkpoint))
            .options(**kafka_options)
        )
        from kstreams_spark._intervals import interval_micros

        if args.real_time:
            # Spark's own reading of the duration, whatever form --real-time took
            batch_ms = interval_micros(args.real_time) // 1000
            writer = writer.outputMode("update").trigger(realTime=f"{batch_ms} milliseconds")
        elif args.available_now:
            writer = writer.trigger(availableNow=True)
        else:
            # in milliseconds, the trigger's unit: Spark's own interval grammar differs from ours
            every_ms = interval_micros(args.trigger_interval) // 1000 if args.trigger_interval else 0
            writer = writer.trigger(processingTime=f"{every_ms} milliseconds")
        print(
            f"deduplicating {args.topic} -> {args.output_topic} by {args.by}"
            f"{'' if args.by == 'sequence' else f' within {args.interval}'}"
            f"{f', late records to {args.late_topic}' if args.late_topic else ''}"
            f"{', exactly once' if args.exactly_once else ''}"
            f"{f', in real time (checkpoint every {args.real_time})' if args.real_time else ''}; "
            f"checkpoint {os.path.abspath(args.checkpoint)}",
            flush=True,
        )
        query = writer.start()
        try:
            records_in = follow(query)
        except KeyboardInterrupt:
            print("stopping ...", flush=True)
            query.stop()
            records_in = sum(p["numInputRows"] for p in query.recentProgress)
        except StreamingQueryException as e:
            return fail(args, f"the query stopped: {first_line(e)}", 1)
        counts = {}
        for values in operator_metrics(query.recentProgress).values():
            counts = values
        print()
        print("summary")
        print(f"  records in              {records_in:>12,}")
        for name, value in counts.items():
            print(f"  {name.replace('_', ' '):<23} {value:>12,}")
        return 0
    finally:
        spark.stop()
