"""The DSL regimes: a windowed count and a stream-stream join, kstreams against Spark's own, each
candidate in a fresh process per round (`benchmarks/dsl_job.py`), rounds in rotating order,
medians, every candidate's output checked against results computed here with numpy.

    .venv/bin/python benchmarks/dsl.py [--workload count|join|all] [--records 2000000] [--rounds 3]
                                       [--before-jar JAR]

The windowed count (`--workload count`):

Input: `--records` rows in 10 Parquet files read one per micro-batch (`availableNow`), 8 input
partitions advancing together (a row every 0.5 ms of event time per the whole input), 10,000
keys, 5% of rows up to 5 s out of order (never late: the grace and Spark's watermark delay are
10 s), 1-minute tumbling windows. Candidates:

* `kstreams`: `group_by_key().windowed_by(TimeWindows.of_size_and_grace("60 s", "10 s")).count()`
  at the library's defaults (`configure_spark`), each partition's own clock (the manual, "Stream time
  per partition"); it emits an update per record (Kafka Streams' semantics).
* `kstreams_before` (with `--before-jar`): the same query on an earlier build's jar, e.g. the
  watermark-clocked aggregation before issue 34.
* `spark_rocksdb`, `spark_hdfs`: `withWatermark("timestamp", "10 s").groupBy(window(...),
  key).count()`, update mode, on the RocksDB (what `configure_spark` sets) and on Spark's default
  HDFS-backed state store; they emit one update per changed (key, window) and micro-batch.

Every candidate's micro-batches go through the same `foreachBatch`: the largest count per
(key, window), appended to Parquet; after the run that must equal the true count of every
(key, window). Writes results/dsl.json and the `<!-- regime:dsl -->` section of RESULTS.md.

The stream-stream join (`--workload join`): `--records` rows, half on each side, each side in
10 Parquet files read one per micro-batch (both sides advance a file per micro-batch), a row per
side every 1 ms of event time, 50,000 keys, partition = key mod 8 on both sides (co-partitioned, as
Kafka Streams requires), 5% of rows up to 5 s out of order; an inner join of records of equal keys
within 10 s of each other, 10 s of grace (Spark: watermark delay 10 s on both sides). Candidates:

* `kstreams`: `KStream(left).join(KStream(right), joiner, JoinWindows.of_time_difference_and_grace(
  "10 s", "10 s"))` at the library's defaults, each task's clocks (the manual, "Stream time per
  partition").
* `kstreams_before` (with `--before-jar`): the same on an earlier build's jar.
* `spark_rocksdb`, `spark_hdfs`: both sides `withWatermark("timestamp", "10 s")`, joined on
  `l.key = r.key AND r.timestamp BETWEEN l.timestamp - 10 s AND l.timestamp + 10 s`, append mode.

No record is late for any candidate (5 s of disorder, 10 s of grace), so each must emit every pair
of equal keys within 10 s exactly once: the joined pairs written by the same `foreachBatch` (left
id, right id) must equal, as a multiset, the pairs computed here with sorted arrays. Writes
results/dsl-join.json and the `<!-- regime:dsl-join -->` section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = dt.datetime(2026, 1, 1)
WINDOW_MS = 60_000
# each candidate's query in dsl_job.py
JOBS = {
    "kstreams": "kstreams",
    "kstreams_before": "kstreams",
    "spark_rocksdb": "spark",
    "spark_hdfs": "spark_hdfs",
}


def generate(folder: str, records: int, keys: int, files: int, seed: int = 7) -> dict:
    """The input files, and the true count per (key, window start in epoch ms)."""
    rng = np.random.default_rng(seed)
    i = np.arange(records, dtype=np.int64)
    ts_us = i * 500  # 0.5 ms apart
    shifted = rng.random(records) < 0.05
    ts_us = ts_us - np.where(shifted, rng.integers(0, 5_000_000, records), 0)
    ts_us = np.maximum(ts_us, 0)
    key_ids = rng.integers(0, keys, records)
    partition = (i % 8).astype(np.int32)
    offset = i // 8
    os.makedirs(folder)
    bounds = np.linspace(0, records, files + 1).astype(np.int64)
    base_us = int(BASE.replace(tzinfo=dt.timezone.utc).timestamp() * 1_000_000)
    for f in range(files):
        s, e = bounds[f], bounds[f + 1]
        table = pa.table(
            {
                "key": pa.array([f"k{k}" for k in key_ids[s:e]]),
                "value": pa.array(["v"] * int(e - s)),
                "timestamp": pa.array(ts_us[s:e] + base_us, type=pa.timestamp("us", tz="UTC")),
                "partition": pa.array(partition[s:e]),
                "offset": pa.array(offset[s:e]),
            }
        )
        pq.write_table(table, os.path.join(folder, f"part-{f:03d}.parquet"))
    starts = ((ts_us + base_us) // 1000 // WINDOW_MS) * WINDOW_MS  # epoch ms
    frame = pd.DataFrame({"key": key_ids, "start": starts})
    counts = frame.groupby(["key", "start"]).size()
    return {(f"k{k}", int(s)): int(c) for (k, s), c in counts.items()}


def check(out: str, expected: dict) -> str | None:
    """None when the candidate's largest count per (key, window) is the true count of each."""
    got = pd.read_parquet(out)
    final = got.groupby(["key", "start"])["count"].max()
    seen = {(k, int(s)): int(c) for (k, s), c in final.items()}
    if seen == expected:
        return None
    wrong = [k for k in expected if seen.get(k) != expected[k]][:3]
    return (
        f"{len(seen)} windows against {len(expected)}; e.g. {[(k, seen.get(k), expected[k]) for k in wrong]}"
    )


JOIN_DIFFERENCE_MS = 10_000


def generate_join(folder: str, records: int, keys: int, files: int, seed: int = 11) -> np.ndarray:
    """Both sides' input files (`folder`/left, `folder`/right), and the sorted codes
    ``left id * right rows + right id`` of every pair of equal keys within the join's difference."""
    rng = np.random.default_rng(seed)
    rows = records // 2
    base_ms = int(BASE.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)
    sides = {}
    for side in ("left", "right"):
        i = np.arange(rows, dtype=np.int64)
        shifted = rng.random(rows) < 0.05
        ts_ms = np.maximum(i - np.where(shifted, rng.integers(0, 5_000, rows), 0), 0)  # 1 ms apart
        key_ids = rng.integers(0, keys, rows)
        partition = (key_ids % 8).astype(np.int32)
        offset = np.zeros(rows, dtype=np.int64)
        for p in range(8):
            at = np.nonzero(partition == p)[0]
            offset[at] = np.arange(len(at))
        os.makedirs(os.path.join(folder, side))
        bounds = np.linspace(0, rows, files + 1).astype(np.int64)
        for f in range(files):
            s, e = bounds[f], bounds[f + 1]
            table = pa.table(
                {
                    "key": pa.array([f"k{k}" for k in key_ids[s:e]]),
                    "value": pa.array([str(v) for v in i[s:e]]),
                    "timestamp": pa.array((ts_ms[s:e] + base_ms) * 1000, type=pa.timestamp("us", tz="UTC")),
                    "partition": pa.array(partition[s:e]),
                    "offset": pa.array(offset[s:e]),
                }
            )
            pq.write_table(table, os.path.join(folder, side, f"part-{f:03d}.parquet"))
        sides[side] = (key_ids, ts_ms)
    # every right row of the left row's key with |t_left - t_right| <= difference: right rows
    # sorted by (key, time), a left row's matches one contiguous run found by two binary searches
    (lk, lt), (rk, rt) = sides["left"], sides["right"]
    shift = np.int64(1) << 40
    order = np.lexsort((rt, rk))
    sorted_codes = rk[order] * shift + rt[order]
    lo = np.searchsorted(sorted_codes, lk * shift + lt - JOIN_DIFFERENCE_MS, "left")
    hi = np.searchsorted(sorted_codes, lk * shift + lt + JOIN_DIFFERENCE_MS, "right")
    counts = hi - lo
    left_ids = np.repeat(np.arange(rows, dtype=np.int64), counts)
    # positions lo..hi-1 of each left row, laid end to end
    starts = np.repeat(lo - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
    right_ids = order[starts + np.arange(counts.sum())]
    return np.sort(left_ids * rows + right_ids)


def check_join(out: str, expected: np.ndarray, rows: int) -> str | None:
    """None when the candidate's joined pairs are exactly the expected ones, each once."""
    got = pd.read_parquet(out) if os.path.exists(out) else pd.DataFrame({"left": [], "right": []})
    codes = np.sort(got["left"].to_numpy(np.int64) * rows + got["right"].to_numpy(np.int64))
    if np.array_equal(codes, expected):
        return None
    missing = np.setdiff1d(expected, codes)[:3]
    extra = np.setdiff1d(codes, expected)[:3]
    return (
        f"{len(codes)} pairs against {len(expected)} ({len(codes) - len(np.unique(codes))} repeated); "
        f"missing e.g. {[divmod(int(c), rows) for c in missing]}, extra e.g. {[divmod(int(c), rows) for c in extra]}"
    )


def run(candidate: str, jar: str | None, data: str, work: str, workload: str) -> dict:
    out, checkpoint = os.path.join(work, "out"), os.path.join(work, "checkpoint")
    cmd = [sys.executable, os.path.join(HERE, "dsl_job.py"), "--candidate", JOBS[candidate]]
    cmd += ["--workload", workload, "--out", out, "--checkpoint", checkpoint]
    if workload == "join":
        cmd += ["--input", os.path.join(data, "left"), "--right", os.path.join(data, "right")]
    else:
        cmd += ["--input", data]
    if jar:
        cmd += ["--jar", jar]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["out"] = out
    return result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workload", choices=["count", "join", "all"], default="all")
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--keys", type=int, help="distinct keys (default: 10,000 counting, 50,000 joining)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--before-jar", help="also run kstreams on this earlier jar (kstreams_before)")
    p.add_argument("--no-update", action="store_true", help="print only: no results/dsl.json, no RESULTS.md")
    args = p.parse_args()
    for workload in ("count", "join") if args.workload == "all" else (args.workload,):
        report(args, workload, measure(args, workload))


def measure(args, workload: str) -> dict[str, list[dict]]:
    """Every candidate's result per round, its output checked."""
    candidates = ["kstreams", "spark_rocksdb", "spark_hdfs"] + (
        ["kstreams_before"] if args.before_jar else []
    )
    root = tempfile.mkdtemp(prefix=f"kstreams-dsl-{workload}-bench-")
    try:
        data = os.path.join(root, "input")
        if workload == "join":
            expected = generate_join(data, args.records, args.keys or 50_000, files=10)
            rows = args.records // 2

            def checked(out):
                return check_join(out, expected, rows)
        else:
            expected_counts = generate(data, args.records, args.keys or 10_000, files=10)

            def checked(out):
                return check(out, expected_counts)

        rounds: dict[str, list[dict]] = {c: [] for c in candidates}
        for r in range(args.rounds):
            order = candidates[r % len(candidates) :] + candidates[: r % len(candidates)]
            for c in order:
                work = os.path.join(root, f"{c}-{r}")
                result = run(c, args.before_jar if c == "kstreams_before" else None, data, work, workload)
                if "error" not in result:
                    result["wrong"] = checked(result.pop("out"))
                rounds[c].append(result)
                shutil.rmtree(work, ignore_errors=True)
                print(workload, c, r, {k: v for k, v in result.items() if k != "batch_ms"}, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rounds


def report(args, workload: str, rounds: dict[str, list[dict]]) -> None:
    rows = []
    for c, results in rounds.items():
        ok = [r for r in results if "error" not in r and r["wrong"] is None]
        bad = [r.get("error") or r.get("wrong") for r in results if r not in ok]
        seconds = statistics.median(r["seconds"] for r in ok) if ok else None
        # each round's micro-batches after the first (the first pays the cold JVM and planning)
        steady = statistics.median(statistics.median(r["batch_ms"][1:]) for r in ok) if ok else None
        first = statistics.median(r["batch_ms"][0] for r in ok) if ok else None
        rows.append((c, seconds, first, steady, [round(r["seconds"], 1) for r in ok], bad))
    ks = {name: (s, f, b) for name, s, f, b, _, _ in rows}["kstreams"]
    lines = [
        f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}, `python benchmarks/dsl.py "
        f"--workload {workload} --records {args.records} --rounds {args.rounds}`",
        "",
        "| candidate | seconds, whole query (median) | first micro-batch ms | later micro-batches ms | "
        "kstreams ÷ candidate (seconds) | every round, s | output |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for name, s, f, b, every, bad in rows:
        ratio = f"{ks[0] / s:.2f}x" if s and ks[0] and name != "kstreams" else ""
        out = "checked" if not bad else "; ".join(str(x) for x in bad)
        cells = [name, f"{s:.1f}" if s else "-", f"{f:,.0f}" if f else "-", f"{b:,.0f}" if b else "-", ratio]
        lines.append("| " + " | ".join(cells + [", ".join(map(str, every)), out]) + " |")
    table = "\n".join(lines)
    print(table)
    if args.no_update:
        return
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    name = "dsl" if workload == "count" else f"dsl-{workload}"
    with open(os.path.join(HERE, "results", f"{name}.json"), "w") as f:
        json.dump({"args": vars(args), "workload": workload, "rounds": rounds}, f, indent=1)
    path = os.path.join(HERE, "RESULTS.md")
    text = open(path).read()
    start, end = f"<!-- regime:{name} -->", f"<!-- /regime:{name} -->"
    if start in text:
        text = text[: text.index(start) + len(start)] + "\n" + table + "\n" + text[text.index(end) :]
    else:
        text += f"\n{start}\n{table}\n{end}\n"
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
