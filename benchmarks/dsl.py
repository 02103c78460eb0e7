"""The DSL regime: a windowed count, kstreams against Spark's own, each candidate in a fresh
process per round (`benchmarks/dsl_job.py`), rounds in rotating order, medians, every
candidate's output checked against counts computed here with numpy.

    .venv/bin/python benchmarks/dsl.py [--records 2000000] [--rounds 3] [--before-jar JAR]

Input: `--records` rows in 10 Parquet files read one per micro-batch (`availableNow`), 8 input
partitions advancing together (a row every 0.5 ms of event time per the whole input), 10,000
keys, 5% of rows up to 5 s out of order (never late: the grace and Spark's watermark delay are
10 s), 1-minute tumbling windows. Candidates:

* `kstreams`: `group_by_key().windowed_by(TimeWindows.of_size_and_grace("60 s", "10 s")).count()`
  at the library's defaults (`configure_spark`), each partition's own clock (README, "Stream time
  per partition"); it emits an update per record (Kafka Streams' semantics).
* `kstreams_before` (with `--before-jar`): the same query on an earlier build's jar, e.g. the
  watermark-clocked aggregation before issue 34.
* `spark_rocksdb`, `spark_hdfs`: `withWatermark("timestamp", "10 s").groupBy(window(...),
  key).count()`, update mode, on the RocksDB (what `configure_spark` sets) and on Spark's default
  HDFS-backed state store; they emit one update per changed (key, window) and micro-batch.

Every candidate's micro-batches go through the same `foreachBatch`: the largest count per
(key, window), appended to Parquet; after the run that must equal the true count of every
(key, window). Writes results/dsl.json and the `<!-- regime:dsl -->` section of RESULTS.md.
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


def run(candidate: str, jar: str | None, data: str, work: str) -> dict:
    out, checkpoint = os.path.join(work, "out"), os.path.join(work, "checkpoint")
    cmd = [sys.executable, os.path.join(HERE, "dsl_job.py"), "--candidate", JOBS[candidate]]
    cmd += ["--input", data, "--out", out, "--checkpoint", checkpoint]
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
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--before-jar", help="also run kstreams on this earlier jar (kstreams_before)")
    p.add_argument("--no-update", action="store_true", help="print only: no results/dsl.json, no RESULTS.md")
    args = p.parse_args()

    candidates = ["kstreams", "spark_rocksdb", "spark_hdfs"] + (
        ["kstreams_before"] if args.before_jar else []
    )
    root = tempfile.mkdtemp(prefix="kstreams-dsl-bench-")
    try:
        data = os.path.join(root, "input")
        expected = generate(data, args.records, args.keys, files=10)
        rounds: dict[str, list[dict]] = {c: [] for c in candidates}
        for r in range(args.rounds):
            order = candidates[r % len(candidates) :] + candidates[: r % len(candidates)]
            for c in order:
                work = os.path.join(root, f"{c}-{r}")
                result = run(c, args.before_jar if c == "kstreams_before" else None, data, work)
                if "error" not in result:
                    result["wrong"] = check(result.pop("out"), expected)
                rounds[c].append(result)
                shutil.rmtree(work, ignore_errors=True)
                print(c, r, {k: v for k, v in result.items() if k != "batch_ms"}, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(args, rounds)


def report(args, rounds: dict[str, list[dict]]) -> None:
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
        f"--records {args.records} --rounds {args.rounds}`",
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
    with open(os.path.join(HERE, "results", "dsl.json"), "w") as f:
        json.dump({"args": vars(args), "rounds": rounds}, f, indent=1)
    path = os.path.join(HERE, "RESULTS.md")
    text = open(path).read()
    start, end = "<!-- regime:dsl -->", "<!-- /regime:dsl -->"
    if start in text:
        text = text[: text.index(start) + len(start)] + "\n" + table + "\n" + text[text.index(end) :]
    else:
        text += f"\n{start}\n{table}\n{end}\n"
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
