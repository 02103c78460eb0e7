"""What the regimes compare: each candidate is (state store provider, query, Spark settings of its
own), kstreams at the library's defaults (`KSTREAMS_CONF` is empty: what `configure_spark` sets)
and Spark's dedup at its best settings (`SPARK_ROCKSDB_CONF`, chosen with `--tune`)."""

from __future__ import annotations

import json
import os

from bench import BENCHMARKS, REPO

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


PROVIDER = "spark.sql.streaming.stateStore.providerClass"


ROCKSDB_CONF = "spark.sql.streaming.stateStore.rocksdb."


# The variants `bench --tune` tries, each on top of Spark's defaults (compactOnCommit is false
# and trackTotalNumberOfRows true by default: those variants flip them; blockCacheSizeMB is 8,
# formatVersion 5, compression lz4 by default). The session is configure_spark's, which turns
# changelog checkpointing on: the variants without it turn it off again.
CHANGELOG = ROCKSDB_CONF + "changelogCheckpointing.enabled"


NO_CHANGELOG = {CHANGELOG: "false"}


TUNING = {
    "defaults": dict(NO_CHANGELOG),
    "changelog": {CHANGELOG: "true"},
    "no_row_count": {**NO_CHANGELOG, ROCKSDB_CONF + "trackTotalNumberOfRows": "false"},
    "changelog_no_row_count": {
        CHANGELOG: "true",
        ROCKSDB_CONF + "trackTotalNumberOfRows": "false",
    },
    "cache_256mb": {**NO_CHANGELOG, ROCKSDB_CONF + "blockCacheSizeMB": "256"},
    "write_buffer_64mb": {
        **NO_CHANGELOG,
        ROCKSDB_CONF + "writeBufferSizeMB": "64",
        ROCKSDB_CONF + "maxWriteBufferNumber": "4",
    },
    "compact_on_commit": {**NO_CHANGELOG, ROCKSDB_CONF + "compactOnCommit": "true"},
    "no_compression": {**NO_CHANGELOG, ROCKSDB_CONF + "compression": "none"},
    "format_v6": {**NO_CHANGELOG, ROCKSDB_CONF + "formatVersion": "6"},
}


# The settings each candidate runs with in the long, catch-up and global regimes (set for its
# query only; the default regime keeps the session's settings). Chosen with the experiment
# `bench --regime long --tune` (same data and session, 20,000-row micro-batches, 3 rounds in
# rotating order, on the shared 2-core VM):
# * Spark's RocksDB dedup: changelog checkpointing (a commit writes the micro-batch's changes to a
#   changelog file instead of flushing the memtable and checkpointing SST files; snapshots are
#   made in the background) plus trackTotalNumberOfRows=false (no extra lookup per put to keep
#   numRowsTotal; the query then reports no state row count). Median ms per micro-batch against
#   Spark's defaults: with 500,000 live keys changelog 0.86x, both 0.74x (faster than changelog
#   alone in 2 of 3 rounds); with 200,000 changelog 0.88x/0.90x, both 0.86x/0.88x. No gain
#   within the noise from format_v6 (1.03x), write_buffer_64mb (1.13x), no_row_count alone
#   (1.11x), cache_256mb, no_compression or compact_on_commit (p95 2.6 s) at 100,000.
SPARK_ROCKSDB_CONF = dict(TUNING["changelog_no_row_count"])


# * kstreams: the library's defaults, nothing added (issue 36: what we measure is what a user
#   gets). The same experiment made changelog checkpointing configure_spark's default: on
#   2026-11-24, `--regime long --tune --tune-variants defaults,changelog,changelog_no_row_count
#   --only kstreams`: median ms per micro-batch against Spark's defaults, changelog 0.92x, both
#   0.89x at 1M live keys (both faster in every round: 337/316/303 ms against 470/356/334); a
#   second run, both 0.86x at 1M and 0.89x at 3M (again every round). Catch-up (`--regime catchup
#   --tune ...`): 0.94x/0.96x, within the noise. trackTotalNumberOfRows stays Spark's (true): off,
#   it takes numRowsTotal out of the query's progress, which users and the CLI read (the manual,
#   "Benchmarks"), for the last 3% of the gain.
KSTREAMS_CONF: dict = {}


def dedup_candidates(interval, column=None, tune=None, drop_duplicates=False):
    """The regimes' candidates: name -> (state store provider, query, Spark settings).

    column None: deduplicate_by_key against dropDuplicatesWithinWatermark(["key"]); a column name:
    the global deduplicate(F.col(column)) against dropDuplicatesWithinWatermark([column]); with
    each, tws_floor: the operator's input preparation (for the global one both its shuffles) and
    a transformWithState on RocksDB that forwards every record, the least a kstreams operator can
    cost. tune: a list of TUNING variants: kstreams and Spark's RocksDB dedup once per variant
    ("<name>+<variant>"). drop_duplicates: also Spark's older `dropDuplicates(["key", "timestamp"])`
    with a watermark (the default regime's extra candidate, on RocksDB at Spark's best settings)."""
    from kstreams_spark import KStream
    from pyspark.sql import functions as F

    if column is None:

        def ours(df):
            return KStream(df).deduplicate_by_key(interval).df
    else:

        def ours(df):
            return KStream(df).deduplicate(F.col(column), interval).df

    def spark_dedup(df):
        return df.withWatermark("timestamp", interval).dropDuplicatesWithinWatermark([column or "key"])

    if tune:
        chosen = {}
        for variant in tune:
            chosen[f"kstreams+{variant}"] = (ROCKSDB, ours, TUNING[variant])
            chosen[f"spark_dedup_within_watermark_rocksdb+{variant}"] = (
                ROCKSDB,
                spark_dedup,
                TUNING[variant],
            )
        return chosen
    chosen = {
        "kstreams": (ROCKSDB, ours, KSTREAMS_CONF),
        "spark_dedup_within_watermark_rocksdb": (ROCKSDB, spark_dedup, SPARK_ROCKSDB_CONF),
        "spark_dedup_within_watermark_hdfs": (HDFS, spark_dedup, {}),
        # what kstreams cannot go below on transformWithState, with kstreams' own settings
        "tws_floor": (ROCKSDB, tws_floor if column is None else spread_tws_floor(column), KSTREAMS_CONF),
    }
    if drop_duplicates:

        def spark_drop_duplicates(df):
            return df.withWatermark("timestamp", interval).dropDuplicates(["key", "timestamp"])

        chosen["spark_drop_duplicates_watermark_rocksdb"] = (
            ROCKSDB,
            spark_drop_duplicates,
            SPARK_ROCKSDB_CONF,
        )
    return chosen


def tws_floor(df):
    """kstreams' input preparation and transformWithState on RocksDB, forwarding every record."""
    from pyspark.sql import DataFrame

    return DataFrame(df.sparkSession._jvm.kstreams.bench.TwsFloor.passThrough(df._jdf), df.sparkSession)


def spread_tws_floor(column):
    """tws_floor for the global deduplicate(F.col(column)): its two shuffles, every record forwarded."""
    from pyspark.sql import DataFrame

    def op(df):
        floor = df.sparkSession._jvm.kstreams.bench.TwsFloor
        return DataFrame(floor.spreadPassThrough(df._jdf, column), df.sparkSession)

    return op


def tuning(args):
    """The TUNING variants --tune asks for (None without --tune)."""
    if not args.tune:
        return None
    variants = args.tune_variants.split(",") if args.tune_variants else list(TUNING)
    unknown = [v for v in variants if v not in TUNING]
    if unknown:
        raise SystemExit(f"unknown --tune-variants {unknown}; known: {', '.join(TUNING)}")
    return variants


def only(chosen, args):
    """The candidates `--only` names (a name, or for --tune variants the name before "+")."""
    if not args.only:
        return chosen
    wanted = set(args.only.split(","))
    return {k: v for k, v in chosen.items() if k in wanted or k.split("+")[0] in wanted}


def rocksdb_settings():
    """The RocksDB settings of the two RocksDB candidates, as the regime tables state them."""

    def listed(conf):
        return ", ".join(f"`{k.replace(ROCKSDB_CONF, '')}={v}`" for k, v in conf.items()) or "defaults"

    if KSTREAMS_CONF == SPARK_ROCKSDB_CONF:
        return f"{listed(SPARK_ROCKSDB_CONF)}, for kstreams too"
    from kstreams_spark.session import DEFAULT_SETTINGS

    # configure_spark's RocksDB settings, read where they are set
    library = {k: v for k, v in DEFAULT_SETTINGS.items() if k.startswith(ROCKSDB_CONF)}
    ours = listed(KSTREAMS_CONF) if KSTREAMS_CONF else f"the library's defaults ({listed(library)})"
    return f"{listed(SPARK_ROCKSDB_CONF)}; kstreams' {ours}"


# Flink's Parquet format and the Hadoop client it needs, fetched beside the PyFlink virtualenv by
# `make .venv-flink/.deps`
FLINK_JARS = os.path.join(REPO, ".venv-flink", "jars")


def flink(args, source, interval_ms, distinct_keys):
    """PyFlink keep-first dedup (ROW_NUMBER, streaming mode, local, parallelism 2, state TTL =
    the interval) over the Parquet files in `source`, in its own virtualenv and process: its
    rows/s and seconds, or {"error": ...}. A round per --repeat, order irrelevant (it shares no
    process with the others); the median round by rows/s.

    Then one more run with its output written to CSV files and counted ("forwarded"), which stops
    the benchmark unless it lies between `distinct_keys` (every key's first row is forwarded,
    whatever the timing) and the input's rows: Flink forgets a key the interval of processing time
    after its first row, so no model gives the exact count, but a run that read part of the input,
    or forwarded every row, fails this."""
    import subprocess
    import tempfile

    def run(*extra):
        command = [args.flink_python, os.path.join(BENCHMARKS, "flink_dedup.py"), source, str(args.rows)]
        done = subprocess.run(
            [*command, str(interval_ms), FLINK_JARS, *extra], capture_output=True, text=True, timeout=1800
        )
        if done.returncode != 0:
            print("  failed:", done.stderr[-2000:], flush=True)
            # the innermost cause of a Java stack, not its "... 49 more"
            causes = [x for x in done.stderr.splitlines() if "Exception" in x or "Error" in x]
            return {"error": (causes or done.stderr.strip().splitlines() or ["no output"])[-1][:300]}
        return json.loads(done.stdout.strip().splitlines()[-1])

    runs = []
    for round_no in range(args.repeat):
        print(f"running flink in its own process (round {round_no + 1} of {args.repeat}) ...", flush=True)
        runs.append(run())
        if "error" not in runs[-1]:
            print(f"  {runs[-1]['rows_per_s']:,.0f} rows/s", flush=True)
    if any("error" not in r for r in runs):
        print("running flink once more, its output written and counted ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="kstreams-flink-out-") as output:
            checked = run("--count", os.path.join(output, "forwarded"))
        if "error" in checked:
            raise SystemExit(f"flink's check run failed: {checked['error']}")
        forwarded = checked["forwarded"]
        if not distinct_keys <= forwarded <= args.rows:
            raise SystemExit(
                f"flink forwarded {forwarded:,} rows: keep-first forwards at least one per key "
                f"({distinct_keys:,}) and at most every row ({args.rows:,})"
            )
        print(f"  forwarded {forwarded:,} (at least the {distinct_keys:,} keys: ok)", flush=True)
        for r in runs:
            if "error" not in r:
                r["forwarded"] = forwarded
    return runs


def jvm_limit(spark, args, interval_ms):
    """The same rule as a single-threaded loop over in-memory arrays of the default regime's rows
    (`kstreams.bench.DedupLimit`, the same formulas as `data.generate`): rows/s and forwarded."""
    rate, forwarded = spark._jvm.kstreams.bench.DedupLimit.run(
        args.rows, args.keys, args.partitions, args.dup_every, args.spread_ms, interval_ms
    )
    return {"rows_per_s": rate, "forwarded": int(forwarded)}
