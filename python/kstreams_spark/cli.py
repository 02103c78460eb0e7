"""``kstreams-spark``: run deduplication as a streaming job on local Spark.

``kstreams-spark demo`` generates an at-least-once stream with producer-retry duplicates and late
records (or reads ``--input`` JSON/Parquet files), runs ``deduplicate_by_key`` as a streaming query
with live progress, writes Parquet and prints a summary; on generated data it runs Spark's
``dropDuplicatesWithinWatermark`` on the same stream too and compares the two (a table, a PNG).
With ``--bootstrap-servers HOST:PORT`` it instead runs the dedup Kafka to Kafka on that broker in
real-time and in micro-batch mode and prints their latency side by side.

``kstreams-spark dedup --bootstrap-servers HOST:PORT --topic IN --output-topic OUT --checkpoint DIR``
deduplicates a Kafka topic into another (``--by key|key-value|id|sequence``, ``--id EXPR``), in
micro-batches or, with ``--real-time``, record by record in Spark's real-time mode.

``kstreams-spark connect-server [--port N]`` runs a local Spark Connect server with kstreams (the
jar, the server plugin and the RocksDB state store) until Ctrl-C; connect with
``SparkSession.builder.remote("sc://127.0.0.1:N")``.

Arguments are checked before Spark starts; a mistake is one line on stderr and exit code 2, a
failed query one line and exit code 1 (``--verbose``: Spark's log and the stack). Without a
command it prints its help.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn

# --real-time without a duration: Spark's own example, a checkpoint every 5 minutes
REAL_TIME_BATCH = "5 minutes"
# The default master of a real-time query: it keeps a task running per topic partition and per state
# partition (Spark refuses to start it with fewer free slots); the tasks mostly wait for records,
# so the slots are threads, not cores (README, "Real-time mode")
REAL_TIME_SLOTS = 64


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose mistakes (an unknown choice, a missing argument, a number that is
    not one) are one line, as every other mistake of the CLI: argparse prints its whole usage
    first, which buries the line that says what is wrong."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (--help for the usage)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kstreams-spark",
        description="Kafka Streams semantics on Spark: deduplicate an at-least-once stream.",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="on an error, print the whole stack, not one line"
    )
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser(
        "demo",
        help="deduplicate a generated stream (default) or files from --input",
        description="Runs deduplicate_by_key as a streaming query on local Spark and prints a "
        "summary. Without --input it generates an at-least-once stream with duplicates and late "
        "records, runs Spark's dropDuplicatesWithinWatermark on it too, and compares the two.",
    )
    demo.add_argument("--input", help="folder of JSON or Parquet files to read instead of generated data")
    demo.add_argument("--format", choices=["json", "parquet"], help="input format (default: from file names)")
    demo.add_argument("--key", default="key", help="key column (default: key)")
    demo.add_argument(
        "--timestamp",
        default="timestamp",
        help="timestamp column; strings are cast, numbers are epoch milliseconds (default: timestamp)",
    )
    demo.add_argument(
        "--partition", default="partition", help="partition column, if present (default: partition)"
    )
    demo.add_argument("--offset", default="offset", help="offset column, if present (default: offset)")
    demo.add_argument(
        "--on-null-timestamp",
        choices=["fail", "skip"],
        default="fail",
        help="a record without a timestamp fails the query naming it, or is skipped and counted "
        "(default: fail)",
    )
    demo.add_argument(
        "--interval",
        default="10 seconds",
        help="dedup interval, e.g. '10 seconds', '500 ms' (default: 10 seconds)",
    )
    demo.add_argument(
        "--output",
        default="demo-output/deduplicated",
        help="Parquet output folder (default: demo-output/deduplicated)",
    )
    demo.add_argument("--checkpoint", help="checkpoint folder (default: a fresh one next to the output)")
    demo.add_argument("--rows", type=int, default=200_000, help="generated records (default: 200000)")
    demo.add_argument("--partitions", type=int, default=4, help="generated partitions (default: 4)")
    demo.add_argument(
        "--batches", type=int, default=8, help="generated files, one per micro-batch (default: 8)"
    )
    demo.add_argument(
        "--files-per-batch", type=int, default=1, help="input files per micro-batch (default: 1)"
    )
    demo.add_argument("--master", help="Spark master (default: local[*]; local[8] with --bootstrap-servers)")
    demo.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT",
        help="a Kafka broker to use: instead of the files, print the latency of the dedup query "
        "Kafka to Kafka in real-time and micro-batch mode side by side (topics of its own)",
    )
    demo.add_argument(
        "--rate", type=int, default=1000, help="with --bootstrap-servers: records/s (default: 1000)"
    )
    demo.add_argument(
        "--seconds",
        type=float,
        default=20.0,
        help="with --bootstrap-servers: seconds of records per mode (default: 20)",
    )

    dedup = sub.add_parser(
        "dedup",
        help="deduplicate a Kafka topic into another topic",
        description="Reads --topic with Spark's Kafka source, deduplicates it and writes key, value "
        "and headers to --output-topic (Kafka's sink is at-least-once: after a crash, the "
        "micro-batch that was cut short is written again). Restart with the same --checkpoint to "
        "go on where it stopped. Prints one line per micro-batch; Ctrl-C stops it.",
    )
    dedup.add_argument("--bootstrap-servers", required=True, help="Kafka brokers, host:port[,host:port...]")
    dedup.add_argument("--topic", required=True, help="input topic")
    dedup.add_argument("--output-topic", required=True, help="output topic (must exist)")
    dedup.add_argument("--checkpoint", required=True, help="checkpoint folder: offsets and the dedup state")
    dedup.add_argument(
        "--by",
        choices=list(_DEDUP_BY),
        default="key",
        help="key: deduplicate_by_key; key-value: by (key, --id) per partition; id: by "
        "--id over all partitions; sequence: --id is a sequence number per partition "
        "(default: key)",
    )
    dedup.add_argument(
        "--id",
        metavar="EXPR",
        help="Spark SQL expression over key, value (binary), partition, offset, timestamp, "
        "headers, e.g. \"get_json_object(cast(value as string), '$.id')\"",
    )
    dedup.add_argument("--interval", default="10 seconds", help="dedup interval (default: 10 seconds)")
    dedup.add_argument(
        "--late-records",
        choices=["forward", "drop", "side_output"],
        default="forward",
        help="a record older than its partition's stream time minus --interval that is no "
        "duplicate is forwarded (KIP-655), dropped and counted, or written to --late-topic with a "
        "kstreams_reason header (default: forward; not for --by sequence)",
    )
    dedup.add_argument(
        "--late-topic", help="topic of the late records with --late-records side_output (must exist)"
    )
    dedup.add_argument(
        "--exactly-once",
        action="store_true",
        help="write each micro-batch in Kafka transactions, once across restarts and crashes, for "
        "read_committed consumers (default: Spark's at-least-once Kafka sink)",
    )
    dedup.add_argument(
        "--on-null-timestamp",
        choices=["fail", "skip"],
        default="fail",
        help="a record without a timestamp fails the query naming its partition and offset, or is "
        "skipped and counted (default: fail)",
    )
    dedup.add_argument(
        "--broker-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="give up when no broker of --bootstrap-servers accepts a connection within this "
        "time, before Spark starts (default: 30)",
    )
    dedup.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where a new checkpoint starts: earliest, latest or Spark's JSON form (default: earliest)",
    )
    dedup.add_argument("--max-offsets-per-trigger", type=int, help="most records per micro-batch")
    dedup.add_argument(
        "--available-now",
        action="store_true",
        help="process what the topic holds now, then stop (default: run until Ctrl-C)",
    )
    dedup.add_argument(
        "--trigger-interval",
        help="time between micro-batches when running on (default: as soon as possible)",
    )
    dedup.add_argument(
        "--real-time",
        nargs="?",
        const=REAL_TIME_BATCH,
        metavar="BATCH_DURATION",
        help="Spark's real-time mode instead of micro-batches: each record is deduplicated and "
        "written as it arrives (tens of milliseconds), offsets and state are checkpointed every "
        f"BATCH_DURATION (default {REAL_TIME_BATCH}, at least 5 seconds); --by key, key-value or sequence, "
        "at-least-once sink; needs a task slot per topic partition and per --shuffle-partitions "
        f"(default master: local[{REAL_TIME_SLOTS}])",
    )
    dedup.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra Kafka client setting for source and sink, e.g. security.protocol=SSL",
    )
    dedup.add_argument(
        "--shuffle-partitions",
        type=int,
        default=4,
        help="state partitions of a new checkpoint; state is kept per input "
        "partition, so more than the topic's partition count does not help (default: 4)",
    )
    dedup.add_argument(
        "--master", help=f"Spark master (default: local[*], with --real-time local[{REAL_TIME_SLOTS}])"
    )
    state = sub.add_parser(
        "state",
        help="read a query's kstreams state from its checkpoint",
        description="Reads a stopped (or running) query's checkpoint without running the query.",
    )
    state_sub = state.add_subparsers(dest="state_command", required=True, parser_class=_Parser)
    show = state_sub.add_parser(
        "show",
        help="the operators of a checkpoint and a dedup operator's live entries",
        description="Lists the kstreams operators a checkpoint records and the live entries of one "
        "per-partition dedup operator (deduplicate_by_key, deduplicate_by_key_value) as of the last "
        "committed micro-batch: partition, key, timestamp, offset, live until, stream time. With "
        "--key, what the operator would do now with a record of that key.",
    )
    show.add_argument("checkpoint", help="the query's checkpoint location")
    show.add_argument("--operator", type=int, default=1, help="the operator's number, from 1 (default: 1)")
    show.add_argument("--key", help="only this key (compared as a string): the entry that decides it")
    show.add_argument("--limit", type=int, default=100, help="at most this many entries (default: 100)")
    show.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    server = sub.add_parser(
        "connect-server",
        help="run a local Spark Connect server with kstreams",
        description="Runs Spark's Connect server (from the installed pyspark) with the kstreams jar, "
        "its Connect plugin and the RocksDB state store, until Ctrl-C.",
    )
    server.add_argument("--port", type=int, default=15002, help="port to listen on (default: 15002)")
    server.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    server.add_argument("--master", default="local[*]", help="Spark master (default: local[*])")
    server.add_argument(
        "--shuffle-partitions",
        type=int,
        default=4,
        help="the sessions' default spark.sql.shuffle.partitions, the state partitions of a new "
        "checkpoint (default: 4; a session can set its own)",
    )
    return parser


# --by: the KStream operator each choice runs, and whether it needs --id
_DEDUP_BY = {
    "key": (lambda ks, id_, interval, late: ks.deduplicate_by_key(interval, late), False),
    "key-value": (lambda ks, id_, interval, late: ks.deduplicate_by_key_value(id_, interval, late), True),
    "id": (lambda ks, id_, interval, late: ks.deduplicate(id_, interval, late), True),
    "sequence": (lambda ks, id_, interval, late: ks.deduplicate_by_sequence(id_), True),
}


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: 0 when the command ends cleanly, 1 when its query or server fails, 2 for
    a usage mistake (one line on stderr; the stack with ``--verbose``)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        # a bare command runs nothing (the demo writes files): say what there is
        parser.print_help(sys.stderr)
        return 2
    try:
        problem = _check_arguments(args)
        if problem:
            return _fail(args, problem, 2)
        if args.command == "dedup":
            return run_dedup(args)
        if args.command == "connect-server":
            return run_connect_server(args)
        if args.command == "state":
            return run_state_show(args)
        return run_demo(args)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # one line, as for the checked mistakes; the stack on request
        if args.verbose:
            raise
        return _fail(args, f"{_first_line(e)} (--verbose for the stack)", 1)


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    """Prints the command's one error line; returns ``code`` (2: a usage mistake, 1: a failure)."""
    print(f"kstreams-spark {args.command}: error: {message}", file=sys.stderr)
    return code


def _check_arguments(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments, found before Spark starts (it takes 30 s or more), or
    None. Spark SQL expressions (--id) can only be read by Spark's parser: a JVM of its own reads
    them here, without Spark (``expression_problem``)."""
    from kstreams_spark._intervals import interval_problem

    if args.command == "state":
        return _state_problem(args)
    if args.command == "connect-server":
        if args.shuffle_partitions < 1:
            return "--shuffle-partitions must be at least 1"
        return _port_problem(args.host, args.port)
    if not (args.command == "dedup" and args.by == "sequence"):
        problem = interval_problem(args.interval)
        if problem:
            return f"--interval: {problem}"
    if args.command == "demo":
        for name in ("rows", "partitions", "batches", "files_per_batch", "rate"):
            if getattr(args, name) < 1:
                return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
        if args.bootstrap_servers:
            if args.input:
                return "--input and --bootstrap-servers are two demos: give one"
            if not 0 < args.seconds <= 3600:
                return f"--seconds must be more than 0 and at most 3600, got {args.seconds:g}"
            from kstreams_spark._intervals import interval_micros

            if interval_micros(args.interval) < 1_000_000:
                # the demo's producer retries come up to 500 ms after their original
                return f"--interval must be at least 1 second with --bootstrap-servers, got {args.interval!r}"
            return _broker_problem(args.bootstrap_servers, DEMO_BROKER_TIMEOUT_S)
        if args.input:
            return _input_problem(args.input, args.format)
        return None
    _, needs_id = _DEDUP_BY[args.by]
    if needs_id and not args.id:
        return f"--by {args.by} needs --id EXPR (the {'sequence number' if args.by == 'sequence' else 'id'})"
    if args.late_records != "forward" and args.by == "sequence":
        return "--late-records is for --by key, key-value and id (sequence dedup has no late records)"
    if (args.late_records == "side_output") != bool(args.late_topic):
        return "--late-records side_output and --late-topic TOPIC go together"
    if args.id:
        from kstreams_spark._jvm import expression_problem

        # a parenthesis or quote left open is found at once; the rest only Spark's parser can read
        problem = _unbalanced(args.id) or expression_problem(args.id, KAFKA_SOURCE_COLUMNS)
        if problem:
            return f"--id {args.id!r}: {problem}"
    for option in args.kafka_option:
        name, sep, _ = option.partition("=")
        if not sep or not name:
            return f"--kafka-option takes NAME=VALUE, got {option!r}"
    problem = _micro_batch_problem(args)
    if problem:
        return problem
    if args.shuffle_partitions < 1:
        return f"--shuffle-partitions must be at least 1, got {args.shuffle_partitions}"
    if args.real_time is not None:
        problem = _real_time_problem(args)
        if problem:
            return problem
    return _broker_problem(args.bootstrap_servers, args.broker_timeout)


def _micro_batch_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the flags only Spark's Kafka source and trigger read, which Spark would
    report only once its session and query start, in its own words (a negative
    ``maxOffsetsPerTrigger`` ends in "Some data may have been lost")."""
    from kstreams_spark._intervals import interval_micros, interval_problem

    if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger < 1:
        return f"--max-offsets-per-trigger must be at least 1, got {args.max_offsets_per_trigger}"
    if args.trigger_interval is not None:
        problem = interval_problem(args.trigger_interval)
        if problem:
            return f"--trigger-interval: {problem}"
        if interval_micros(args.trigger_interval) % 1000:
            return f"--trigger-interval: Spark's triggers count whole milliseconds, got {args.trigger_interval!r}"
    return _starting_offsets_problem(args.starting_offsets, args.topic)


def _starting_offsets_problem(text: str, topic: str) -> str | None:
    """Why Spark's Kafka source would refuse ``--starting-offsets``, or None: ``earliest``,
    ``latest``, or JSON naming partitions of ``topic``, each an offset, -2 (earliest) or -1 (latest).

    >>> _starting_offsets_problem('{"events": {"0": 23, "1": -2}}', "events") is None
    True
    >>> print(_starting_offsets_problem("first", "events"))
    --starting-offsets takes earliest, latest or JSON such as {"events": {"0": 23, "1": -2}} (-2: earliest, -1: latest), got 'first'
    """
    if text.strip().lower() in ("earliest", "latest"):  # as Spark's Kafka source reads them
        return None
    usage = (
        f'--starting-offsets takes earliest, latest or JSON such as {{"{topic}": {{"0": 23, "1": -2}}}} '
        f"(-2: earliest, -1: latest), got {text!r}"
    )
    try:
        offsets = json.loads(text)
    except ValueError:
        return usage
    if not isinstance(offsets, dict) or not offsets:
        return usage
    for name, partitions in offsets.items():
        if name not in [t.strip() for t in topic.split(",")]:  # --topic is Spark's subscribe list
            return f"--starting-offsets names topic {name!r}, but the query reads --topic {topic!r}"
        if not isinstance(partitions, dict) or not partitions:
            return usage
        for partition, offset in partitions.items():
            if (
                not partition.isdigit()
                or isinstance(offset, bool)
                or not isinstance(offset, int)
                or offset < -2
            ):
                return f"--starting-offsets: partition {partition!r} of {name!r} has offset {offset!r}; " + (
                    "partitions are numbers, offsets at least -2 (-2: earliest, -1: latest)"
                )
    return None


def _real_time_problem(args: argparse.Namespace) -> str | None:
    """What keeps ``--real-time`` from running with the other arguments (README, "Real-time mode")."""
    from kstreams_spark._intervals import interval_micros, interval_problem

    problem = interval_problem(args.real_time)
    if problem:
        return f"--real-time: {problem}"
    if interval_micros(args.real_time) < 5_000_000:
        return f"--real-time: a batch lasts at least 5 seconds (Spark's minimum), got {args.real_time!r}"
    if args.by == "id":
        return "--real-time runs --by key, key-value and sequence; --by id needs micro-batches (drop --real-time)"
    for flag, given in (
        ("--exactly-once", args.exactly_once),
        ("--available-now", args.available_now),
        ("--trigger-interval", args.trigger_interval is not None),
        ("--max-offsets-per-trigger", args.max_offsets_per_trigger is not None),
    ):
        if given:
            why = (
                "its transactions commit once per batch, so a read_committed consumer would wait a whole "
                "batch duration"
                if flag == "--exactly-once"
                else "it is a micro-batch setting"
            )
            return f"--real-time and {flag} do not go together: {why}"
    return None


def _unbalanced(text: str) -> str | None:
    """The mistake Spark's parser would find first in most typed expressions, found at once: a
    parenthesis or quote left open or closed twice (outside '...', "..." and `...`). The rest of
    the expression is read by Spark's own parser (run_dedup)."""
    depth, quote, escaped = 0, None, False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote != "`":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return f"unbalanced ')' at character {i + 1}"
    if quote:
        return f"the quote {quote} is never closed"
    return f"{depth} '(' never closed" if depth else None


def _input_files(folder: str) -> list[str]:
    """The files Spark's file sources read under ``folder`` (not hidden, not ``_``-prefixed)."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        found += [os.path.join(root, f) for f in sorted(files) if not f.startswith((".", "_"))]
    return found


def _input_problem(folder: str, fmt: str | None) -> str | None:
    if not os.path.isdir(folder):
        return f"--input {folder}: no such folder"
    files = _input_files(folder)
    if not files:
        return f"--input {folder} has no input files (JSON lines or Parquet)"
    with open(files[0], "rb") as f:
        is_parquet = f.read(4) == b"PAR1"
    guessed = fmt or _guess_format(folder)
    if guessed == "parquet" and not is_parquet:
        return f"--format parquet, but {files[0]} is not a Parquet file (for JSON lines: --format json)"
    if guessed == "json" and is_parquet:
        return f"{files[0]} is a Parquet file: use --format parquet"
    return None


def _broker_problem(bootstrap_servers: str, timeout_s: float) -> str | None:
    """None once one of the brokers accepts a TCP connection; else what was tried, after
    ``timeout_s`` (a refused connection is retried: the broker may be starting)."""
    import socket

    addresses = []
    for server in bootstrap_servers.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            return f"--bootstrap-servers takes host:port[,host:port...], got {server.strip()!r}"
        addresses.append((host.strip("[]"), int(port)))
    deadline = time.monotonic() + timeout_s
    while True:
        for address in addresses:
            try:
                with socket.create_connection(
                    address, timeout=max(0.1, min(2.0, deadline - time.monotonic()))
                ):
                    return None
            except OSError:
                pass
        if time.monotonic() >= deadline:
            return (
                f"no Kafka broker reachable at {bootstrap_servers} within {timeout_s:g} s "
                "(--bootstrap-servers, --broker-timeout)"
            )
        time.sleep(0.2)


def _port_problem(host: str, port: int) -> str | None:
    """Why the Connect server could not listen on ``host:port``, or None: checked by binding it
    here, since the server would report a port in use only after its start-up (and a server
    already listening there would answer for it)."""
    import socket

    if not 0 < port < 65536:
        return f"--port must be from 1 to 65535, got {port}"
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            # as the server's own socket: a port whose last connections linger (TIME_WAIT) is free
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as e:
        in_use = e.errno == errno.EADDRINUSE
        why = "something already listens there (another Connect server?)" if in_use else e.strerror
        return f"--port {port}: cannot listen on {host}:{port}: {why}; stop it or choose another --port"
    return None


def run_connect_server(args: argparse.Namespace) -> int:
    from kstreams_spark._connect import start_server, stop_server
    from kstreams_spark.errors import KStreamsError

    print(f"starting a Spark Connect server with kstreams on {args.host}:{args.port} ...", flush=True)
    try:
        process = start_server(
            args.port, args.host, args.master, log=sys.stderr, shuffle_partitions=args.shuffle_partitions
        )
    except KStreamsError as e:
        return _fail(args, str(e), 1)
    print(f'ready: SparkSession.builder.remote("sc://{args.host}:{args.port}").getOrCreate()', flush=True)

    def stop(signum, frame):
        raise KeyboardInterrupt

    # Ctrl-C, and a plain kill: the server is in its own process group, so stop it here
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        return process.wait()
    except KeyboardInterrupt:
        stop_server(process)
        return 0


DEMO_BROKER_TIMEOUT_S = 30.0


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
        fmt = args.format or _guess_format(source_dir)
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
    _spark_logs(spark, args.verbose)  # errors: one line, by main
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
            return _fail(args, _first_line(e), 2)
        files = len(_input_files(source_dir))
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
    with _jvm_start_up_quiet(not args.verbose) as start_up_done:
        spark = builder.getOrCreate()
        _spark_logs(spark, args.verbose)  # errors: one line, by main
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
    records_in = _follow(query, batches)
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


def _state_problem(args: argparse.Namespace) -> str | None:
    """``state show``'s mistakes found without Spark: numbers, and a local checkpoint that is not
    there or not a kstreams one (a remote one, hdfs:// or s3a://, is read by Spark)."""
    if args.operator < 1:
        return f"--operator is an operator number from 1, got {args.operator}"
    if args.limit < 1:
        return f"--limit must be at least 1, got {args.limit}"
    path = args.checkpoint[len("file:") :] if args.checkpoint.startswith("file:") else args.checkpoint
    if "://" in path:
        return None
    if not os.path.isdir(path):
        return f"no checkpoint at {args.checkpoint} (not a directory)"
    if not os.path.isfile(os.path.join(path, "kstreams", "operators.json")):
        return (
            f"{args.checkpoint} is not the checkpoint of a query with kstreams operators "
            "(no kstreams/operators.json in it)"
        )
    return None


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
    with _jvm_start_up_quiet(not args.verbose) as start_up_done:
        spark = builder.getOrCreate()
        _spark_logs(spark, args.verbose)
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
            return _fail(args, _first_line(e), 2)
        key_columns = [c for c in state.columns if c not in _STATE_COLUMNS]
        if args.key is not None:
            if key_columns == ["key_bytes"]:
                return _fail(
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


def run_dedup(args: argparse.Namespace) -> int:
    """``kstreams-spark dedup``: a topic-to-topic dedup query; 0 when it ends cleanly, 1 when the
    query fails, 2 for bad arguments."""
    operator, _ = _DEDUP_BY[args.by]
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
    with _jvm_start_up_quiet(not args.verbose) as start_up_done:
        spark = builder.getOrCreate()
        _spark_logs(spark, args.verbose)  # errors: one line, by main
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
            return _fail(args, _first_line(e), 2)
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
            records_in = _follow(query)
        except KeyboardInterrupt:
            print("stopping ...", flush=True)
            query.stop()
            records_in = sum(p["numInputRows"] for p in query.recentProgress)
        except StreamingQueryException as e:
            return _fail(args, f"the query stopped: {_first_line(e)}", 1)
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


def _spark_logs(spark, verbose: bool) -> None:
    """Without ``--verbose`` a Spark error is the one line ``main`` prints: the JVM logs nothing,
    and neither do PySpark's own loggers, which write each captured analyzer error with its JVM
    stack to stderr as a JSON line. ``--verbose`` keeps Spark's errors and those lines."""
    from pyspark.logger import PySparkLogger

    spark.sparkContext.setLogLevel("ERROR" if verbose else "OFF")
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        # made as PySpark makes them: its calls pass keywords a plain logging.Logger refuses
        PySparkLogger.getLogger(name).disabled = not verbose


@contextlib.contextmanager
def _jvm_start_up_quiet(quiet: bool) -> Iterator[Callable[[], None]]:
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


def _first_line(error: Exception) -> str:
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


def _follow(query, batches: int | None = None) -> int:
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


def _guess_format(folder: str) -> str:
    names = [n for _, _, files in os.walk(folder) for n in files]
    if any(n.endswith(".parquet") for n in names):
        return "parquet"
    return "json"


if __name__ == "__main__":
    raise SystemExit(main())
