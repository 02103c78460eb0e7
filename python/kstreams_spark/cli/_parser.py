"""The command line: its parser (one-line mistakes) and the choices the commands share."""

from __future__ import annotations

import argparse
from typing import NoReturn

# --real-time without a duration: Spark's own example, a checkpoint every 5 minutes
REAL_TIME_BATCH = "5 minutes"


# The default master of a real-time query: it keeps a task running per topic partition and per state
# partition (Spark refuses to start it with fewer free slots); the tasks mostly wait for records,
# so the slots are threads, not cores (the manual, "Real-time mode")
REAL_TIME_SLOTS = 64


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose mistakes (an unknown choice, a missing argument, a number that is
    not one) are one line, as every other mistake of the CLI: argparse prints its whole usage
    first, which buries the line that says what is wrong."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (--help for the usage)\n")


def build_parser() -> argparse.ArgumentParser:
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
        choices=list(DEDUP_BY),
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
        help="read a query's kstreams state from its checkpoint, or move it",
        description="Reads a stopped (or running) query's checkpoint without running the query, or "
        "moves a stopped query's state to another number of state partitions.",
    )
    state_sub = state.add_subparsers(dest="state_command", required=True, parser_class=_Parser)
    show = state_sub.add_parser(
        "show",
        help="the operators of a checkpoint and one operator's state",
        description="Lists the kstreams operators a checkpoint records and, as of the last committed "
        "micro-batch, what decides the next records of one of them: a dedup operator's live entries "
        "(deduplicate_by_key, deduplicate_by_key_value), a windowed distinct's open windows, a "
        "table's current rows. With --key, what the operator would do now with a record of that key.",
    )
    show.add_argument("checkpoint", help="the query's checkpoint location")
    show.add_argument("--operator", type=int, default=1, help="the operator's number, from 1 (default: 1)")
    show.add_argument("--key", help="only this key (compared as a string): the entry that decides it")
    show.add_argument("--limit", type=int, default=100, help="at most this many entries (default: 100)")
    show.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    repartition = state_sub.add_parser(
        "repartition",
        help="move a stopped query's state to another number of state partitions",
        description="Moves the state of the stopped query of CHECKPOINT to N state partitions with "
        "Spark's offline state repartitioner; the query's next run uses N whatever its session's "
        "spark.sql.shuffle.partitions says, and continues with the results of the query that never "
        "stopped. Refused, before anything is written, while a micro-batch is planned but not "
        "committed (a query still running, or stopped by a failure).",
    )
    repartition.add_argument("checkpoint", help="the stopped query's checkpoint location")
    repartition.add_argument(
        "--partitions", type=int, required=True, help="the new number of state partitions"
    )
    repartition.add_argument(
        "--file-sink",
        action="append",
        default=[],
        metavar="PATH",
        help="the output path of a file sink (Parquet, JSON...) of the query, whose log gets an entry for "
        "the micro-batch the move adds (repeat for several)",
    )
    repartition.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
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
DEDUP_BY = {
    "key": (lambda ks, id_, interval, late: ks.deduplicate_by_key(interval, late), False),
    "key-value": (lambda ks, id_, interval, late: ks.deduplicate_by_key_value(id_, interval, late), True),
    "id": (lambda ks, id_, interval, late: ks.deduplicate(id_, interval, late), True),
    "sequence": (lambda ks, id_, interval, late: ks.deduplicate_by_sequence(id_), True),
}
