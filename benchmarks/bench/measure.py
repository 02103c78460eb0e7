"""One run of one candidate: a Spark session with the benchmark jar (`new_session`), the query over
a folder of Parquet files (`run_query`), and what `measure` reads of it (its progress, the heap
while it ran: `HeapMonitor`), after dropping what earlier queries left loaded (`unload_state`)."""

from __future__ import annotations

import math
import os
import re
import shutil
import statistics
import time

from bench import REPO
from bench.candidates import PROVIDER

BENCH_JAR = os.path.join(REPO, "jvm-bench", "target", "scala-2.13", "kstreams-spark-bench_2.13-0.1.0.jar")


def new_session(args, memory="4g"):
    """A Spark session as the benchmarks run every candidate in: `configure_spark` (the library's
    defaults), `local[2]`, 2 shuffle partitions, the benchmark jar, --conf's settings, every
    micro-batch's progress kept (the scale test's build-up alone is 10 of them)."""
    from kstreams_spark import configure_spark
    from pyspark.sql import SparkSession

    if not os.path.exists(BENCH_JAR):
        raise SystemExit(
            f"{BENCH_JAR} is missing: run the benchmarks through make (make bench, make bench-default...)"
        )
    # kstreams.bench (TwsFloor, DedupLimit): a jar of its own, never shipped (`make bench` builds
    # it); configure_spark adds the kstreams jars beside it, so both are on one class path
    builder = SparkSession.builder.config("spark.jars", BENCH_JAR).config(
        "spark.driver.extraClassPath", BENCH_JAR
    )
    for setting in args.conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = (
        configure_spark(builder.master("local[2]"))
        .appName("kstreams-spark benchmark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", memory)
        .config("spark.driver.extraJavaOptions", os.environ.get("BENCH_JAVA_OPTS", ""))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "10000")
    return spark


def run_query(spark, name, provider, op, source, workdir, conf=None):
    """Run `op` over the Parquet files in `source` (one file per micro-batch, availableNow; a
    DataFrame `op` returns goes to the noop sink, a DataStreamWriter is started as it is) with the
    state store `provider` and the candidate's own Spark settings `conf`, which
    are set before the query starts and reset (to the session's values) after it ends; returns
    the query's progress list and its wall time in seconds."""
    settings = {PROVIDER: provider, **(conf or {})}
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        stream = (
            spark.readStream.schema(spark.read.parquet(source).schema)
            .option("maxFilesPerTrigger", 1)
            .parquet(source)
        )
        checkpoint = os.path.join(workdir, f"ckpt-{name}")
        shutil.rmtree(checkpoint, ignore_errors=True)
        out = op(stream)
        # a DataFrame goes to the noop sink; the kafka_sink regime's candidates return their writer
        writer = out.writeStream.format("noop") if hasattr(out, "writeStream") else out
        query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
        started = time.perf_counter()
        query.awaitTermination()
        elapsed = time.perf_counter() - started
        return query.recentProgress, elapsed
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


class HeapMonitor:
    """The driver JVM's heap while one candidate runs (local mode: driver and executor are one
    JVM, so this is every task's heap too).

    * live heap: the sum over the heap memory pools (G1 Eden, Survivor, Old Gen) of
      `MemoryPoolMXBean.getCollectionUsage().getUsed()`, i.e. what each pool held right after the
      most recent garbage collection: retained data, not garbage waiting to be collected (an upper
      bound of it: Old Gen keeps promoted garbage until a mixed or full collection). Sampled from
      a Python thread every `period` seconds over py4j while the candidate runs, and once more at
      its end; the maximum is reported.
    * peak heap: the sum over the heap pools of `getPeakUsage().getUsed()` at the end, after a
      `resetPeakUsage()` at the start: the most each pool held at any moment, garbage included
      (the pools' peaks need not coincide, so this bounds the true peak from above).
    * heap after: heap used after a `System.gc()` (a full collection) once the query has ended,
      its state stores still loaded: what the candidate's state keeps on the heap.

    `System.gc()` runs before the reset so one candidate's garbage is not charged to the next
    (and measure() first drops what the previous query left loaded: unload_state). None of these counts
    off-heap memory: RocksDB's memtables and block cache are native memory (the query's own
    "peak state MB" is RocksDB's accounting of them); the HDFS-backed store keeps its maps on
    the heap."""

    def __init__(self, spark, period=0.25):
        import threading

        jvm = spark._jvm
        management = jvm.java.lang.management
        self._system = jvm.java.lang.System
        self._memory = management.ManagementFactory.getMemoryMXBean()
        heap = management.MemoryType.HEAP
        self._pools = [
            p for p in management.ManagementFactory.getMemoryPoolMXBeans() if p.getType().equals(heap)
        ]
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_loop, daemon=True)
        self.live_bytes = 0
        self.peak_bytes = 0
        self.after_bytes = 0

    def _sample(self):
        used = 0
        for pool in self._pools:
            usage = pool.getCollectionUsage()
            used += usage.getUsed() if usage is not None else 0
        self.live_bytes = max(self.live_bytes, used)

    def _sample_loop(self):
        while not self._stop.wait(self._period):
            try:
                self._sample()
            except Exception:  # the gateway going away at the end of a failed run
                return

    def __enter__(self):
        self._system.gc()
        for pool in self._pools:
            pool.resetPeakUsage()
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        try:
            self._sample()
            self.peak_bytes = sum(pool.getPeakUsage().getUsed() for pool in self._pools)
            self._system.gc()
            self.after_bytes = self._memory.getHeapMemoryUsage().getUsed()
        except Exception:
            if exc[0] is None:
                raise
        return False


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))]


def unload_state(spark):
    """Drop what finished queries still hold in this JVM, so that no candidate is charged for the
    previous one's state (in time, GC work and heap):

    * every state store provider still loaded: Spark keeps a finished query's providers (the HDFS
      store's maps, RocksDB instances) until its maintenance task unloads them, up to a minute
      later; the next query loads its own and restarts the maintenance task;
    * kstreams' in-memory dedup maps: they stay in the JVM after their query stopped, within
      `spark.kstreams.dedup.memory`, until later kstreams queries need the room."""
    from kstreams_spark._jvm import door

    spark._jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()
    door(spark).clearDedupMemory()


def measure(spark, name, candidate, source, workdir, skip=0):
    """One run of a candidate with the heap monitor: progress-derived times of its data
    micro-batches (`skip` build-up ones first, not measured), state and heap peaks."""
    provider, op, conf = candidate
    unload_state(spark)
    with HeapMonitor(spark) as heap:
        progress, elapsed = run_query(spark, name, provider, op, source, workdir, conf)
    data = [p for p in progress if p["numInputRows"]]
    measured = [p["durationMs"]["triggerExecution"] for p in data[skip:]]
    return {
        "seconds": elapsed,
        "rows": sum(p["numInputRows"] for p in data),
        "rows_per_s": sum(p["numInputRows"] for p in data) / elapsed,
        "build_ms": [p["durationMs"]["triggerExecution"] for p in data[:skip]],
        "batch_ms": measured,
        "median_ms": statistics.median(measured) if measured else float("nan"),
        "p95_ms": percentile(measured, 95) if measured else float("nan"),
        "peak_state_rows": max(
            [sum(o["numRowsTotal"] for o in p["stateOperators"]) for p in progress] or [0]
        ),
        "peak_state_bytes": max(
            [sum(o["memoryUsedBytes"] for o in p["stateOperators"]) for p in progress] or [0]
        ),
        "live_heap_bytes": heap.live_bytes,
        "peak_heap_bytes": heap.peak_bytes,
        "heap_after_bytes": heap.after_bytes,
        "forwarded": sum(p["sink"]["numOutputRows"] for p in progress),  # the noop sink's rows
    }


def error_text(e):
    """The first line of a failed run's error, without Spark's query-id preamble."""
    text = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return re.sub(r"^\[STREAM_FAILED\] Query \[.*?\] terminated with exception: ", "", text)[:300]


def stop_quietly(spark):
    """Stop the session; after an out-of-memory error the JVM may be gone already."""
    try:
        spark.stop()
    except Exception as e:
        print(f"(stopping Spark: {error_text(e)})")
