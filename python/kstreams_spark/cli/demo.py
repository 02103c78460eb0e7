"""``kstreams-spark demo``: generated or given files, kstreams against Spark's dedup; with
``--bootstrap-servers``, the latency of real-time and micro-batch mode."""

from __future__ import annotations

import argparse
import os
import shutil
import time

from kstreams_spark.cli._checks import input_files
from kstreams_spark.cli._run import (
    fail,
    first_line,
    follow,
    guess_format,
    jvm_start_up_quiet,
    spark_logs,
)


def run_demo(args: argparse.Namespace) -> int:
    if args.bootstrap_servers:
        return _run_latency_demo(args)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from kstreams_spark import KStream, KStreamsError, configure_spark, operator_metrics
    from kstreams_spark.demo_data import generate

    output = os.path.abspath(args.output)
    checkpoint = os.path.abspath(args.checkpoint or output + "-checkpoint")
    # Spark's own dedup on the same generated stream, next to ours
    spark_output, spark_checkpoint = output + "-spark-dedup", checkpoint + "-spark-dedup"
    generated = None
    if args.input:
        source_dir = os.path.abspath(args.input)
        fmt = args.format or guess_format(source_dir)
    else:
        source_dir = os.path.join(os.path.dirname(output), "generated-input")
        shutil.rmtree(source_dir, ignore_errors=True)
        print(f"generating {args.rows:,} records on {args.partitions} partitions into {source_dir} ...")
        generated = generate(source_dir, rows=args.rows, partitions=args.partitions, files=args.batches)
        fmt = "json"
        print(
            f"  {generated.records:,} records: {generated.unique_events:,} events, "
            f"{generated.replayed:,} replayed by producer retries, {generated.late:,} late"
        )
    if not args.checkpoint:
        # a fresh run: the default checkpoint belongs to the default output
        for folder in (checkpoint, output, spark_checkpoint, spark_output):
            shutil.rmtree(folder, ignore_errors=True)

    spark = (
        configure_spark(SparkSession.builder.master(args.master or "local[*]"))
        .appName("kstreams-spark demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, args.partitions)))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark_logs(spark, args.verbose)  # errors: one line, by main
    try:
        schema = spark.read.format(fmt).load(source_dir).schema
        stream = (
            spark.readStream.format(fmt)
            .schema(schema)
            .option("maxFilesPerTrigger", args.files_per_batch)
            .load(source_dir)
        )
        ts_type = stream.schema[args.timestamp].dataType if args.timestamp in stream.columns else None
        if isinstance(ts_type, T.StringType):
            stream = stream.withColumn(args.timestamp, F.col(args.timestamp).cast("timestamp"))
        elif isinstance(ts_type, T.NumericType):
            stream = stream.withColumn(args.timestamp, F.timestamp_millis(F.col(args.timestamp).cast("long")))
        try:
            ks = KStream(
                stream,
                key=args.key,
                timestamp=args.timestamp,
                partition=args.partition,
                offset=args.offset,
                on_null_timestamp=args.on_null_timestamp,
            )
            deduped = ks.deduplicate_by_key(args.interval).df
        except KStreamsError as e:
            return fail(args, first_line(e), 2)
        files = len(input_files(source_dir))
        batches = -(-files // args.files_per_batch)
        print(f"kstreams deduplicate_by_key({args.interval!r}) -> {output}")
        ours = _run_to_parquet(deduped, output, checkpoint, batches)
        forwarded = spark.read.parquet(output).count()
        print()
        print("summary")
        print(f"  records in              {ours.records_in:>12,}")
        print(f"  forwarded               {forwarded:>12,}")
        print(f"  dropped as duplicates   {ours.records_in - forwarded:>12,}")
        for name, values in operator_metrics(ours.progress).items():
            print(f"  metrics {name}: {values}")
        if generated is not None:
            verdict = "yes" if forwarded == generated.unique_events else "NO"
            print(f"  one per generated event {verdict:>12} ({generated.unique_events:,} events)")
        print(
            f"  rows/s                  {ours.records_in / ours.wall_s:>12,.0f}  ({ours.wall_s:.1f} s incl. start-up)"
        )
        print(f"  output (Parquet)        {output}")
        print(f"  checkpoint              {checkpoint}")
        if generated is None:
            return 0
        # The same stream through Spark's own at-least-once dedup, as a Spark user writes it
        print()
        print(
            f"Spark withWatermark({args.timestamp!r}, {args.interval!r}).dropDuplicatesWithinWatermark -> {spark_output}"
        )
        theirs_df = stream.withWatermark(args.timestamp, args.interval).dropDuplicatesWithinWatermark(
            [args.key]
        )
        theirs = _run_to_parquet(theirs_df, spark_output, spark_checkpoint, batches)
        columns = [
            _outcome("kstreams deduplicate_by_key", spark, output, ours, generated, args.key),
            _outcome("Spark dropDuplicatesWithinWatermark", spark, spark_output, theirs, generated, args.key),
        ]
        _print_comparison(columns, generated)
        picture = os.path.join(os.path.dirname(output), "comparison.png")
        if _plot_comparison(columns, generated, picture):
            print(f"\n  picture                 {picture}")
        else:
            print('\n  (a picture of this needs matplotlib: pip install "kstreams-spark[demo]")')
        return 0 if forwarded == generated.unique_events else 1
    finally:
        spark.stop()


def _run_latency_demo(args: argparse.Namespace) -> int:
    from pyspark.sql import SparkSession

    from kstreams_spark import configure_spark
    from kstreams_spark._demo_latency import PARTITIONS, run_latency_demo

    builder = (
        # a real-time query holds a task slot per input and per state partition at once
        configure_spark(SparkSession.builder.master(args.master or "local[8]"))
        .appName("kstreams-spark demo (latency)")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(PARTITIONS))
    )
    with jvm_start_up_quiet(not args.verbose) as start_up_done:
        spark = builder.getOrCreate()
        spark_logs(spark, args.verbose)  # errors: one line, by main
        start_up_done()
    try:
        return run_latency_demo(spark, args)
    finally:
        spark.stop()


class _Run:
    """One demo query: rows read, wall time (start-up included) and its progress reports."""

    def __init__(self, records_in: int, wall_s: float, progress: list) -> None:
        self.records_in, self.wall_s, self.progress = records_in, wall_s, progress

    @property
    def operator_rows_per_s(self) -> float:
        """Rows per second of micro-batch time (Spark's ``triggerExecution``), the query's start-up
        and first micro-batch's planning left out: the operator's own throughput."""
        timed = [p for p in self.progress if p["numInputRows"] and p["batchId"] > 0]
        seconds = sum(p["durationMs"]["triggerExecution"] for p in timed) / 1000
        return sum(p["numInputRows"] for p in timed) / seconds if seconds else 0.0


def _run_to_parquet(df, output: str, checkpoint: str, batches: int) -> _Run:
    started = time.time()
    query = (
        df.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    records_in = follow(query, batches)
    return _Run(records_in, time.time() - started, list(query.recentProgress))


def _outcome(name: str, spark, output: str, run: _Run, generated, key: str) -> dict:
    """What a candidate did with the generated stream, from its output and the generator's truth:
    every event has a unique key, so a key missing from the output is a lost event and a key
    there twice a duplicate let through."""
    out = spark.read.parquet(output)
    forwarded = out.count()
    keys = out.select(key).distinct().cache()
    distinct_keys = keys.count()
    late = spark.createDataFrame([(k,) for k in generated.late_keys] or [("",)], [key])
    late_forwarded = late.join(keys, key).count()
    keys.unpersist()
    return {
        "name": name,
        "forwarded": forwarded,
        "events lost": generated.unique_events - distinct_keys,
        "late events lost": generated.late - late_forwarded,
        "duplicates let through": forwarded - distinct_keys,
        "replays caught": run.records_in - forwarded - (generated.unique_events - distinct_keys),
        "rows/s (operator)": run.operator_rows_per_s,
    }


_COMPARED = ["forwarded", "replays caught", "duplicates let through", "events lost", "late events lost"]


def _print_comparison(columns: list[dict], generated) -> None:
    print()
    print(
        f"the same at-least-once stream: {generated.records:,} records of {generated.unique_events:,} events, "
        f"{generated.replayed:,} replays, {generated.late:,} late events"
    )
    width = max(len(c["name"]) for c in columns) + 2
    print(f"  {'':<24}" + "".join(f"{c['name']:>{width}}" for c in columns))
    for row in [*_COMPARED, "rows/s (operator)"]:
        print(f"  {row:<24}" + "".join(f"{c[row]:>{width},.0f}" for c in columns))
    print(
        "  (late events: Spark drops records behind its watermark before deduplicating; KIP-655 forwards\n"
        "   a late record that has no live duplicate. rows/s: input rows per second of micro-batch time\n"
        "   after the first micro-batch, on small JSON micro-batches; see benchmarks/RESULTS.md)"
    )


def _plot_comparison(columns: list[dict], generated, path: str) -> bool:
    """A small PNG of the comparison; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = ["replays caught", "duplicates let through", "events lost", "late events lost"]
    # one panel per count, each on its own scale: 46 lost events beside 2,000 replays still show
    fig, axes = plt.subplots(1, len(rows), figsize=(8, 2.8))
    colors = ["tab:blue", "tab:orange"]
    for ax, row in zip(axes, rows, strict=True):
        bars = ax.bar(range(len(columns)), [c[row] for c in columns], color=colors[: len(columns)])
        ax.bar_label(bars, fmt="{:,.0f}", fontsize=8)
        ax.set_title(row, fontsize=9)
        ax.set_xticks([])
        ax.set_ylim(0, max(1, *(c[row] for c in columns)) * 1.2)
        ax.tick_params(labelsize=7)
    fig.legend(bars, [c["name"] for c in columns], loc="lower center", ncol=len(columns), fontsize=8)
    fig.suptitle(
        f"the same stream: {generated.records:,} records, {generated.unique_events:,} events, "
        f"{generated.late:,} late",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
