"""``kstreams-spark connect-server``: a local Spark Connect server with kstreams."""

from __future__ import annotations

import argparse
import signal
import sys

from kstreams_spark.cli._run import fail


def run_connect_server(args: argparse.Namespace) -> int:
    from kstreams_spark._connect_server import start_server, stop_server
    from kstreams_spark.errors import KStreamsError

    print(f"starting a Spark Connect server with kstreams on {args.host}:{args.port} ...", flush=True)
    try:
        process = start_server(
            args.port, args.host, args.master, log=sys.stderr, shuffle_partitions=args.shuffle_partitions
        )
    except KStreamsError as e:
        return fail(args, str(e), 1)
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
