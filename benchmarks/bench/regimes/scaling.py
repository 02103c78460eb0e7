"""The scaling series (`--scaling`): throughput and peak state as the stream grows."""

from __future__ import annotations

import copy
import os
import shutil

from bench.candidates import dedup_candidates, rocksdb_settings
from bench.data import generate
from bench.expected import CHECKED, check_forwarded, modelled_forwarded
from bench.measure import measure
from bench.report import CANDIDATE, finish, megabytes, number, plot_scaling, regime_table
from bench.rounds import warm_session


def scaling(args):
    """Throughput and peak state as the stream grows (125,000 rows per micro-batch throughout): one
    warm run per point and candidate in one session (after a warm-up, each run after `unload_state`
    in `measure`), each candidate at its settings of `dedup_candidates`."""
    series = []
    points = [(int(r), int(min(int(r) * 0.75, 10_000_000))) for r in args.scaling_rows.split(",")]
    points += [(4_000_000, int(k)) for k in args.scaling_keys.split(",")]
    scaled = ("kstreams", "spark_dedup_within_watermark_rocksdb", "spark_dedup_within_watermark_hdfs")
    chosen = {k: v for k, v in dedup_candidates(args.interval).items() if k in scaled}
    with warm_session(args, "scaling") as session:
        warm_args = copy.copy(args)
        warm_args.rows, warm_args.keys, warm_args.files = 20_000, 15_000, 2
        small = os.path.join(session.workdir, "warmup")
        generate(session.spark, small, warm_args)
        session.warm_up(chosen, small)
        for rows, keys in dict.fromkeys(points):
            run_args = copy.copy(args)
            run_args.rows, run_args.keys, run_args.files = rows, keys, max(1, rows // 125_000)
            source = os.path.join(session.workdir, f"input-{rows}-{keys}")
            print(f"generating {rows:,} rows, {keys:,} keys ...", flush=True)
            generate(session.spark, source, run_args)
            expected = modelled_forwarded(session.spark, source, args.interval)
            for name, candidate in chosen.items():
                r = measure(session.spark, f"{name}-{rows}-{keys}", candidate, source, session.workdir)
                check_forwarded(name, r, expected)
                r.update(name=name, rows=rows, keys=keys)
                series.append(r)
                print(
                    f"  {name}: {r['rows_per_s']:,.0f} rows/s, peak state rows {r['peak_state_rows']:,}, "
                    f"peak state MB {r['peak_state_bytes'] / 1e6:.1f}",
                    flush=True,
                )
            shutil.rmtree(source, ignore_errors=True)
    table = regime_table(
        series,
        [number("rows", "rows"), number("keys", "keys"), CANDIDATE],
        [
            number("rows/s", "rows_per_s"),
            number("peak state rows", "peak_state_rows"),
            megabytes("peak state MB", "peak_state_bytes", 1),
        ],
    )
    method = (
        f"{CHECKED} One warm run per point and candidate in one session (after a warm-up; each run after the "
        "previous one's state was unloaded), 125,000 rows per micro-batch throughout, the default "
        f"regime's formulas, interval {args.interval}; kstreams at the library's defaults, Spark's "
        f"RocksDB settings: {rocksdb_settings()}."
    )
    finish("scaling", "Scaling", table, method, series, args, plot_scaling)
