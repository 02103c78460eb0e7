"""The global regime (warm): deduplicate by an id column whose duplicates cross partitions
(a module name other than `global`, a Python keyword)."""

from __future__ import annotations

from bench.candidates import dedup_candidates, only, rocksdb_settings, tuning
from bench.data import default_input
from bench.expected import CHECKED, modelled_forwarded
from bench.report import (
    CANDIDATE,
    HEAP,
    PEAK_STATE,
    finish,
    number,
    regime_table,
    throughput,
)
from bench.rounds import warm_session


def regime_global(args):
    """Global dedup by an id column, duplicates across partitions; rows/s as the default regime."""
    chosen = only(dedup_candidates(args.interval, column="id", tune=tuning(args)), args)
    with warm_session(args, "global") as session:
        source, small = default_input(session.spark, session.workdir, args, with_id=True)
        expected = modelled_forwarded(session.spark, source, args.interval, column="id")
        session.warm_up(chosen, small)
        results = session.rounds(
            chosen,
            source,
            "rows_per_s",
            lambda r: f"{r['rows_per_s']:,.0f} rows/s, live heap {r['live_heap_bytes'] / 1e6:,.0f} MB",
            expected=expected,
        )
    table = regime_table(
        results,
        [CANDIDATE],
        [
            *throughput(results, args, thousands=True),
            *PEAK_STATE,
            *HEAP[:2],
            number("seconds", "seconds", 1),
        ],
    )
    method = (
        f"The default regime's data ({args.rows:,} rows, {args.keys:,} ids, 1 in {args.dup_every} an adjacent "
        f"duplicate, {args.files} files = micro-batches) with an `id` column, each row on partition "
        f"`row % {args.partitions}` so that duplicates cross partitions; interval {args.interval}; "
        '`KStream(df).deduplicate(F.col("id"), interval)` against `withWatermark("timestamp", interval)'
        '.dropDuplicatesWithinWatermark(["id"])`; rows/s = input rows / wall time of the query, the '
        f"median of {args.repeat} rounds (order rotating). Spark's RocksDB settings: {rocksdb_settings()}"
        " (with trackTotalNumberOfRows=false a RocksDB candidate's peak state rows read 0). "
        f"{CHECKED} For the global rule the model takes the rows as the global store does: micro-batch by "
        "micro-batch, inside one partition by partition in offset order."
    )
    finish("global", "Global dedup by an id column", table, method, results, args)
