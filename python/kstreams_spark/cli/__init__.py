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

``kstreams-spark state show CHECKPOINT [--operator K] [--key KEY]`` prints the kstreams operators
a checkpoint records and one operator's state (``read_state``), without running the query.

``kstreams-spark connect-server [--port N]`` runs a local Spark Connect server with kstreams (the
jar, the server plugin and the RocksDB state store) until Ctrl-C; connect with
``SparkSession.builder.remote("sc://127.0.0.1:N")``.

Arguments are checked before Spark starts; a mistake is one line on stderr and exit code 2, a
failed query one line and exit code 1 (``--verbose``: Spark's log and the stack). Without a
command it prints its help.

One module per command (``demo``, ``dedup``, ``state``, ``connect_server``), beside the parser
(``_parser``), the checks made before Spark starts (``_checks``) and what the commands that start
Spark share (``_run``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from kstreams_spark.cli._checks import check_arguments
from kstreams_spark.cli._parser import build_parser
from kstreams_spark.cli._run import fail, first_line
from kstreams_spark.cli.connect_server import run_connect_server
from kstreams_spark.cli.dedup import run_dedup
from kstreams_spark.cli.demo import run_demo
from kstreams_spark.cli.state import run_state_repartition, run_state_show


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: 0 when the command ends cleanly, 1 when its query or server fails, 2 for
    a usage mistake (one line on stderr; the stack with ``--verbose``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        # a bare command runs nothing (the demo writes files): say what there is
        parser.print_help(sys.stderr)
        return 2
    try:
        problem = check_arguments(args)
        if problem:
            return fail(args, problem, 2)
        if args.command == "dedup":
            return run_dedup(args)
        if args.command == "connect-server":
            return run_connect_server(args)
        if args.command == "state":
            return run_state_show(args) if args.state_command == "show" else run_state_repartition(args)
        return run_demo(args)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # one line, as for the checked mistakes; the stack on request
        if args.verbose:
            raise
        return fail(args, f"{first_line(e)} (--verbose for the stack)", 1)


if __name__ == "__main__":
    raise SystemExit(main())
