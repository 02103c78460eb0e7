"""The default regime: throughput over `rows` records (25% adjacent duplicates, a 10-second
interval), each candidate in a fresh process per round after a warm-up of its own."""

from __future__ import annotations

import datetime as dt
import os

from bench import BENCHMARKS
from bench.candidates import dedup_candidates, flink, jvm_limit, only, rocksdb_settings
from bench.data import default_input
from bench.expected import CHECKED, CHECKED_OLDER, check_forwarded
from bench.measure import new_session, stop_quietly
from bench.report import (
    CANDIDATE,
    PEAK_STATE,
    Column,
    finish,
    number,
    pyplot,
    regime_table,
    throughput,
)
from bench.rounds import fresh_workdir, median_round

# Flink's rule differs from KIP-655's (flink_dedup.py): the row says so
FLINK_ROW = "flink (keep-first, state TTL = interval in processing time)"


def regime_default(args):
    """Every candidate of `dedup_candidates` (with Spark's older dropDuplicates) in a fresh Python
    and JVM per round, each first warmed up in that process over the input's first 20,000 rows, so
    that no candidate runs in a JVM another one has warmed or left state in; then the same rule as
    an in-memory loop (jvm_limit) and PyFlink, each in a process of its own."""
    chosen = only(dedup_candidates(args.interval, drop_duplicates=True), args)
    wanted = set(args.only.split(",")) if args.only else None
    with fresh_workdir(args, "bench", args.interval) as runs:
        source, warmup = runs.generate(lambda spark: default_input(spark, runs.workdir, args))
        expected = runs.expected
        rounds = runs.rounds(
            chosen, lambda r: f"{r['rows_per_s']:,.0f} rows/s; forwarded {r['forwarded']:,}", warmup=warmup
        )
        results = [
            dict(median_round(its_runs, "rows_per_s"), name=name, conf=chosen[name][2])
            for name, its_runs in rounds.items()
        ]
        # the interval in ms, as kstreams reads it; and the same rule as an in-memory loop
        spark = new_session(args)
        try:
            from kstreams_spark._jvm import door

            interval_ms = door(spark).intervalMicros(args.interval) // 1000
            distinct_keys = spark.read.parquet(source).select("key").distinct().count()
            if wanted is None or "jvm_limit" in wanted:
                print("running jvm_limit ...", flush=True)
                limit = jvm_limit(spark, args, interval_ms)
                # the loop generates the same rows from the same formulas: KIP-655 forwards as many
                expected["jvm_limit"] = expected["kstreams"]
                check_forwarded("jvm_limit", limit, expected)
                results.append(dict(limit, name="jvm_limit"))
        finally:
            stop_quietly(spark)
        if (wanted is None or "flink" in wanted) and os.path.exists(args.flink_python):
            flink_runs = flink(args, source, interval_ms, distinct_keys)
            results.append(dict(median_round(flink_runs, "rows_per_s"), name=FLINK_ROW))
    table = regime_table(
        results,
        [CANDIDATE],
        [
            *throughput(results, args, thousands=True),
            Column(
                "forwarded",
                lambda r: (
                    f"{r['forwarded']:,}"
                    + (
                        " (checked)"
                        if r["name"] in expected
                        else " (bounds checked)"
                        if r["name"] == FLINK_ROW
                        else ""
                    )
                    if "forwarded" in r
                    else ""
                ),
            ),
            *PEAK_STATE,
            number("seconds", "seconds", 1),
        ],
    )
    method = (
        f"{args.rows:,} rows, {distinct_keys:,} distinct keys (key numbers modulo {args.keys:,}), "
        f"every {args.dup_every}th row an adjacent duplicate, "
        f"event times 1 ms apart, {args.partitions} partitions, {args.files} Parquet files read one per "
        f"micro-batch (`Trigger.availableNow`), noop sink, interval {args.interval}, 2 state partitions. "
        f"Each candidate runs in a fresh Python and JVM per round ({args.repeat} rounds, order rotating), "
        "first once over the input's first 20,000 rows (not measured: JIT and RocksDB loading, the only "
        "run before it in that JVM), then over the whole input: rows/s = input rows / wall time of the "
        "query, start-up and every micro-batch included, the median of the rounds, every round listed. "
        "jvm_limit is the same rule as a single-threaded loop over in-memory arrays "
        "(`kstreams.bench.DedupLimit`, a session of its own, its count checked as kstreams'). flink is "
        "PyFlink 2.3.0's keep-first `ROW_NUMBER` dedup over the same Parquet files (`benchmarks/flink_dedup.py`, "
        "its own process and virtualenv, a round each, start-up included, run only where `.venv-flink` exists): "
        "another rule, a key forgotten the interval of processing time after its first row "
        "(`table.exec.state.ttl`), so its count depends on timing: one more run writes its output to CSV "
        "files, and their lines must number between the input's distinct keys and its rows. The peak state rows of a RocksDB candidate read 0 where "
        f"trackTotalNumberOfRows is off. Spark's RocksDB settings: {rocksdb_settings()}. {CHECKED}{CHECKED_OLDER}"
    )
    finish(
        "default",
        "Default: throughput, a fresh process per candidate",
        table,
        method,
        results,
        args,
        plot_throughput,
    )
    if not args.no_update:
        add_history_line(results, args)


def plot_throughput(results, path, args):
    """rows/s per candidate, a bar each, log scale (the in-memory loop is far above the rest)."""
    plt = pyplot()
    if plt is None:
        return False
    ran = [r for r in results if "error" not in r and r.get("rows_per_s") == r.get("rows_per_s")]
    names = [r["name"] for r in ran]
    rates = [r["rows_per_s"] / 1000 for r in ran]
    fig, ax = plt.subplots(figsize=(10, 4))
    bars = ax.barh(names, rates, color=["tab:blue" if n == "kstreams" else "tab:gray" for n in names])
    ax.bar_label(bars, labels=[f"{r:,.0f}k" for r in rates], padding=3)
    ax.set_xscale("log")
    ax.set_xlabel("thousand rows/s, log scale (2 cores, local[2]; a fresh process per run)")
    ax.set_title(
        f"dedup throughput, {args.rows:,} rows, {args.keys:,} keys, interval {args.interval}", fontsize=10
    )
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


plot_throughput.image = "default.png"


def add_history_line(results, args):
    """One line under RESULTS.md's "## History": kstreams' rows/s and its ratio to each Spark store."""
    by_name = {r["name"]: r for r in results if "error" not in r}
    ours = by_name.get("kstreams", {}).get("rows_per_s")

    def ratio(name):
        other = by_name.get(name, {}).get("rows_per_s")
        return f"{ours / other:.2f}x" if ours and other else "n/a"

    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    line = (
        f"- {when}: {args.rows:,} rows, a fresh process per candidate and round, kstreams {ours or 0:,.0f} "
        f"rows/s; vs dropDuplicatesWithinWatermark RocksDB {ratio('spark_dedup_within_watermark_rocksdb')}, "
        f"HDFS {ratio('spark_dedup_within_watermark_hdfs')}, transformWithState floor {ratio('tws_floor')}"
        + (f" ({args.note})" if args.note else "")
    )
    path = os.path.join(BENCHMARKS, "RESULTS.md")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.rstrip() + "\n" + line + "\n")
