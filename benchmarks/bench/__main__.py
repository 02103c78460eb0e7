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

# The options: (flag, default or a type's default, help); an int default makes an int option, a
# bool one a flag, a list one a repeatable option. The regimes read only what they need.
OPTIONS = [
    ("--rows", 2_000_000, "default/global/kafka_sink: rows"),
    ("--keys", 1_500_000, "default/global/kafka_sink: distinct keys (ids)"),
    ("--dup-every", 4, "every n-th row duplicates the previous (4: 25%%)"),
    ("--partitions", 16, "input partitions"),
    ("--files", 16, "Parquet files = micro-batches"),
    ("--spread-ms", 0, "out-of-order spread of event times"),
    (
        "--interval",
        "10 seconds",
        "the dedup interval of the default, realistic, global and kafka_sink regimes",
    ),
    ("--only", None, "comma-separated candidate names to run"),
    ("--repeat", 3, "rounds of every candidate (order rotating by round); the median round counts"),
    (
        "--flink-python",
        os.path.join(REPO, ".venv-flink", "bin", "python"),
        "PyFlink's virtualenv (make bench)",
    ),
    ("--conf", [], "an extra Spark setting KEY=VALUE for every candidate (repeatable)"),
    ("--no-update", False, "do not touch RESULTS.md or results/"),
    ("--note", "", "a note for the history line"),
    ("--scaling", False, "instead: the scaling series, written to results/scaling.json/png and RESULTS.md"),
    ("--scaling-rows", "1000000,4000000,16000000", "scaling: row counts"),
    ("--scaling-keys", "10000,1000000,10000000", "scaling: key counts at 4M rows"),
    ("--topic-partitions", 4, "kafka_sink: partitions of each output topic"),
    ("--long-interval", "1 hour", "the cold, long, catchup and scale regimes' interval"),
    ("--live-keys", "1000000,3000000", "long: live keys built up before the measured micro-batches"),
    ("--batch-rows", 20_000, "cold/long/scale: rows per measured micro-batch"),
    ("--batches", 15, "cold/long/scale: measured micro-batches"),
    ("--build-rows", 1_000_000, "long/scale: at most this many rows per build-up micro-batch"),
    ("--catchup-rows", 1_000_000, "catchup: rows of the first micro-batch"),
    ("--cold-live-keys", 1_000_000, "cold: rows (all new keys) of the first micro-batch, then live"),
    ("--cold-partitions", 8, "cold and realistic: input partitions"),
    ("--realistic-rows", 2_000_000, "realistic: events"),
    ("--realistic-batches", 40, "realistic: micro-batches"),
    ("--tune", False, "long/catchup/global: kstreams and Spark's RocksDB dedup under every TUNING variant"),
    ("--tune-variants", None, "with --tune: comma-separated TUNING variants (default: all)"),
    ("--scale-keys", "1000000,10000000", "scale: the small and the large live-key count"),
    (
        "--scale-max-ratio",
        1.3,
        "scale: PASS if ms per micro-batch at the large count / the small one <= this",
    ),
]
# one candidate's run in this process: what the fresh regimes start (rounds.fresh_run)
FRESH_RUN_OPTIONS = [
    ("--fresh-run", None),
    ("--fresh-source", None),
    ("--fresh-workdir", None),
    ("--fresh-interval", None),
    ("--fresh-skip", 0),
    ("--fresh-verify", None),
    ("--fresh-warmup", None),
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--regime",
        default="default",
        choices=(*REGIMES, "all", "scale"),
        help="every regime is described above; all: every one of them in turn, each in a process of "
        "its own (make bench); scale: the scale test (make scale-test)",
    )
    for flag, default, help_text in OPTIONS + [(*o, argparse.SUPPRESS) for o in FRESH_RUN_OPTIONS]:
        if isinstance(default, bool):
            p.add_argument(flag, action="store_true", help=help_text)
        elif isinstance(default, list):
            p.add_argument(flag, action="append", default=list(default), help=help_text)
        elif default is None:
            p.add_argument(flag, help=help_text)
        else:
            p.add_argument(flag, type=type(default), default=default, help=help_text)
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
