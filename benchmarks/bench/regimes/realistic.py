"""The realistic regime: the demo's at-least-once stream at scale, each candidate in a fresh
process per round, its output read back."""

from __future__ import annotations

import os
import statistics

from bench.candidates import dedup_candidates, only, rocksdb_settings
from bench.data import generate_realistic
from bench.expected import CHECKED, CHECKED_OLDER
from bench.report import (
    CANDIDATE,
    Column,
    finish,
    number,
    regime_table,
    throughput,
)
from bench.rounds import fresh_workdir


def regime_realistic(args):
    """Realistic: the demo's at-least-once stream at scale (`generate_realistic`), each candidate
    in a fresh process per round; rows/s, and from one more run per candidate whose output is
    written and read back, the duplicates it let through and the events it lost. Spark's older
    `dropDuplicates(key, timestamp)` runs too: many Spark pipelines dedup that way."""
    chosen = only(dedup_candidates(args.interval, drop_duplicates=True), args)
    with fresh_workdir(args, "realistic", args.interval) as runs:
        print(f"generating the demo's stream at {args.realistic_rows:,} events ...", flush=True)
        made = runs.generate(lambda spark: generate_realistic(spark, runs.source, args))
        expected = runs.expected
        print(
            f"  {made.records:,} records: {made.unique_events:,} events, {made.replayed:,} replayed, "
            f"{made.late:,} late, in {made.files} micro-batches",
            flush=True,
        )
        rounds = runs.rounds(chosen, lambda r: f"{r['rows_per_s']:,.0f} rows/s; forwarded {r['forwarded']:,}")
        checked = {}
        for name in chosen:
            print(f"running {name} once more, its output written and read back ...", flush=True)
            checked[name] = runs.once(name, verify=os.path.join(runs.workdir, f"out-{name}"))
            print(f"  {checked[name]}", flush=True)
    results = []
    for name, runs in rounds.items():
        ok = [r for r in runs if "error" not in r]
        if not ok:
            results.append({"name": name, "error": runs[0]["error"]})
            continue
        seen = checked[name]
        if "error" in seen or seen["forwarded"] != ok[0]["forwarded"]:
            raise SystemExit(f"{name}: its written output ({seen}) is not what its measured runs forwarded")
        results.append(
            {
                "name": name,
                "conf": chosen[name][2],
                "rows_per_s": statistics.median(r["rows_per_s"] for r in ok),
                "rounds_rows_per_s": [round(r["rows_per_s"]) for r in ok],
                "forwarded": seen["forwarded"],
                # a key is an event: rows beyond one per key are duplicates let through, keys of the
                # input missing from the output are events lost
                "duplicates_through": seen["forwarded"] - seen["forwarded_keys"],
                "lost": seen["input_keys"] - seen["forwarded_keys"],
                "failed_rounds": [r["error"] for r in runs if "error" in r],
            }
        )
    table = regime_table(
        results,
        [CANDIDATE],
        [
            *throughput(results, args),
            Column(
                "forwarded", lambda r: f"{r['forwarded']:,}" + (" (checked)" if r["name"] in expected else "")
            ),
            number("duplicates let through", "duplicates_through"),
            number("events lost", "lost"),
        ],
    )
    method = (
        f"Interval {args.interval}; the demo's at-least-once stream (`kstreams_spark.demo_data`) at "
        f"{made.unique_events:,} events: {made.records:,} records over {args.cold_partitions} partitions "
        f"in {made.files} micro-batches, event times out of order by up to 2 s, {made.replayed:,} "
        f"records a producer's replay of a send's tail (same key at a new offset), {made.late:,} events "
        "held back three micro-batches (minutes behind their partition: behind Spark's watermark). "
        f"Noop sink, 2 state partitions; each candidate in a fresh Python and JVM per round "
        f"({args.repeat} rounds, order rotating), rows/s over the whole run, the median of the rounds. "
        "Then each candidate once more with its output written to Parquet and read back: duplicates "
        "let through = rows beyond one per event, events lost = events of the input missing from the "
        "output (the floor forwards every record, so its duplicates are the replays). "
        f"Spark's RocksDB settings: {rocksdb_settings()}. {CHECKED}{CHECKED_OLDER}"
    )
    finish(
        "realistic",
        "Realistic: an at-least-once stream with replays and late events",
        table,
        method,
        results,
        args,
    )
