"""The scale test (`--regime scale`, make scale-test): kstreams alone at 1M and 10M live keys."""

from __future__ import annotations

import os
import shutil

from bench.candidates import dedup_candidates
from bench.data import generate_live_keys
from bench.measure import error_text, measure
from bench.report import mb
from bench.rounds import warm_session


def scale_test(args):
    """kstreams alone, 2 GB driver: ms per micro-batch with the largest against the smallest
    live-key count of --scale-keys; PASS if the ratio is at most --scale-max-ratio and every
    query completed. Returns the exit code (0 PASS, 1 FAIL)."""
    sizes = [int(n) for n in args.scale_keys.split(",")]
    small, big = sizes[0], sizes[-1]
    candidate = dedup_candidates(args.long_interval)["kstreams"]
    medians, completed = {}, True
    with warm_session(args, "scale", memory="2g") as session:
        session.warm_up({"kstreams": candidate})
        for live in (small, big):
            source = os.path.join(session.workdir, f"input-{live}")
            skip = generate_live_keys(session.spark, source, live, args)
            print(f"running kstreams, {live:,} live keys ...", flush=True)
            try:
                r = measure(session.spark, f"kstreams-{live}", candidate, source, session.workdir, skip)
            except Exception as e:  # a failed query (e.g. out of memory) fails the test
                print(f"  failed: {error_text(e)}", flush=True)
                completed = False
                break
            shutil.rmtree(source, ignore_errors=True)
            done = len(r["build_ms"]) == skip and len(r["batch_ms"]) == args.batches
            completed = completed and done
            medians[live] = r["median_ms"]
            print(f"  build-up micro-batches, ms: {', '.join(f'{x:,}' for x in r['build_ms'])}", flush=True)
            print(
                f"  {len(r['batch_ms'])} of {args.batches} measured micro-batches: median {r['median_ms']:,.0f} ms, "
                f"p95 {r['p95_ms']:,.0f} ms; live heap {mb(r, 'live_heap_bytes')} MB, peak heap "
                f"{mb(r, 'peak_heap_bytes')} MB, heap after {mb(r, 'heap_after_bytes')} MB, peak state "
                f"{mb(r, 'peak_state_bytes', 1)} MB",
                flush=True,
            )
    ratio = (
        medians[big] / medians[small]
        if small in medians and big in medians and medians[small]
        else float("nan")
    )
    ok = completed and ratio <= args.scale_max_ratio
    print()
    for live, ms in medians.items():
        print(f"median ms per {args.batch_rows:,}-row micro-batch at {live:,} live keys: {ms:,.0f}")
    print(
        f"ratio {big:,} / {small:,} live keys: {ratio:.2f} (limit {args.scale_max_ratio}); "
        f"every query completed: {'yes' if completed else 'no'}"
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1
