"""How long the CLI takes to report each mistake a new user makes, before Spark starts.

    .venv/bin/python benchmarks/cli_mistakes.py            # 5 rounds (make bench-cli, make bench)
    .venv/bin/python benchmarks/cli_mistakes.py --rounds 3 --no-update

Runs the installed ``kstreams-spark`` console script as a user would (a new process each time:
Python's start, and for a Spark SQL expression the JVM that reads it, included) with each mistake,
checks that it exits with code 2 and prints exactly the one expected line, and reports the median
and the slowest wall time of the rounds. The target: one line within 2 s, and for an unreachable
broker within its stated timeout (``--broker-timeout 2`` here) plus the same 2 s. A mistake that
prints anything else fails the run (exit code 1). Rewrites the ``<!-- regime:cli_mistakes -->``
section of RESULTS.md (--no-update: prints only).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench.report import update_section

SCRIPT = os.path.join(os.path.dirname(sys.executable), "kstreams-spark")
BROKER_TIMEOUT_S = 2
TARGET_S = 2.0


def cases(folder: str) -> list[tuple[str, list[str], str, float]]:
    """(mistake, arguments, the line's expected text, target seconds), in the order a new user meets them."""
    empty = os.path.join(folder, "empty")
    json_input = os.path.join(folder, "json")
    os.makedirs(empty, exist_ok=True)
    os.makedirs(json_input, exist_ok=True)
    with open(os.path.join(json_input, "part-0.json"), "w") as f:
        f.write('{"key": "a", "timestamp": "2026-01-01T00:00:00Z"}\n')
    dedup = ["dedup", "--topic", "t", "--output-topic", "o", "--checkpoint", os.path.join(folder, "ck")]
    unreachable = ["--bootstrap-servers", "127.0.0.1:1"]
    return [
        ("bad --interval", ["demo", "--interval", "10 parsecs"], "cannot read interval '10 parsecs'", TARGET_S),
        ("missing --input folder", ["demo", "--input", os.path.join(folder, "nope")], "no such folder", TARGET_S),
        ("empty --input folder", ["demo", "--input", empty], "has no input files", TARGET_S),
        ("--format not the files'", ["demo", "--input", json_input, "--format", "parquet"], "is not a Parquet", TARGET_S),
        ("--id parenthesis left open", [*dedup, *unreachable, "--id", "concat(key, 'x'"], "never closed", TARGET_S),
        ("--id unknown column (Spark's parser)", [*dedup, *unreachable, "--by", "id", "--id", "valu"], "no column 'valu'", TARGET_S),
        ("--id syntax error (Spark's parser)", [*dedup, *unreachable, "--by", "id", "--id", "key +* 2"], "does not parse", TARGET_S),
        ("--bootstrap-servers not host:port", [*dedup, "--bootstrap-servers", "broker"], "takes host:port", TARGET_S),
        ("--rows 0", ["demo", "--rows", "0"], "--rows must be at least 1, got 0", TARGET_S),
        ("negative --interval", [*dedup, *unreachable, "--interval", "-1 s"], "interval must not be negative", TARGET_S),
        (
            "--late-records with --by sequence",
            [*dedup, *unreachable, "--by", "sequence", "--id", "s", "--late-records", "drop"],
            "--late-records is for --by key, key-value and id",
            TARGET_S,
        ),
        (
            "--late-records side_output without --late-topic",
            [*dedup, *unreachable, "--late-records", "side_output"],
            "--late-records side_output and --late-topic TOPIC go together",
            TARGET_S,
        ),
        # argparse's own mistakes (one line, without its usage text)
        ("--format not a format", ["demo", "--format", "csv"], "argument --format: invalid choice: 'csv'", TARGET_S),
        ("--rows not a number", ["demo", "--rows", "many"], "argument --rows: invalid int value: 'many'", TARGET_S),
        ("required option missing", ["dedup", "--topic", "t"], "the following arguments are required:", TARGET_S),
        ("command misspelt", ["dedupe"], "argument command: invalid choice: 'dedupe'", TARGET_S),
        (
            f"broker not reachable (--broker-timeout {BROKER_TIMEOUT_S})",
            [*dedup, *unreachable, "--broker-timeout", str(BROKER_TIMEOUT_S)],
            f"no Kafka broker reachable at 127.0.0.1:1 within {BROKER_TIMEOUT_S} s",
            BROKER_TIMEOUT_S + TARGET_S,
        ),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--no-update", action="store_true", help="print only; leave RESULTS.md as it is")
    args = p.parse_args(argv)
    rows, failures = [], 0
    with tempfile.TemporaryDirectory() as folder:
        for name, cli_args, expected, target_s in cases(folder):
            times_s = []
            for _ in range(args.rounds):
                started = time.monotonic()
                out = subprocess.run([SCRIPT, *cli_args], capture_output=True, text=True, timeout=120)
                times_s.append(time.monotonic() - started)
                if out.returncode != 2 or expected not in out.stderr or out.stderr.count("\n") != 1:
                    print(
                        f"FAIL {name}: exit {out.returncode}, stderr:\n{out.stderr[-2000:]}", file=sys.stderr
                    )
                    failures += 1
                    break
            median_s, slowest_s = statistics.median(times_s), max(times_s)
            met = "yes" if slowest_s <= target_s else "**no**"
            rows.append(f"| {name} | {median_s:.2f} | {slowest_s:.2f} | {target_s:g} | {met} |")
            print(rows[-1], flush=True)
    table = "\n".join(
        [
            "| mistake | median s | slowest s | target s | met |",
            "|---|---:|---:|---:|:---:|",
            *rows,
        ]
    )
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join(["python benchmarks/cli_mistakes.py", *sys.argv[1:]])
    body = (
        f"{when}, `{command}`, "
        f"{args.rounds} rounds, each a new `kstreams-spark` process (exit code 2 and the one expected "
        f"line checked every time); {os.cpu_count()} cores.\n\n{table}"
    )
    print(table)
    if not args.no_update and not failures:
        update_section("cli_mistakes", "CLI mistakes: time to the one-line error", body)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
