"""``kstreams-spark state show``: what a checkpoint holds (``read_state``)."""

from __future__ import annotations

import argparse
import os

from kstreams_spark.cli._run import fail, first_line, jvm_start_up_quiet, spark_logs


def run_state_show(args: argparse.Namespace) -> int:
    """``kstreams-spark state show``: prints what a checkpoint holds; 0, or 2 for a bad use."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from kstreams_spark import KStreamsError, checkpoint_operators, configure_spark, read_state

    builder = (
        configure_spark(SparkSession.builder.master(args.master))
        .appName("kstreams-spark state show")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    with jvm_start_up_quiet(not args.verbose) as start_up_done:
        spark = builder.getOrCreate()
        spark_logs(spark, args.verbose)
        start_up_done()
    try:
        checkpoint = args.checkpoint if "://" in args.checkpoint else os.path.abspath(args.checkpoint)
        operators = checkpoint_operators(spark, checkpoint)
        print(f"checkpoint {args.checkpoint}: {len(operators)} kstreams operator(s)")
        for i, descriptor in enumerate(operators, start=1):
            print(f"  #{i} {descriptor}")
        try:
            state = read_state(spark, checkpoint, args.operator)
        except KStreamsError as e:
            return fail(args, first_line(e), 2)
        key_columns = [c for c in state.columns if c not in _STATE_COLUMNS]
        if args.key is not None:
            if key_columns == ["key_bytes"]:
                return fail(
                    args,
                    "this checkpoint has not recorded its key's type yet (written by an earlier "
                    "release): run its query once, then --key can compare keys",
                    2,
                )
            state = state.where(F.col(key_columns[0]).cast("string") == F.lit(args.key))
        rows = state.limit(args.limit + 1).collect()
        shown = rows[: args.limit]
        what = f" with key {args.key!r}" if args.key is not None else ""
        print(f"operator #{args.operator}: live entries{what}, as of the last committed micro-batch")
        columns = ["partition", *key_columns, "timestamp", "offset", "live_until", "stream_time"]
        table = [columns] + [[_cell(row[c]) for c in columns] for row in shown]
        widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
        for line in table:
            print(
                "  " + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
            )
        if len(rows) > args.limit:
            print(f"  ... more (--limit {args.limit})")
        if args.key is not None:
            print(_key_verdict(args.key, shown))
        return 0
    finally:
        spark.stop()


_STATE_COLUMNS = {"partition", "timestamp", "offset", "live_until", "stream_time"}


def _cell(value: object) -> str:
    return "null" if value is None else str(value)


def _key_verdict(key: str, rows: list) -> str:
    """What the operator would do now with a record of ``key``, by the entries that decide it."""
    if not rows:
        return (
            f"no live entry for key {key!r}: its next record is forwarded and stored (one older than "
            "its partition's stream time minus the interval is late: the operator's late_records "
            "decides)"
        )
    lines = []
    for row in rows:
        interval_s = (row["live_until"] - row["timestamp"]).total_seconds()
        lines.append(
            f"partition {row['partition']}: a record with key {key!r} and a timestamp within "
            f"{interval_s:g} s of {row['timestamp']} is dropped as a duplicate while the partition's "
            f"stream time is at most {row['live_until']}; any other is forwarded (a late one as the "
            "operator's late_records says)"
        )
    return "\n".join(lines)
