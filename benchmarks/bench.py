"""Throughput of deduplicate_by_key against Spark's own dedup operators, same data, same run.

    .venv/bin/python benchmarks/bench.py            # the default benchmark (make bench)
    .venv/bin/python benchmarks/bench.py --rows 200000 --keys 150000   # a quick one

Data (made with Spark, written as Parquet files read one per micro-batch, Trigger.availableNow,
noop sink): `rows` records, `keys` distinct keys, every `dup_every`-th record an adjacent duplicate
of the one before (same key, timestamp and partition), event times 1 ms apart plus an out-of-order
spread, keys spread over `partitions` partitions with increasing offsets.

Prints a table, writes benchmarks/results/latest.json and latest.png, and rewrites the "Latest
run" section of benchmarks/RESULTS.md (appending a line to its history).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--keys", type=int, default=1_500_000)
    p.add_argument("--dup-every", type=int, default=4, help="every n-th row duplicates the previous (4: 25%%)")
    p.add_argument("--partitions", type=int, default=16)
    p.add_argument("--files", type=int, default=16, help="Parquet files = micro-batches")
    p.add_argument("--spread-ms", type=int, default=0, help="out-of-order spread of event times")
    p.add_argument("--interval", default="10 seconds")
    p.add_argument("--only", help="comma-separated candidate names to run")
    p.add_argument("--repeat", type=int, default=3,
                   help="rounds over the Spark candidates (in turn, same session); the median round counts")
    p.add_argument("--flink-python", default=os.path.join(os.path.dirname(HERE), ".venv-flink", "bin", "python"),
                   help="python of a virtualenv with apache-flink (make bench creates .venv-flink)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="an extra Spark setting for every candidate (repeatable)")
    p.add_argument("--no-update", action="store_true", help="do not touch RESULTS.md / latest.*")
    p.add_argument("--note", default="", help="a note for the history line")
    p.add_argument("--scaling", action="store_true",
                   help="instead: the scaling series (kstreams and Spark's RocksDB dedup), written to "
                        "results/scaling.json/png and RESULTS.md")
    p.add_argument("--scaling-rows", default="1000000,4000000,16000000")
    p.add_argument("--scaling-keys", default="10000,1000000,10000000", help="key counts at 4M rows")
    return p.parse_args(argv)


def make_session(extra_conf=()):
    from pyspark.sql import SparkSession

    from kstreams_spark import configure_spark

    builder = SparkSession.builder
    for setting in extra_conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = (
        configure_spark(builder.master("local[2]"))
        .appName("kstreams-spark benchmark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .config("spark.driver.extraJavaOptions", os.environ.get("BENCH_JAVA_OPTS", ""))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def generate(spark, folder, args):
    """The benchmark rows, with the formulas kstreams.bench.DedupLimit uses too."""
    from pyspark.sql import functions as F

    base_ms = int(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)
    i = F.col("id")
    key_id = F.when(i % args.dup_every == args.dup_every - 1, i - 1).otherwise(i) if args.dup_every > 0 else i
    spread = F.pmod(key_id * 40503, F.lit(args.spread_ms)) if args.spread_ms > 0 else F.lit(0)
    df = spark.range(args.rows, numPartitions=args.files).select(
        F.concat(F.lit("k"), F.pmod(key_id * 2654435761, F.lit(args.keys)).cast("string")).alias("key"),
        F.concat(F.lit("v"), i.cast("string")).alias("value"),
        F.timestamp_millis(F.lit(base_ms) + key_id + spread).alias("timestamp"),
        F.pmod(key_id, F.lit(args.partitions)).cast("int").alias("partition"),
        i.alias("offset"),
    )
    df.write.mode("overwrite").parquet(folder)
    files = sorted(f for f in os.listdir(folder) if f.endswith(".parquet"))
    for n, f in enumerate(files):  # file source order = modification time: keep id order
        os.utime(os.path.join(folder, f), (1_700_000_000 + n, 1_700_000_000 + n))
    return len(files)


ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"


def candidates(args):
    from kstreams_spark import KStream

    interval = args.interval
    return {
        "kstreams": (ROCKSDB, lambda df: KStream(df).deduplicate_by_key(interval).df),
        "spark_dedup_within_watermark_rocksdb": (
            ROCKSDB, lambda df: df.withWatermark("timestamp", interval).dropDuplicatesWithinWatermark(["key"])),
        "spark_dedup_within_watermark_hdfs": (
            HDFS, lambda df: df.withWatermark("timestamp", interval).dropDuplicatesWithinWatermark(["key"])),
        "spark_drop_duplicates_watermark_rocksdb": (
            ROCKSDB, lambda df: df.withWatermark("timestamp", interval).dropDuplicates(["key", "timestamp"])),
        "tws_floor": (ROCKSDB, tws_floor),
    }


def tws_floor(df):
    """kstreams' input preparation and transformWithState on RocksDB, forwarding every record."""
    from pyspark.sql import DataFrame

    return DataFrame(df.sparkSession._jvm.kstreams.bench.TwsFloor.passThrough(df._jdf), df.sparkSession)


def run_one(spark, name, provider, op, source, workdir):
    spark.conf.set(PROVIDER, provider)
    stream = spark.readStream.schema(spark.read.parquet(source).schema).option("maxFilesPerTrigger", 1).parquet(source)
    checkpoint = os.path.join(workdir, f"ckpt-{name}")
    shutil.rmtree(checkpoint, ignore_errors=True)
    query = op(stream).writeStream.format("noop").option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    started = time.perf_counter()
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    progress = query.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    state_rows = [sum(op["numRowsTotal"] for op in p["stateOperators"]) for p in progress]
    state_bytes = [sum(op["memoryUsedBytes"] for op in p["stateOperators"]) for p in progress]
    out_rows = sum(sum(op["numRowsUpdated"] for op in p["stateOperators"]) for p in progress)
    runtime = spark._jvm.java.lang.Runtime.getRuntime()
    used_heap = runtime.totalMemory() - runtime.freeMemory()
    spark.conf.set(PROVIDER, ROCKSDB)
    return {
        "rows": rows,
        "seconds": elapsed,
        "rows_per_s": rows / elapsed,
        "batches": len([p for p in progress if p["numInputRows"]]),
        "peak_state_rows": max(state_rows or [0]),
        "peak_state_bytes": max(state_bytes or [0]),
        "state_rows_updated": out_rows,
        "driver_heap_used_bytes": used_heap,
    }


def flink(args, csv_folder):
    """PyFlink keep-first dedup (ROW_NUMBER, streaming mode, local, parallelism 2) in its own venv."""
    import subprocess

    done = subprocess.run([args.flink_python, os.path.join(HERE, "flink_dedup.py"), csv_folder, str(args.rows)],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        print("flink failed:", done.stderr[-2000:])
        return {"rows_per_s": float("nan"), "error": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def jvm_limit(spark, args, interval_ms):
    rate, forwarded = spark._jvm.kstreams.bench.DedupLimit.run(
        args.rows, args.keys, args.partitions, args.dup_every, args.spread_ms, interval_ms)
    return {"rows_per_s": rate, "forwarded": forwarded}


def scaling(args):
    """Throughput and peak state as the stream grows (125,000 rows per micro-batch throughout)."""
    import copy

    spark = make_session(args.conf)
    series = []
    points = [(int(r), int(min(int(r) * 0.75, 10_000_000))) for r in args.scaling_rows.split(",")]
    points += [(4_000_000, int(k)) for k in args.scaling_keys.split(",")]
    workdir = tempfile.mkdtemp(prefix="kstreams-scaling-")
    scaled = ("kstreams", "spark_dedup_within_watermark_rocksdb", "spark_dedup_within_watermark_hdfs")
    try:
        # warm-up: JIT and RocksDB native loading, not measured
        warm_args = copy.copy(args)
        warm_args.rows, warm_args.keys, warm_args.files = 20_000, 15_000, 2
        small = os.path.join(workdir, "warmup")
        generate(spark, small, warm_args)
        for name, (provider, op) in candidates(warm_args).items():
            if name in scaled:
                run_one(spark, "warmup-" + name, provider, op, small, workdir)
        for rows, keys in dict.fromkeys(points):
            run_args = copy.copy(args)
            run_args.rows, run_args.keys, run_args.files = rows, keys, max(1, rows // 125_000)
            source = os.path.join(workdir, f"input-{rows}-{keys}")
            print(f"generating {rows:,} rows, {keys:,} keys ...", flush=True)
            generate(spark, source, run_args)
            chosen = {k: v for k, v in candidates(run_args).items() if k in scaled}
            for name, (provider, op) in chosen.items():
                r = run_one(spark, f"{name}-{rows}-{keys}", provider, op, source, workdir)
                r.update(name=name, rows=rows, keys=keys)
                series.append(r)
                print(f"  {name}: {r['rows_per_s']:,.0f} rows/s, peak state rows {r['peak_state_rows']:,}, "
                      f"peak state MB {r['peak_state_bytes'] / 1e6:.1f}", flush=True)
            shutil.rmtree(source, ignore_errors=True)
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "scaling.json"), "w") as f:
        json.dump({"command": "python benchmarks/bench.py " + " ".join(sys.argv[1:]), "series": series}, f, indent=2)
    lines = ["| rows | keys | candidate | rows/s | peak state rows | peak state MB |", "|---:|---:|---|---:|---:|---:|"]
    lines += [f"| {r['rows']:,} | {r['keys']:,} | {r['name']} | {r['rows_per_s']:,.0f} | "
              f"{r['peak_state_rows']:,} | {r['peak_state_bytes'] / 1e6:.1f} |" for r in series]
    table = "\n".join(lines)
    print(table)
    plot_scaling(series, os.path.join(RESULTS, "scaling.png"))
    path = os.path.join(HERE, "RESULTS.md")
    text = open(path).read()
    body = f"<!-- scaling -->\n`{'python benchmarks/bench.py ' + ' '.join(sys.argv[1:])}`\n\n{table}\n<!-- /scaling -->"
    if "<!-- scaling -->" in text:
        text = re.sub(r"<!-- scaling -->.*<!-- /scaling -->", lambda _: body, text, flags=re.S)
    else:
        text = text.replace("## History", f"## Scaling\n\n{body}\n\n## History")
    with open(path, "w") as f:
        f.write(text)


def plot_scaling(series, path):
    """rows/s and peak state MB per scaling point, one line per candidate."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot)")
        return
    points = list(dict.fromkeys((r["rows"], r["keys"]) for r in series))
    labels = [f"{rows / 1e6:g}M rows\n{keys:,} keys" for rows, keys in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    for name in dict.fromkeys(r["name"] for r in series):
        by_point = {(r["rows"], r["keys"]): r for r in series if r["name"] == name}
        xs = [i for i, p in enumerate(points) if p in by_point]
        left.plot(xs, [by_point[points[i]]["rows_per_s"] / 1000 for i in xs], marker="o", label=name)
        right.plot(xs, [by_point[points[i]]["peak_state_bytes"] / 1e6 for i in xs], marker="o", label=name)
    for ax, title in ((left, "thousand rows/s"), (right, "peak state MB")):
        ax.set_xticks(range(len(points)), labels, fontsize=7)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
    left.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None):
    args = parse_args(argv)
    if args.scaling:
        return scaling(args)
    spark = make_session(args.conf)
    from kstreams_spark import KStream  # noqa: F401  (jar is on the classpath)

    interval_ms = spark._jvm.kstreams.PythonAPI.intervalMicros(args.interval) // 1000
    workdir = tempfile.mkdtemp(prefix="kstreams-bench-")
    try:
        source = os.path.join(workdir, "input")
        print(f"generating {args.rows:,} rows ({args.keys:,} keys, 1 in {args.dup_every} a duplicate, "
              f"{args.partitions} partitions, {args.files} files) ...", flush=True)
        generate(spark, source, args)
        results = {}
        chosen = candidates(args)
        if args.only:
            chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
        # warm-up: JIT and RocksDB native loading, not measured
        small = os.path.join(workdir, "warmup")
        spark.read.parquet(source).limit(20000).write.parquet(small)
        for name, (provider, op) in chosen.items():
            run_one(spark, "warmup-" + name, provider, op, small, workdir)
        rounds = {name: [] for name in chosen}
        for round_no in range(args.repeat):
            for name, (provider, op) in chosen.items():
                print(f"running {name} (round {round_no + 1} of {args.repeat}) ...", flush=True)
                rounds[name].append(run_one(spark, name, provider, op, source, workdir))
        for name, runs in rounds.items():
            # the machine is shared and noisy: report the median round, keep every round's rate
            results[name] = dict(sorted(runs, key=lambda r: r["rows_per_s"])[len(runs) // 2],
                                 rounds_rows_per_s=[round(r["rows_per_s"]) for r in runs])
        if not args.only or "jvm_limit" in args.only:
            results["jvm_limit"] = jvm_limit(spark, args, interval_ms)
        if (not args.only or "flink" in args.only) and os.path.exists(args.flink_python):
            csv = os.path.join(workdir, "csv")
            spark.read.parquet(source).selectExpr(
                "key", "value", "unix_millis(timestamp) AS ts_ms", "partition", "offset").write.csv(csv)
            print("running flink ...", flush=True)
            results["flink"] = flink(args, csv)
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    report(args, results)


def report(args, results):
    ours = results.get("kstreams", {}).get("rows_per_s")
    lines = ["| candidate | rows/s (median) | kstreams ÷ candidate | every round, rows/s | peak state rows | peak state MB | seconds |",
             "|---|---:|---:|---|---:|---:|---:|"]
    for name, r in results.items():
        ratio = f"{ours / r['rows_per_s']:.2f}x" if ours and name != "kstreams" else ""
        state_rows = f"{r['peak_state_rows']:,}" if "peak_state_rows" in r else ""
        state_mb = f"{r['peak_state_bytes'] / 1e6:.1f}" if "peak_state_bytes" in r else ""
        seconds = f"{r['seconds']:.1f}" if "seconds" in r else ""
        every = ", ".join(f"{x / 1000:,.0f}k" for x in r.get("rounds_rows_per_s", []))
        lines.append(f"| {name} | {r['rows_per_s']:,.0f} | {ratio} | {every} | {state_rows} | {state_mb} | {seconds} |")
    table = "\n".join(lines)
    print()
    print(table)
    if args.no_update:
        return
    os.makedirs(RESULTS, exist_ok=True)
    latest = {
        "rows": args.rows,
        "keys": args.keys,
        "dup_every": args.dup_every,
        "partitions": args.partitions,
        "files": args.files,
        "spread_ms": args.spread_ms,
        "interval": args.interval,
        "kstreams_rows_per_s": results.get("kstreams", {}).get("rows_per_s"),
        "spark_dedup_within_watermark_rocksdb_rows_per_s": results.get("spark_dedup_within_watermark_rocksdb", {}).get("rows_per_s"),
        "spark_dedup_within_watermark_hdfs_rows_per_s": results.get("spark_dedup_within_watermark_hdfs", {}).get("rows_per_s"),
        "spark_drop_duplicates_watermark_rocksdb_rows_per_s": results.get("spark_drop_duplicates_watermark_rocksdb", {}).get("rows_per_s"),
        "flink_rows_per_s": results.get("flink", {}).get("rows_per_s"),
        "jvm_limit_rows_per_s": results.get("jvm_limit", {}).get("rows_per_s"),
        "tws_floor_rows_per_s": results.get("tws_floor", {}).get("rows_per_s"),
        "kstreams_peak_state_rows": results.get("kstreams", {}).get("peak_state_rows"),
        "spark_peak_state_rows": results.get("spark_dedup_within_watermark_rocksdb", {}).get("peak_state_rows"),
        "candidates": results,
        "command": "python benchmarks/bench.py " + " ".join(sys.argv[1:]),
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    with open(os.path.join(RESULTS, "latest.json"), "w") as f:
        json.dump(latest, f, indent=2)
    plot(results, os.path.join(RESULTS, "latest.png"), args)
    update_results_md(table, latest, args)


def plot(results, path, args):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot)")
        return
    names = list(results)
    rates = [results[n]["rows_per_s"] / 1000 for n in names]
    fig, ax = plt.subplots(figsize=(9, 4))
    bars = ax.barh(names, rates, color=["tab:blue" if n == "kstreams" else "tab:gray" for n in names])
    ax.bar_label(bars, labels=[f"{r:,.0f}k" for r in rates], padding=3)
    ax.set_xscale("log")  # the in-memory JVM limit is orders of magnitude above the rest
    ax.set_xlabel("thousand rows/s, log scale (2 cores, local[2])")
    ax.set_title(f"dedup throughput, {args.rows:,} rows, {args.keys:,} keys, interval {args.interval}")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def update_results_md(table, latest, args):
    path = os.path.join(HERE, "RESULTS.md")
    text = open(path).read() if os.path.exists(path) else "# Benchmark results\n\n## Latest run\n\n<!-- latest -->\n<!-- /latest -->\n\n## History\n\n"
    body = (f"<!-- latest -->\n{latest['when']}, `{latest['command'].strip()}`\n\n{table}\n\n"
            f"![throughput](results/latest.png)\n<!-- /latest -->")
    text = re.sub(r"<!-- latest -->.*<!-- /latest -->", lambda _: body, text, flags=re.S)
    ours = latest["kstreams_rows_per_s"]
    def ratio(key):
        other = latest.get(key)
        return f"{ours / other:.2f}x" if ours and other else "n/a"
    line = (f"- {latest['when']}: {args.rows:,} rows, kstreams {ours or 0:,.0f} rows/s; "
            f"vs dropDuplicatesWithinWatermark RocksDB {ratio('spark_dedup_within_watermark_rocksdb_rows_per_s')}, "
            f"HDFS {ratio('spark_dedup_within_watermark_hdfs_rows_per_s')}, "
            f"transformWithState floor {ratio('tws_floor_rows_per_s')}; peak state rows "
            f"{latest['kstreams_peak_state_rows']} vs {latest['spark_peak_state_rows']}"
            + (f" ({args.note})" if args.note else ""))
    text = text.rstrip() + "\n" + line + "\n"
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
