"""``kstreams-spark state show``: what a checkpoint holds (``read_state``); ``kstreams-spark state
repartition``: its state moved to another number of state partitions (``repartition_state``)."""

from __future__ import annotations

import argparse
import os

from kstreams_spark.cli._run import fail, first_line, jvm_start_up_quiet, spark_logs


def _session(args: argparse.Namespace):
    """The command's local Spark session, its start-up quiet unless --verbose."""
    from pyspark.sql import SparkSession

    from kstreams_spark import configure_spark

    builder = (
        configure_spark(SparkSession.builder.master(args.master))
        .appName(f"kstreams-spark state {args.state_command}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    with jvm_start_up_quiet(not args.verbose) as start_up_done:
        spark = builder.getOrCreate()
        spark_logs(spark, args.verbose)
        start_up_done()
    return spark


def run_state_repartition(args: argparse.Namespace) -> int:
    """``kstreams-spark state repartition``: moves a stopped query's state; 0, or 2 for a bad use."""
    from kstreams_spark import KStreamsError, checkpoint_operators, repartition_state

    spark = _session(args)
    try:
        checkpoint = args.checkpoint if "://" in args.checkpoint else os.path.abspath(args.checkpoint)
        try:
            before = repartition_state(spark, checkpoint, args.partitions, args.file_sink)
        except KStreamsError as e:
            return fail(args, first_line(e), 2)
        operators = checkpoint_operators(spark, checkpoint)
        print(
            f"checkpoint {args.checkpoint}: state moved from {before} to {args.partitions} state "
            f"partitions ({len(operators)} kstreams operator(s)); its query's next run uses "
            f"{args.partitions}"
        )
        return 0
    finally:
        spark.stop()


def run_state_show(args: argparse.Namespace) -> int:
    """``kstreams-spark state show``: prints what a checkpoint holds; 0, or 2 for a bad use."""
    from pyspark.sql import functions as F

    from kstreams_spark import KStreamsError, checkpoint_operators, read_state

    spark = _session(args)
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
        key_column = _key_column(state.columns)
        if args.key is not None:
            if key_column in ("key_bytes", None):
                return fail(
                    args,
                    "this checkpoint has not recorded its key's type yet (written by an earlier "
                    "release): run its query once, then --key can compare keys",
                    2,
                )
            state = state.where(F.col(key_column).cast("string") == F.lit(args.key))
        rows = state.limit(args.limit + 1).collect()
        shown = rows[: args.limit]
        what = f" with key {args.key!r}" if args.key is not None else ""
        print(
            f"operator #{args.operator}: {_kind(state.columns)}{what}, as of the last committed micro-batch"
        )
        table = [state.columns] + [[_cell(value) for value in row] for row in shown]
        widths = [max(len(line[i]) for line in table) for i in range(len(state.columns))]
        for line in table:
            print(
                "  " + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
            )
        if len(rows) > args.limit:
            print(f"  ... more (--limit {args.limit})")
        if args.key is not None:
            print(_key_verdict(args.key, state.columns, shown))
        return 0
    finally:
        spark.stop()


def _key_column(columns: list[str]) -> str | None:
    """The (first) key column of a state's rows: after ``partition`` where there is one."""
    if "key_bytes" in columns:
        return "key_bytes"
    rest = columns[1:] if columns and columns[0] in ("partition", "group") else columns
    return rest[0] if rest else None


def _kind(columns: list[str]) -> str:
    if "live_until" in columns:
        return "live entries"
    if "open_until" in columns:
        return "open windows"
    return "current rows"


def _cell(value: object) -> str:
    return "null" if value is None else str(value)


def _key_verdict(key: str, columns: list[str], rows: list) -> str:
    """What the operator would do now with a record of ``key``, by the rows that decide it."""
    if "live_for_partitions" in columns:  # the global store of deduplicate
        if not rows:
            return (
                f"no live entry for id {key!r}: its next record is forwarded and stored (one older "
                "than its partition's stream time minus the interval is late: the operator's "
                "late_records decides)"
            )
        return "\n".join(
            f"a record with id {key!r} and a timestamp within "
            f"{(row['live_until'] - row['timestamp']).total_seconds():g} s of {row['timestamp']} is "
            "dropped as a duplicate if it comes from partition "
            f"{', '.join(str(p) for p in row['live_for_partitions'])} while that partition's stream "
            f"time is at most {row['live_until']}; any other is forwarded"
            for row in rows
        )
    if "live_until" in columns:  # a dedup operator's entries
        if not rows:
            return (
                f"no live entry for key {key!r}: its next record is forwarded and stored (one older "
                "than its partition's stream time minus the interval is late: the operator's "
                "late_records decides)"
            )
        return "\n".join(
            f"partition {row['partition']}: a record with key {key!r} and a timestamp within "
            f"{(row['live_until'] - row['timestamp']).total_seconds():g} s of {row['timestamp']} is "
            f"dropped as a duplicate while the partition's stream time is at most {row['live_until']}; "
            "any other is forwarded (a late one as the operator's late_records says)"
            for row in rows
        )
    if "open_until" in columns:  # a windowed distinct's open windows
        if not rows:
            return f"no open window for key {key!r}: its next record opens one and is forwarded (unless late)"
        return "\n".join(
            f"partition {row['partition']}: a record with key {key!r} in the window "
            f"[{row['window_start']}, {row['window_end']}] is dropped as a duplicate while the "
            f"partition's stream time is at most {row['open_until']}"
            for row in rows
        )
    if not rows:  # a table
        return f"no row for key {key!r}: its next update is forwarded"
    row = rows[0]
    return (
        f"an update of key {key!r} to {row[columns[1]]!r} with a timestamp at or after "
        f"{row['timestamp']} is dropped as idempotent; any other is forwarded"
    )
