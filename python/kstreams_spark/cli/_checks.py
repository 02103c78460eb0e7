"""The arguments checked before Spark starts (a JVM and a session take seconds): each mistake
one line, exit code 2."""

from __future__ import annotations

import argparse
import errno
import json
import os
import time

from kstreams_spark.cli._parser import DEDUP_BY
from kstreams_spark.cli._run import KAFKA_SOURCE_COLUMNS, guess_format


def check_arguments(args: argparse.Namespace) -> str | None:
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
    _, needs_id = DEDUP_BY[args.by]
    if needs_id and not args.id:
        return f"--by {args.by} needs --id EXPR (the {'sequence number' if args.by == 'sequence' else 'id'})"
    if args.late_records != "forward" and args.by == "sequence":
        return "--late-records is for --by key, key-value and id (sequence dedup has no late records)"
    if (args.late_records == "side_output") != bool(args.late_topic):
        return "--late-records side_output and --late-topic TOPIC go together"
    if args.id:
        from kstreams_spark._jvm import expression_problem

        # a parenthesis or quote left open is found at once; the rest only Spark's parser can read
        problem = unbalanced(args.id) or expression_problem(args.id, KAFKA_SOURCE_COLUMNS)
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
    """What keeps ``--real-time`` from running with the other arguments (the manual, "Real-time mode")."""
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


def unbalanced(text: str) -> str | None:
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


def input_files(folder: str) -> list[str]:
    """The files Spark's file sources read under ``folder`` (not hidden, not ``_``-prefixed)."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        found += [os.path.join(root, f) for f in sorted(files) if not f.startswith((".", "_"))]
    return found


def _input_problem(folder: str, fmt: str | None) -> str | None:
    if not os.path.isdir(folder):
        return f"--input {folder}: no such folder"
    files = input_files(folder)
    if not files:
        return f"--input {folder} has no input files (JSON lines or Parquet)"
    with open(files[0], "rb") as f:
        is_parquet = f.read(4) == b"PAR1"
    guessed = fmt or guess_format(folder)
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


DEMO_BROKER_TIMEOUT_S = 30.0


def _state_problem(args: argparse.Namespace) -> str | None:
    """``state show`` and ``state repartition``'s mistakes found without Spark: numbers, and a local
    checkpoint that is not there or not a kstreams one (a remote one, hdfs:// or s3a://, is read by
    Spark)."""
    if args.state_command == "show":
        if args.operator < 1:
            return f"--operator is an operator number from 1, got {args.operator}"
        if args.limit < 1:
            return f"--limit must be at least 1, got {args.limit}"
    elif args.partitions < 1:
        return f"--partitions is a number of state partitions from 1, got {args.partitions}"
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
