"""The cold regime: what a restarted query meets, each candidate in a fresh process per round."""

from __future__ import annotations

import copy
import statistics

from bench.candidates import dedup_candidates, only, rocksdb_settings
from bench.data import generate_live_keys
from bench.expected import CHECKED
from bench.report import (
    CANDIDATE,
    Column,
    finish,
    regime_table,
    timing,
)
from bench.rounds import fresh_workdir


def regime_cold(args):
    """Cold: each candidate in a process of its own per round (a new JVM, as after a restart): the
    first micro-batch of `cold_live_keys` new keys, then the measured micro-batches with those keys
    live; every run's forwarded rows checked as in the other regimes."""
    data = copy.copy(args)
    data.build_rows, data.partitions = args.cold_live_keys, args.cold_partitions
    chosen = only(dedup_candidates(args.long_interval), args)
    with fresh_workdir(args, "cold", args.long_interval) as runs:
        runs.generate(lambda spark: generate_live_keys(spark, runs.source, args.cold_live_keys, data))
        expected = runs.expected
        rounds = runs.rounds(
            chosen,
            lambda r: (
                f"first micro-batch {r['build_ms'][0]:,.0f} ms, then median {r['median_ms']:,.0f} ms "
                f"per micro-batch; forwarded {r['forwarded']:,}"
            ),
            skip=1,
        )
    results = []
    for name, runs in rounds.items():
        ok = [dict(r, first_ms=r["build_ms"][0]) for r in runs if "error" not in r]
        if not ok:
            results.append({"name": name, "error": runs[0]["error"]})
            continue
        # each figure the median of its own rounds: a run's first micro-batch and its later ones
        # need not be slow in the same round
        results.append(
            {
                "name": name,
                "conf": chosen[name][2],
                "first_ms": statistics.median(r["first_ms"] for r in ok),
                "median_ms": statistics.median(r["median_ms"] for r in ok),
                "rounds_first_ms": [r["first_ms"] for r in ok],
                "rounds_median_ms": [r["median_ms"] for r in ok],
                "forwarded": ok[0]["forwarded"],
                "failed_rounds": [r["error"] for r in runs if "error" in r],
            }
        )
    table = regime_table(
        results,
        [CANDIDATE],
        [
            *timing(results, args, f"first micro-batch ({args.cold_live_keys:,} new keys), ms", "first_ms"),
            *timing(results, args, f"then per {args.batch_rows:,}-row micro-batch, median ms", "median_ms"),
            Column(
                "forwarded (checked)",
                lambda r: f"{r['forwarded']:,}" + (" (yes)" if r["name"] in expected else " (no model)"),
            ),
        ],
    )
    method = (
        f"Interval {args.long_interval}; {args.cold_partitions} input partitions, 2 state partitions, "
        f"noop sink. Each candidate runs in a fresh Python and JVM per round ({args.repeat} rounds, "
        "order rotating), with nothing run before it: the first micro-batch is "
        f"{args.cold_live_keys:,} rows of new keys (the catch-up a restarted query does, JIT and "
        f"state store loading included), then {args.batches} micro-batches of {args.batch_rows:,} "
        f"rows (1 in {args.dup_every} a duplicate of a random earlier key, event time +1 s per "
        "micro-batch, every key live): `durationMs.triggerExecution` of the first, and the median of "
        "the others; each column the median of its rounds, every round listed. "
        f"Spark's RocksDB settings: {rocksdb_settings()}. {CHECKED}"
    )
    finish("cold", "Cold start: a fresh process per candidate", table, method, results, args)
