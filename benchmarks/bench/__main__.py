"""Throughput of deduplicate_by_key against Spark's own dedup operators, same data, same run.

    .venv/bin/python benchmarks/bench                  # the default regime
    .venv/bin/python benchmarks/bench --rows 200000 --keys 150000   # a quick one
    .venv/bin/python benchmarks/bench --regime all     # every regime in turn (make bench)
    .venv/bin/python benchmarks/bench --regime scale   # the scale test (make scale-test)

The package: `data` (the generated inputs), `candidates` (what is compared, with its settings),
`measure` (one run of one candidate), `expected` (what a candidate must forward, independently of
the code under test), `rounds` (rounds in rotating order, in one session or a fresh process per
run), `report` (tables, JSON, plots, RESULTS.md) and `regimes/` (one module per regime).

Regimes (--regime), each with kstreams and Spark's dropDuplicatesWithinWatermark on the RocksDB and
the HDFS-backed store on the same data, --repeat rounds in rotating order (the median reported,
every round kept), every run's forwarded rows checked where the candidate's rule is modelled; each
prints a table, writes results/<regime>.json and rewrites its `<!-- regime:NAME -->` section of
RESULTS.md (--no-update: none of that). Fresh: each candidate in a new Python and JVM per round,
as a restarted query meets it; warm: all in one session, each run after the previous candidates'
state was unloaded.

* default (fresh, each run after a warm-up of its own on 20,000 rows): `rows` records, `keys`
  distinct keys, every `dup_every`-th record an adjacent duplicate of the one before, event times
  1 ms apart plus an out-of-order spread, keys spread over `partitions` partitions, `files`
  Parquet files read one per micro-batch (Trigger.availableNow), noop sink; rows/s. Also the same
  rule as an in-memory loop (jvm_limit) and PyFlink where .venv-flink exists.
* cold (fresh, nothing before it): a 1-hour interval, a first micro-batch of 1,000,000 rows (all
  new keys: the catch-up after a restart, JIT included), then 20,000-row micro-batches with those
  keys live; the first micro-batch's ms and the median ms of the others.
* realistic (fresh): the demo's at-least-once stream at 2,000,000 events (replays, out-of-order
  and late events): rows/s, and from one more run per candidate with its output read back, the
  duplicates it let through and the events it lost.
* long (warm): a 1-hour interval with --live-keys keys live (built up first), then ms per
  20,000-row micro-batch (median, p95), live and peak JVM heap; plot results/long_interval.png.
* catchup (warm): a 1-hour interval, the first micro-batch 1,000,000 rows: its ms.
* global (warm): deduplicate by an `id` column with duplicates across partitions; rows/s.
* kafka_sink (warm): deduplicate_by_key's output written to the noop sink, to Kafka with Spark's
  sink (at-least-once) and with `to(topic, exactly_once=True)`; rows/s, on the tests' Kafka broker
  (started and stopped by the regime), every topic read back and its record count checked.
* scale (by hand, not in `make bench`): kstreams alone with a 2 GB driver, ms per micro-batch at
  10M against 1M live keys; PASS if at most 1.3x, exit code 1 on FAIL.
* --scaling: throughput and peak state as the stream grows (results/scaling.json and .png).
"""

from __future__ import annotations

import argparse
import os
import sys

PACKAGE = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):  # run as `python benchmarks/bench`: import it as the package `bench`
    sys.path.insert(0, os.path.dirname(PACKAGE))

from bench import REPO  # noqa: E402
from bench.regimes.catchup import regime_catchup  # noqa: E402
from bench.regimes.cold import regime_cold  # noqa: E402
from bench.regimes.default import regime_default  # noqa: E402
from bench.regimes.global_id import regime_global  # noqa: E402
from bench.regimes.kafka_sink import regime_kafka_sink  # noqa: E402
from bench.regimes.long import regime_long  # noqa: E402
from bench.regimes.realistic import regime_realistic  # noqa: E402
from bench.regimes.scale import scale_test  # noqa: E402
from bench.regimes.scaling import scaling  # noqa: E402
from bench.rounds import fresh_run  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--keys", type=int, default=1_500_000)
    p.add_argument(
        "--dup-every", type=int, default=4, help="every n-th row duplicates the previous (4: 25%%)"
    )
    p.add_argument("--partitions", type=int, default=16)
    p.add_argument("--files", type=int, default=16, help="Parquet files = micro-batches")
    p.add_argument("--spread-ms", type=int, default=0, help="out-of-order spread of event times")
    p.add_argument("--interval", default="10 seconds")
    p.add_argument("--only", help="comma-separated candidate names to run")
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="rounds of every candidate (order rotating by round); the median round counts",
    )
    p.add_argument(
        "--flink-python",
        default=os.path.join(REPO, ".venv-flink", "bin", "python"),
        help="python of a virtualenv with apache-flink (make bench creates .venv-flink)",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra Spark setting for every candidate (repeatable)",
    )
    p.add_argument("--no-update", action="store_true", help="do not touch RESULTS.md or results/")
    p.add_argument("--note", default="", help="a note for the history line")
    p.add_argument(
        "--scaling",
        action="store_true",
        help="instead: the scaling series (kstreams and Spark's RocksDB dedup), written to "
        "results/scaling.json/png and RESULTS.md",
    )
    p.add_argument("--scaling-rows", default="1000000,4000000,16000000")
    p.add_argument("--scaling-keys", default="10000,1000000,10000000", help="key counts at 4M rows")
    p.add_argument(
        "--regime",
        default="default",
        choices=(*REGIMES, "all", "scale"),
        help="every regime is described above; all: every one of them in turn, each in a process of "
        "its own (make bench); scale: the scale test (make scale-test)",
    )
    p.add_argument(
        "--topic-partitions", type=int, default=4, help="kafka_sink: partitions of each output topic"
    )
    p.add_argument("--long-interval", default="1 hour", help="the long, catchup and scale regimes' interval")
    p.add_argument(
        "--live-keys",
        default="1000000,3000000",
        help="long regime: live keys built up before the measured micro-batches (comma-separated)",
    )
    p.add_argument("--batch-rows", type=int, default=20_000, help="long/scale: rows per measured micro-batch")
    p.add_argument("--batches", type=int, default=15, help="long/scale: measured micro-batches")
    p.add_argument(
        "--build-rows",
        type=int,
        default=1_000_000,
        help="long/scale: at most this many rows per build-up micro-batch",
    )
    p.add_argument(
        "--catchup-rows", type=int, default=1_000_000, help="catchup: rows of the first micro-batch"
    )
    p.add_argument(
        "--cold-live-keys",
        type=int,
        default=1_000_000,
        help="cold: rows (all new keys) of the first micro-batch, then live through the measured ones",
    )
    p.add_argument("--cold-partitions", type=int, default=8, help="cold and realistic: input partitions")
    p.add_argument("--realistic-rows", type=int, default=2_000_000, help="realistic: events")
    p.add_argument("--realistic-batches", type=int, default=40, help="realistic: micro-batches")
    # one candidate's run in this process: what the fresh regimes start (rounds.fresh_run)
    p.add_argument("--fresh-run", help=argparse.SUPPRESS)
    p.add_argument("--fresh-source", help=argparse.SUPPRESS)
    p.add_argument("--fresh-workdir", help=argparse.SUPPRESS)
    p.add_argument("--fresh-interval", help=argparse.SUPPRESS)
    p.add_argument("--fresh-skip", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--fresh-verify", help=argparse.SUPPRESS)
    p.add_argument("--fresh-warmup", help=argparse.SUPPRESS)
    p.add_argument(
        "--tune",
        action="store_true",
        help="long/catchup/global: kstreams and Spark's RocksDB dedup under every RocksDB setting "
        "variant of TUNING (the experiment behind SPARK_ROCKSDB_CONF)",
    )
    p.add_argument("--tune-variants", help="with --tune: comma-separated TUNING variants (default: all)")
    p.add_argument(
        "--scale-keys", default="1000000,10000000", help="scale: the small and the large live-key count"
    )
    p.add_argument(
        "--scale-max-ratio",
        type=float,
        default=1.3,
        help="scale: PASS if median ms per micro-batch at the large count / at the small one <= this",
    )
    return p.parse_args(argv)


REGIMES = {
    "default": regime_default,
    "cold": regime_cold,
    "realistic": regime_realistic,
    "long": regime_long,
    "catchup": regime_catchup,
    "global": regime_global,
    "kafka_sink": regime_kafka_sink,
}


def run_all(argv):
    """Every regime of REGIMES in turn, each in a Python (and JVM) of its own; returns the worst
    exit code."""
    import subprocess

    rest, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--regime":
            skip = True
        elif not a.startswith("--regime="):
            rest.append(a)
    codes = []
    for regime in REGIMES:
        print(f"\n=== regime {regime} ===", flush=True)
        command = [sys.executable, PACKAGE, "--regime", regime, *rest]
        codes.append(subprocess.run(command, check=False).returncode)
    return max(codes)


def main(argv=None):
    args = parse_args(argv)
    if args.fresh_run:  # a child of FreshRuns.rounds
        return fresh_run(args)
    if args.scaling:
        return scaling(args)
    if args.regime == "all":
        return run_all(sys.argv[1:] if argv is None else argv)
    if args.regime == "scale":
        return scale_test(args)
    return REGIMES[args.regime](args)


if __name__ == "__main__":
    sys.exit(main())
