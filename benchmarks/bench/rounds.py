"""Rounds of candidates: in one session (`WarmSession.rounds`, the warm regimes: order rotating,
each run after `unload_state`) or each in a fresh Python and JVM (`FreshRuns.rounds`: the child runs
`fresh_run`), every run's forwarded rows checked."""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager

from bench.candidates import dedup_candidates
from bench.data import generate_live_keys
from bench.expected import check_forwarded, modelled_forwarded
from bench.measure import error_text, measure, new_session, run_query, stop_quietly

PACKAGE = os.path.dirname(os.path.abspath(__file__))  # what `python PACKAGE` runs: __main__


def rotated(items, round_no):
    """The candidates (a list) in round `round_no`'s order: each round starts one candidate later,
    so none always runs first or right after the same neighbour (the shared machine's load drifts)."""
    shift = round_no % len(items) if items else 0
    return items[shift:] + items[:shift]


class WarmSession:
    """A warm regime's session (`spark`), scratch folder (`workdir`) and arguments (`args`): every
    candidate runs in this one JVM (`warm_session` makes and ends it)."""

    def __init__(self, spark, workdir, args):
        self.spark, self.workdir, self.args = spark, workdir, args

    def warm_up(self, chosen, source=None):
        """JIT and RocksDB native loading, not measured: each candidate once over `source`, or over a
        tiny stream of live keys made here."""
        if source is None:
            small = copy.copy(self.args)
            small.batch_rows, small.batches, small.build_rows = 2_000, 2, 20_000
            source = os.path.join(self.workdir, "warmup")
            generate_live_keys(self.spark, source, 20_000, small)
        for name, candidate in chosen.items():
            measure(self.spark, "warmup-" + name, candidate, source, self.workdir)

    def rounds(self, chosen, source, key, describe, skip=0, label="", expected=None, check=None):
        """--repeat rounds of every candidate (order rotating by round) over the same input, each run
        after the previous one's state was unloaded (`measure`); per candidate the median round by
        `key` with every round's value of it ("rounds_<key>"). A failed run (e.g. out of memory) is
        kept as its error; a candidate whose every run failed is reported as failed. Each run's
        forwarded rows are checked against `expected` (`check_forwarded`) if given; `check(name,
        result)`, if given, runs after each run too (it may add to the result, or stop the benchmark
        with SystemExit)."""
        repeat = self.args.repeat
        rounds = {name: [] for name in chosen}
        for round_no in range(repeat):
            for name, candidate in rotated(list(chosen.items()), round_no):
                print(f"running {name}{label} (round {round_no + 1} of {repeat}) ...", flush=True)
                try:
                    r = measure(self.spark, name, candidate, source, self.workdir, skip)
                    if expected is not None:
                        check_forwarded(name, r, expected)
                    if check is not None:
                        check(name, r)
                    print(f"  {describe(r)}", flush=True)
                except Exception as e:
                    r = {"error": error_text(e)}
                    print(f"  failed: {r['error']}", flush=True)
                rounds[name].append(r)
        return [
            dict(median_round(runs, key), name=name, conf=chosen[name][2]) for name, runs in rounds.items()
        ]


@contextmanager
def warm_session(args, name, memory="4g"):
    """A WarmSession in a new Spark session and scratch folder (kstreams-<name>-*), the session
    stopped and the folder removed at the end."""
    spark = new_session(args, memory)
    workdir = tempfile.mkdtemp(prefix=f"kstreams-{name}-")
    try:
        yield WarmSession(spark, workdir, args)
    finally:
        stop_quietly(spark)
        shutil.rmtree(workdir, ignore_errors=True)


def median_round(runs, key):
    """A candidate's runs as one result: its median run by `key`, with every run's `key`
    ("rounds_<key>") and the errors of failed runs ("failed_rounds"); {"error": ...} if every run
    failed (e.g. out of memory)."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"error": runs[0]["error"]}
    result = dict(sorted(ok, key=lambda r: r[key])[len(ok) // 2], **{f"rounds_{key}": [r[key] for r in ok]})
    if len(ok) < len(runs):
        result["failed_rounds"] = [r["error"] for r in runs if "error" in r]
    return result


def fresh_run(args):
    """One candidate's run in this fresh process (what `FreshRuns.rounds` starts per candidate and
    round), printed as a JSON line "RESULT {...}": `measure`'s result (its first `fresh_skip`
    micro-batches apart), after one unmeasured run of the same candidate over `fresh_warmup` if
    given (JIT and RocksDB loading: the only run before it in this JVM); or, with `fresh_verify`,
    the candidate's output written to Parquet there and read back: rows forwarded, distinct keys
    among them, distinct keys of the input."""
    spark = new_session(args)
    try:
        name = args.fresh_run
        provider, op, conf = dedup_candidates(args.fresh_interval, drop_duplicates=True)[name]
        if args.fresh_warmup:
            measure(spark, "warmup-" + name, (provider, op, conf), args.fresh_warmup, args.fresh_workdir)
        if not args.fresh_verify:
            r = measure(
                spark, name, (provider, op, conf), args.fresh_source, args.fresh_workdir, args.fresh_skip
            )
        else:
            out = args.fresh_verify

            def written(df):
                return op(df).select("key").writeStream.format("parquet").option("path", out)

            run_query(spark, name, provider, written, args.fresh_source, args.fresh_workdir, conf)
            got = spark.read.parquet(out).selectExpr("count(*) AS n", "count(DISTINCT key) AS keys").first()
            sent = spark.read.parquet(args.fresh_source).selectExpr("count(DISTINCT key) AS keys").first()
            r = {"forwarded": got.n, "forwarded_keys": got.keys, "input_keys": sent.keys}
    finally:
        stop_quietly(spark)
    print("RESULT " + json.dumps(r), flush=True)


class FreshRuns:
    """A fresh regime's runs: each candidate in a new Python and JVM (`fresh_run`), over the input
    in `source` (`workdir`/input), the interval `interval`; `fresh_workdir` makes and removes the
    folder. `generate` writes the input and learns what the modelled candidates must forward of it
    (`expected`); `rounds` runs the candidates, `once` runs one with its output written."""

    def __init__(self, args, workdir, interval):
        self.args, self.workdir, self.interval = args, workdir, interval
        self.source = os.path.join(workdir, "input")
        self.expected = {}

    def generate(self, make):
        """`make(spark)` writes the input to `source` in a session of its own (stopped before the
        first measured process starts); `modelled_forwarded` then says what the modelled candidates
        must forward of it. Returns what `make` returns."""
        spark = new_session(self.args)
        try:
            made = make(spark)
            self.expected = modelled_forwarded(spark, self.source, self.interval)
            return made
        finally:
            stop_quietly(spark)

    def once(self, name, skip=0, verify=None, warmup=None):
        """`fresh_run` of candidate `name` in a new Python and JVM: its result, or {"error": ...}."""
        import subprocess

        command = [sys.executable, PACKAGE, "--fresh-run", name, "--fresh-source", self.source]
        command += ["--fresh-workdir", self.workdir, "--fresh-interval", self.interval]
        command += ["--fresh-skip", str(skip)]
        command += ["--fresh-verify", verify] if verify else []
        command += ["--fresh-warmup", warmup] if warmup else []
        command += [f"--conf={c}" for c in self.args.conf]
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            return {"error": (done.stderr.strip().splitlines() or ["no result"])[-1][:300]}
        return json.loads(lines[-1][len("RESULT ") :])

    def rounds(self, chosen, describe, skip=0, warmup=None):
        """--repeat rounds, order rotating, each candidate in a fresh process per round (after a
        warm-up over `warmup` in that process, if given); every run's forwarded rows checked
        against `expected` (`check_forwarded`). Returns each candidate's runs."""
        repeat = self.args.repeat
        rounds = {name: [] for name in chosen}
        for round_no in range(repeat):
            for name, _ in rotated(list(chosen.items()), round_no):
                print(f"running {name} in a fresh process (round {round_no + 1} of {repeat}) ...", flush=True)
                r = self.once(name, skip, warmup=warmup)
                if "error" in r:
                    print(f"  failed: {r['error']}", flush=True)
                else:
                    check_forwarded(name, r, self.expected)
                    print(f"  {describe(r)}", flush=True)
                rounds[name].append(r)
        return rounds


@contextmanager
def fresh_workdir(args, name, interval):
    """FreshRuns in a new scratch folder (kstreams-<name>-*), removed at the end."""
    workdir = tempfile.mkdtemp(prefix=f"kstreams-{name}-")
    try:
        yield FreshRuns(args, workdir, interval)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
