"""The long regime (warm): a 1-hour interval with many keys live, ms per micro-batch and heap."""

from __future__ import annotations

import os
import shutil

from bench.candidates import dedup_candidates, only, rocksdb_settings, tuning
from bench.data import generate_live_keys
from bench.expected import CHECKED, modelled_forwarded
from bench.report import (
    CANDIDATE,
    HEAP,
    every_round,
    finish,
    megabytes,
    number,
    plot_long,
    regime_table,
    versus_reference,
)
from bench.rounds import warm_session


def regime_long(args):
    """Long interval: ms per `batch_rows`-row micro-batch with `live_keys` keys live."""
    sizes = [int(n) for n in args.live_keys.split(",")]
    chosen = only(dedup_candidates(args.long_interval, tune=tuning(args)), args)
    results = []
    with warm_session(args, "long") as session:
        session.warm_up(chosen)
        for live in sizes:
            source = os.path.join(session.workdir, f"input-{live}")
            skip = generate_live_keys(session.spark, source, live, args)
            expected = modelled_forwarded(session.spark, source, args.long_interval)
            for r in session.rounds(
                chosen,
                source,
                "median_ms",
                lambda r: (
                    f"median {r['median_ms']:,.0f} ms, p95 {r['p95_ms']:,.0f} ms per micro-batch, "
                    f"live heap {r['live_heap_bytes'] / 1e6:,.0f} MB"
                ),
                skip,
                f", {live:,} live keys",
                expected=expected,
            ):
                results.append(dict(r, live_keys=live))
            shutil.rmtree(source, ignore_errors=True)
    table = regime_table(
        results,
        [number("live keys", "live_keys"), CANDIDATE],
        [
            number(f"median ms per {args.batch_rows:,}-row micro-batch", "median_ms"),
            number("p95 ms", "p95_ms"),
            versus_reference(results, args, "median_ms", same=("live_keys",)),
            every_round("every round, median ms", "median_ms"),
            *HEAP,
            megabytes("peak state MB", "peak_state_bytes", 1),
        ],
    )
    method = (
        f"Interval {args.long_interval}; per size, the live keys are built up first (micro-batches of at most "
        f"{args.build_rows:,} rows, all distinct keys, not measured), then {args.batches} micro-batches of "
        f"{args.batch_rows:,} rows (1 in {args.dup_every} a duplicate of a random earlier key, the rest new "
        "keys, event time +1 s per micro-batch, all inside the interval) are measured: "
        "`durationMs.triggerExecution` of each, median and p95 over them; the median of "
        f"{args.repeat} rounds (candidate order rotating by round), every round's median listed. Heap "
        "(`HeapMonitor` in bench/measure.py): live = the heap pools' usage after the latest GC, the most over the "
        "run; peak = the pools' peak usage, garbage included; after = heap used after a full GC once the "
        "query ended, its state stores still loaded. Peak state MB is the query's own `memoryUsedBytes` "
        f"(RocksDB: native memory). Spark's RocksDB settings: {rocksdb_settings()}. {CHECKED}"
    )
    finish("long", "Long interval (1 hour), large live state", table, method, results, args, plot_long)
