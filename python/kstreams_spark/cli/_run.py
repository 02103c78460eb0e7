"""What every command that starts Spark shares: its one-line errors, quiet start-up and logs,
following a query."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator


def fail(args: argparse.Namespace, message: str, code: int) -> int:
    """Prints the command's one error line; returns ``code`` (2: a usage mistake, 1: a failure)."""
    print(f"kstreams-spark {args.command}: error: {message}", file=sys.stderr)
    return code


# The columns of Spark's Kafka source with includeHeaders, all that an --id expression can name
KAFKA_SOURCE_COLUMNS = [
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
]


def spark_logs(spark, verbose: bool) -> None:
    """Without ``--verbose`` a Spark error is the one line ``main`` prints: the JVM logs nothing,
    and neither do PySpark's own loggers, which write each captured analyzer error with its JVM
    stack to stderr as a JSON line. ``--verbose`` keeps Spark's errors and those lines."""
    from pyspark.logger import PySparkLogger

    spark.sparkContext.setLogLevel("ERROR" if verbose else "OFF")
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        # made as PySpark makes them: its calls pass keywords a plain logging.Logger refuses
        PySparkLogger.getLogger(name).disabled = not verbose


@contextlib.contextmanager
def jvm_start_up_quiet(quiet: bool) -> Iterator[Callable[[], None]]:
    """Runs the block with file descriptor 2 of a JVM started in it (Spark's driver) going to a pipe
    that drops what the JVM writes until the block calls the function it is given (Spark's start-up
    lines: its log4j profile, the host name, native libraries), and then copies it to stderr. So a
    failure while Spark starts (a bad --master) is one line, as the CLI's other errors are; the
    JVM's later output (a fatal error) still shows. ``quiet`` False (``--verbose``): nothing is dropped."""
    if not quiet:
        yield lambda: None
        return
    done = threading.Event()
    read_end, write_end = os.pipe()
    terminal = os.dup(2)
    sys.stderr.flush()
    os.dup2(write_end, 2)  # a process started now inherits the pipe as its stderr
    os.close(write_end)
    own_stderr = sys.stderr
    sys.stderr = open(terminal, "w", buffering=1, closefd=False)  # Python's lines still show

    def copy() -> None:
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            for line in iter(pipe.readline, b""):
                if done.is_set():
                    os.write(terminal, line)

    threading.Thread(target=copy, name="kstreams-jvm-stderr", daemon=True).start()
    try:
        yield done.set
    finally:
        done.set()
        sys.stderr.flush()
        sys.stderr = own_stderr
        os.dup2(terminal, 2)  # `terminal` stays open: the copy thread writes to it


def first_line(error: Exception) -> str:
    """The message of a Spark error on one line, in the CLI's words: without the JVM stack, the
    query's identity and plan, Spark's error-class wrappers and SQLSTATE codes; the library's
    advice names the Python argument, here it is a flag."""
    text = (getattr(error, "desc", None) or str(error)).strip().split("\n")[0]
    text = re.sub(r"^\[STREAM_FAILED\] Query \[.*?\] terminated with exception: ", "", text)
    text = re.sub(r"^\[TRANSFORM_WITH_STATE_USER_FUNCTION_ERROR\] ", "", text)
    text = re.sub(r"\s*SQLSTATE: \w+", "", text).strip()
    return text.replace(
        "pass on_null_timestamp='skip' (Scala: NullTimestamps.Skip)", "pass --on-null-timestamp skip"
    )


def follow(query, batches: int | None = None) -> int:
    """Follows the query until it ends; returns the rows read. On a terminal with ``batches``
    known: a progress bar; otherwise one line per finished micro-batch."""
    seen = set()
    total = 0
    bar = batches is not None and sys.stdout.isatty()

    def report(progress) -> int:
        if progress["batchId"] in seen:
            return 0
        seen.add(progress["batchId"])
        rows = progress["numInputRows"]
        if bar:
            return rows
        state = sum(op.get("numRowsTotal", 0) for op in progress.get("stateOperators", []))
        print(
            f"  batch {progress['batchId']:>3}: {rows:>8,} rows in, "
            f"{progress.get('processedRowsPerSecond', 0):>9,.0f} rows/s, state rows {state:,}",
            flush=True,
        )
        return rows

    def draw() -> None:
        done = min(len(seen), batches)
        filled = 30 * done // max(1, batches)
        print(
            f"\r  [{'#' * filled}{'.' * (30 - filled)}] {done}/{batches} micro-batches, {total:,} rows",
            end="",
            flush=True,
        )

    while query.isActive:
        for p in query.recentProgress:
            total += report(p)
        if bar:
            draw()
        time.sleep(0.5)
    query.awaitTermination()
    for p in query.recentProgress:
        total += report(p)
    if bar:
        draw()
        print()
    return total


def guess_format(folder: str) -> str:
    names = [n for _, _, files in os.walk(folder) for n in files]
    if any(n.endswith(".parquet") for n in names):
        return "parquet"
    return "json"
