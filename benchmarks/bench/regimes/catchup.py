"""The catch-up regime (warm): a first micro-batch of a million rows."""

from __future__ import annotations

import copy
import os

from bench.candidates import dedup_candidates, only, rocksdb_settings, tuning
from bench.data import generate
from bench.expected import CHECKED, modelled_forwarded
from bench.report import (
    CANDIDATE,
    HEAP,
    Column,
    finish,
    megabytes,
    regime_table,
    timing,
)
from bench.rounds import warm_session


def regime_catchup(args):
    """Catch-up: the query's first micro-batch is `catchup_rows` rows at once."""
    chosen = only(dedup_candidates(args.long_interval, tune=tuning(args)), args)
    data = copy.copy(args)
    data.rows, data.keys, data.files, data.spread_ms = args.catchup_rows, args.catchup_rows * 3 // 4, 1, 0
    with warm_session(args, "catchup") as session:
        session.warm_up(chosen)
        source = os.path.join(session.workdir, "input")
        print(
            f"generating {data.rows:,} rows ({data.keys:,} keys, 1 in {data.dup_every} a duplicate) "
            "in one file ...",
            flush=True,
        )
        generate(session.spark, source, data)
        expected = modelled_forwarded(session.spark, source, args.long_interval)
        results = session.rounds(
            chosen,
            source,
            "median_ms",
            lambda r: (
                f"first micro-batch {r['median_ms']:,.0f} ms, live heap {r['live_heap_bytes'] / 1e6:,.0f} MB"
            ),
            expected=expected,
        )
    table = regime_table(
        results,
        [CANDIDATE],
        [
            *timing(
                results,
                args,
                f"ms for the first micro-batch ({args.catchup_rows:,} rows, median)",
                "median_ms",
            ),
            Column("rows/s in it", lambda r: f"{args.catchup_rows / r['median_ms'] * 1000:,.0f}"),
            *HEAP,
            megabytes("peak state MB", "peak_state_bytes", 1),
        ],
    )
    method = (
        f"Interval {args.long_interval}; the query's first micro-batch is all {data.rows:,} rows "
        f"({data.keys:,} keys, 1 in {data.dup_every} an adjacent duplicate, event times 1 ms apart: the "
        "default regime's formulas, in one file): `durationMs.triggerExecution` of micro-batch 0, the "
        f"median of {args.repeat} rounds (order rotating), every round listed; heap columns as in the long "
        f"regime. Spark's RocksDB settings: {rocksdb_settings()}. {CHECKED}"
    )
    finish("catchup", "Catch-up: a first micro-batch of a million rows", table, method, results, args)
