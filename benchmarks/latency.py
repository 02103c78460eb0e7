"""latency: Kafka -> operator -> Kafka end-to-end latency, real-time and micro-batch.

    .venv/bin/python benchmarks/latency.py                    # 1,000 and 10,000 records/s, 3 rounds
    .venv/bin/python benchmarks/latency.py --rates 1000 --duration 10 --rounds 1 --no-update
    .venv/bin/python benchmarks/latency.py --sustain          # also the highest sustained rate (long)

How long a record takes from a producer's send to a consumer's receive, through a dedup query that
reads one Kafka topic and writes another, for four candidates (benchmarks/latency_job.py builds
them), every one in the same run on the same data:

* kstreams_real_time: `KStream(df).deduplicate_by_key("10 seconds")`, update mode,
  `trigger(realTime=--batch-duration)`;
* kstreams_micro_batch: the same operator, append mode, `trigger(processingTime="0 seconds")`;
* spark_real_time: `df.withWatermark("timestamp", "10 seconds").dropDuplicates(["key"])`, update
  mode, `trigger(realTime=--batch-duration)` (Spark 4.3's real-time mode runs dropDuplicates, not
  dropDuplicatesWithinWatermark, so this one keeps every key: a few hundred thousand here);
* spark_micro_batch: `df.withWatermark("timestamp", "10 seconds").dropDuplicatesWithinWatermark(
  ["key"])`, append mode, `trigger(processingTime="0 seconds")`.

Spark settings: every candidate's session is `configure_spark(builder)` (the kstreams jars, Spark's
Kafka connector, the RocksDB state store: the store Spark's docs recommend for large state and the
one its real-time mode requires) with master local[8] (a real-time query holds a task slot per
input partition and per state partition at once) and `spark.sql.shuffle.partitions=2`, the Spark
UI off; kstreams runs with nothing more (library defaults). Spark's two candidates add the RocksDB
settings benchmarks/bench chose for Spark's dedup (SPARK_ROCKSDB_CONF: changelog checkpointing, which
shortens the state commit each micro-batch waits for, and trackTotalNumberOfRows=false). A
real-time query gets Spark's real-time soft defaults at start on top (checkpoint format v2, which
real-time mode requires and refuses v1 for, changelog checkpointing, sortBeforeRepartition off):
nothing more to set. The real-time batch duration is 5 seconds, Spark's minimum
(`spark.sql.streaming.realTimeMode.minBatchDuration`): it is the checkpoint interval, records
stream through within a batch, but between batches (commit, planning, new tasks) they wait. Both
Kafka sinks run with the Kafka client's producer defaults (`linger.ms=0` in kafka-clients 3.9.2).
The jobs print their queries' progress when stopped: per run the median of each `durationMs` part
over the batches with input (the first few left out) is kept in the JSON ("job").

Per run (a fresh job process per candidate, rate and round; candidate order rotating by round):
a new 2-partition input topic and 1-partition output topic on one broker (tests/kafka_broker.py,
started once for the whole benchmark, on the same 2 cores), a consumer on the output topic started
first, then the job; warm-up records (keys "w...", 100/s, left out of everything) until one comes
out and --warm-up seconds more; then a producer thread (confluent-kafka, `linger.ms=1`, `acks=1`)
sends R records/s for --duration seconds, scheduled by wall clock in bursts per 1 ms tick, each
with a unique key, round-robin over the two partitions, the record's send time (`time.time()`) in
its value and as its Kafka timestamp; 25% of them are sent again 10-500 ms later (a producer retry:
same key and partition, the value marked as the retry). The same seeded schedule for every
candidate at a rate and round. Latency of an output record = its receive time in the consumer -
the send time in its value, both `time.time()` on this machine.

Check per run: every duplicate is within 10 s of its original and nothing is late, so each of the
four rules forwards exactly the first record sent of each key: the output (warm-up keys left out)
must hold every input key once, each the original, not the retry; the run's `check` is "ok" or
what is wrong. Reported per (candidate, rate): the median over rounds of each run's p50, p90 and
p99 latency, and of its p99 over the records sent from 5 s on (the "steady" p99: a fresh job's
first seconds at the full rate warm the JIT and the maps up), the largest run max, records out;
the producer's achieved rate per run.

Two regimes of the real-time candidates: --batch-duration "5 seconds" (the default here, Spark's
minimum: a batch boundary, a pause, every 5 s, so the p99 is the boundary's) and "5 minutes" (the
CLI's and README's default: no boundary within a run, so the latency of records while a batch
runs): `--only kstreams_real_time,spark_real_time --batch-duration "5 minutes"`.

--sustain (off by default: long): per candidate, one run per rate of --sustain-rates in turn, while
the output keeps up (the check passes, every record came out within --duration + 5 s of the first
send, the producer kept 95% of the rate); reported: the highest rate sustained (kept up and p99 <
1 s) and the highest kept up. With 5-second real-time batches the p99 is mostly the pause between
batches (a record arriving then waits for the next batch's tasks), not throughput.

Writes benchmarks/results/latency.json and latency.png (--no-update: neither) and prints a table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from bench.broker import start_broker
from bench.measure import percentile
from bench.report import pyplot
from bench.rounds import rotated

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
JOB = os.path.join(HERE, "latency_job.py")
CANDIDATES = ("kstreams_real_time", "kstreams_micro_batch", "spark_real_time", "spark_micro_batch")
DUP_SHARE = 0.25  # of the records, sent again ...
DUP_DELAY_S = (0.010, 0.500)  # ... this much later
TICK_S = 0.001  # the producer sends what is due, then sleeps at least this long
WARM_UP_RATE = 100  # warm-up records per second
SUSTAIN_P99_MS = 1000
SUSTAIN_SLACK_S = 5  # sustained: every record out within --duration + this
STEADY_AFTER_S = 5  # the "steady" p99: of the records sent this long after the first, or later


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--rates", default="1000,10000", help="records/s, comma-separated ('' with --sustain: that alone)"
    )
    p.add_argument("--duration", type=float, default=20.0, help="seconds of measured records per run")
    p.add_argument("--rounds", type=int, default=3, help="runs per candidate and rate; medians reported")
    p.add_argument("--only", help="comma-separated candidates (default: all four)")
    p.add_argument("--no-update", action="store_true", help="do not write results/latency.json and .png")
    p.add_argument("--sustain", action="store_true", help="also the highest sustained rate per candidate")
    p.add_argument("--sustain-rates", default="1000,2000,5000,10000,20000,40000")
    p.add_argument("--batch-duration", default="5 seconds", help="real-time candidates' batch duration")
    p.add_argument("--interval", default="10 seconds", help="dedup interval / watermark delay")
    p.add_argument("--master", default="local[8]")
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra Spark setting for every candidate's session (repeatable; experiments)",
    )
    p.add_argument(
        "--warm-up", type=float, default=3.0, help="seconds of warm-up records after the first came out"
    )
    p.add_argument(
        "--start-timeout", type=float, default=180.0, help="seconds for the job to start and forward"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="also write the results JSON to this path (with --no-update too)")
    args = p.parse_args(argv)
    args.rate_list = [int(r) for r in args.rates.split(",") if r.strip()]
    args.sustain_list = [int(r) for r in args.sustain_rates.split(",") if r.strip()]
    args.candidates = [c for c in CANDIDATES if not args.only or c in args.only.split(",")]
    unknown = set(args.only.split(",")) - set(CANDIDATES) if args.only else set()
    if unknown or not args.candidates:
        p.error(f"--only: unknown candidates {sorted(unknown)}; known: {', '.join(CANDIDATES)}")
    if not args.rate_list and not args.sustain:
        p.error("--rates is empty")
    return args


# ---------------------------------------------------------------- data


def schedule(rate, duration, seed):
    """The records of a run in send order: (seconds after the start, key, is_retry, partition)."""
    rng = random.Random(seed)
    events = []
    for i in range(int(rate * duration)):
        t = i / rate
        key, partition = f"k{i}", i % 2
        events.append((t, key, False, partition))
        if rng.random() < DUP_SHARE:
            events.append((t + rng.uniform(*DUP_DELAY_S), key, True, partition))
    events.sort(key=lambda e: e[0])
    return events


def encode(is_retry, sent_s):
    """A record's value: r (a retry) or o (original), and the send time in microseconds."""
    return f"{'r' if is_retry else 'o'},{round(sent_s * 1e6)}"


def decode(value):
    mark, _, micros = value.decode().partition(",")
    return mark == "r", int(micros) / 1e6


def new_producer(bootstrap):
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 1,
            "acks": "1",
            "enable.idempotence": False,
            "queue.buffering.max.messages": 2_000_000,
        }
    )


def send(producer, topic, key, is_retry, partition, errors):
    now = time.time()
    producer.produce(
        topic,
        key=key,
        value=encode(is_retry, now),
        partition=partition,
        timestamp=int(now * 1000),
        on_delivery=lambda err, _m: err is not None and errors.append(str(err)),
    )
    return now


class Producing(threading.Thread):
    """Sends `events` at their scheduled times from `start` (wall clock), all due ones per tick."""

    def __init__(self, bootstrap, topic, events, start):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.events, self.start_at = bootstrap, topic, events, start
        self.errors, self.first, self.last, self.behind_s, self.sent = [], None, None, 0.0, 0
        self.undelivered = 0

    def run(self):
        producer = new_producer(self.bootstrap)
        events, n, i = self.events, len(self.events), 0
        while i < n:
            now = time.time()
            due = self.start_at + events[i][0]
            if due > now:
                # at least a tick: at high rates the records due meanwhile go out together
                time.sleep(max(due - now, TICK_S))
                now = time.time()
            self.behind_s = max(self.behind_s, now - due)
            while i < n and self.start_at + events[i][0] <= now:
                _, key, is_retry, partition = events[i]
                sent = send(producer, self.topic, key, is_retry, partition, self.errors)
                if not is_retry:
                    self.first = self.first or sent
                    self.last = sent
                    self.sent += 1
                i += 1
            producer.poll(0)
        self.undelivered = producer.flush(30)

    def achieved_rate(self):
        if not self.first or self.last == self.first:
            return float("nan")
        return (self.sent - 1) / (self.last - self.first)


class Consuming(threading.Thread):
    """Reads the output topic from its start, each record with its receive time."""

    def __init__(self, bootstrap, topic, keys):
        super().__init__(daemon=True)
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.records = []  # (receive time, key, value)
        self.left = set(keys)  # the keys not out yet
        self.stopping = threading.Event()
        self.errors = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"latency-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                # a fetch returns as soon as one record is there; without one, after 10 ms
                "fetch.wait.max.ms": 10,
            }
        )
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

    def run(self):
        records, consumer = self.records, self.consumer
        try:
            while not self.stopping.is_set():
                # whatever is queued, at once; else wait for the next record
                batch = consumer.consume(100_000, 0) or [m for m in [consumer.poll(0.1)] if m is not None]
                now = time.time()
                for m in batch:
                    if m.error():
                        self.errors.append(str(m.error()))
                    else:
                        key = m.key().decode()
                        records.append((now, key, m.value()))
                        self.left.discard(key)
        finally:
            self.consumer.close()

    def stop(self):
        self.stopping.set()
        self.join(30)


# ---------------------------------------------------------------- one run


class Jobs:
    """The job processes started so far, each in a process group of its own (its Python and its
    Spark JVM); `kill_all` ends every group still running (on errors too)."""

    def __init__(self):
        self.running = []

    def start(self, args, bootstrap, candidate, in_topic, out_topic, checkpoint, log_path):
        command = [sys.executable, JOB, candidate, bootstrap, in_topic, out_topic, checkpoint, args.master]
        command += ["--interval", args.interval, "--batch-duration", args.batch_duration]
        for setting in args.conf:
            command += ["--conf", setting]
        with open(log_path, "w") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=HERE
            )
        self.running.append(process)
        return process

    def stop(self, process, timeout=60):
        """SIGTERM (the job stops its query), then SIGKILL to the group after `timeout`."""
        if process not in self.running:
            return
        if process.poll() is None:
            signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        # the Spark JVM exits after its Python (its shutdown hooks delete Spark's temp dirs): a few
        # seconds for that, then whatever is left of the group is killed
        deadline = time.time() + (10 if process.poll() is not None else 0)
        while time.time() < deadline and signal_group(process, 0):
            time.sleep(0.1)
        signal_group(process, signal.SIGKILL)
        process.wait()
        if process in self.running:
            self.running.remove(process)

    def kill_all(self):
        for process in list(self.running):
            signal_group(process, signal.SIGKILL)
            process.wait()
        self.running.clear()


def signal_group(process, sig):
    """Sends `sig` to the process's group; False if none of it is left."""
    try:
        os.killpg(process.pid, sig)
        return True
    except ProcessLookupError:
        return False


def log_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def wait_ready(process, log_path, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = log_text(log_path)
        if "\nready\n" in "\n" + text:
            return
        if process.poll() is not None:
            raise RuntimeError(f"the job exited with {process.returncode}: {tail(text)}")
        time.sleep(0.2)
    raise RuntimeError(f"the job did not start within {timeout:.0f} s: {tail(log_text(log_path))}")


def tail(text, lines=8):
    """The job's own error line (latency_job prints one), else the last lines of its log."""
    errors = [line for line in text.splitlines() if line.startswith("error: ")]
    if errors:
        return errors[-1][len("error: ") :]
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(kept[-lines:])[-1500:]


def warm_up(args, bootstrap, topic, consumer, process, log_path):
    """Warm-up records until one came out, then --warm-up seconds more; how many were sent."""
    producer, errors = new_producer(bootstrap), []
    sent, first_out, deadline = 0, None, time.time() + args.start_timeout
    while True:
        send(producer, topic, f"w{sent}", False, sent % 2, errors)
        sent += 1
        producer.poll(0)
        now = time.time()
        if first_out is None and any(key.startswith("w") for _, key, _ in consumer.records[:1]):
            first_out = now
        if first_out is not None and now - first_out >= args.warm_up:
            break
        if now > deadline:
            raise RuntimeError(f"no warm-up record came out in {args.start_timeout:.0f} s")
        if process.poll() is not None:
            raise RuntimeError(f"the job exited with {process.returncode}: {tail(log_text(log_path))}")
        time.sleep(1 / WARM_UP_RATE)
    producer.flush(30)
    if errors:
        raise RuntimeError(f"warm-up records not delivered: {errors[:3]}")
    return sent


def run_once(args, broker, jobs, workdir, candidate, rate, round_no, seed):
    """One fresh job on fresh topics: the measured stream, its latencies and its check."""
    run_id = uuid.uuid4().hex[:8]
    name = f"{candidate}-{rate}-{round_no}-{run_id}"
    in_topic = broker.create_topic(f"in-{name}", partitions=2)
    out_topic = broker.create_topic(f"out-{name}", partitions=1)
    checkpoint = os.path.join(workdir, f"ck-{name}")
    log_path = os.path.join(workdir, f"job-{name}.log")
    events = schedule(rate, args.duration, seed)
    keys = {key for _, key, is_retry, _ in events if not is_retry}
    consumer = Consuming(broker.bootstrap, out_topic, keys)
    consumer.start()
    process = None
    result = {"candidate": candidate, "rate": rate, "round": round_no}
    try:
        process = jobs.start(args, broker.bootstrap, candidate, in_topic, out_topic, checkpoint, log_path)
        wait_ready(process, log_path, args.start_timeout)
        result["warm_up_records"] = warm_up(args, broker.bootstrap, in_topic, consumer, process, log_path)
        start = time.time() + 0.2
        producing = Producing(broker.bootstrap, in_topic, events, start)
        producing.start()
        producing.join()
        deadline = time.time() + max(30.0, args.duration)
        while consumer.left and time.time() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the job exited with {process.returncode}: {tail(log_text(log_path))}")
            time.sleep(0.2)
        time.sleep(3)  # what else comes (a retry forwarded too would be right behind its original)
        jobs.stop(process)
        consumer.stop()
        result.update(
            measure(events, consumer.records, start),
            sent=producing.sent,
            retries_sent=len(events) - producing.sent,
            achieved_rate=producing.achieved_rate(),
            producer_behind_ms=producing.behind_s * 1000,
            produce_errors=len(producing.errors) + producing.undelivered,
            job=job_summary(log_text(log_path)),
        )
        if producing.errors or producing.undelivered:
            result["check"] = f"producer: {producing.undelivered} undelivered, errors {producing.errors[:2]}"
        if consumer.errors:
            result["check"] = f"consumer errors: {consumer.errors[:2]}"
    except Exception as e:
        result["error"] = str(e)[:2000]
    finally:
        if process is not None:
            jobs.stop(process, timeout=5 if "error" in result else 60)
        consumer.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    return result


def job_summary(text):
    """The job's progress summary (latency_job.progress_summary), if it printed one."""
    for line in text.splitlines():
        if line.startswith("progress "):
            return json.loads(line[len("progress ") :])
    return {}


def measure(events, records, start):
    """Latencies and the check of one run's output `records` against the `events` sent."""
    keys = {key for _, key, is_retry, _ in events if not is_retry}
    out = [(received, key, *decode(value)) for received, key, value in records if not key.startswith("w")]
    latencies = [(received - sent) * 1000 for received, _, _, sent in out]
    seen, repeated, retries, unknown = set(), 0, 0, 0
    for _, key, is_retry, _ in out:
        repeated += key in seen
        seen.add(key)
        retries += is_retry
        unknown += key not in keys
    problems = []
    if keys - seen:
        problems.append(f"{len(keys - seen):,} keys missing")
    if repeated:
        problems.append(f"{repeated:,} keys repeated")
    if retries:
        problems.append(f"{retries:,} retries forwarded")
    if unknown:
        problems.append(f"{unknown:,} unknown keys")
    last_out = max((received for received, *_ in out), default=None)
    # per second of the run (by send time): p50 and max latency, how records fared over time
    by_second = {}
    for received, _, _, sent in out:
        by_second.setdefault(int(sent - start), []).append((received - sent) * 1000)
    timeline = [
        [second, round(percentile(values, 50)), round(max(values)), len(values)]
        for second, values in sorted(by_second.items())
    ]
    r = {
        "records_out": len(out),
        "records_expected": len(keys),
        "check": "; ".join(problems) or "ok",
        "last_out_s": last_out - start if last_out else None,
        "timeline": timeline,  # [second, p50 ms, max ms, records]
    }
    if latencies:
        r.update(
            p50_ms=percentile(latencies, 50),
            p90_ms=percentile(latencies, 90),
            p99_ms=percentile(latencies, 99),
            max_ms=max(latencies),
            min_ms=min(latencies),
        )
    # the run's start left out: the JIT and the maps warming up at the full rate
    steady = [(received - sent) * 1000 for received, _, _, sent in out if sent >= start + STEADY_AFTER_S]
    if steady:
        r["steady_p99_ms"] = percentile(steady, 99)
    return r


# ---------------------------------------------------------------- the benchmark


def describe(r):
    if "error" in r:
        return f"failed: {r['error'][:300]}"
    lat = (
        f"p50 {r['p50_ms']:,.0f} / p90 {r['p90_ms']:,.0f} / p99 {r['p99_ms']:,.0f} / max {r['max_ms']:,.0f} ms"
        if "p50_ms" in r
        else "no output"
    )
    job = r.get("job") or {}
    batches = ""
    if job.get("median_duration_ms"):
        parts = job["median_duration_ms"]
        batches = (
            f"; {job['batches']} batches ({job['data_batches']} with input), median ms per batch with "
            "input: " + ", ".join(f"{k} {v:,.0f}" for k, v in parts.items() if v)
        )
    return (
        f"{lat}, {r['records_out']:,} records out of {r['records_expected']:,} keys, check {r['check']}; "
        f"producer {r['achieved_rate']:,.0f}/s (at most {r['producer_behind_ms']:,.1f} ms behind){batches}"
    )


def run_rates(args, broker, jobs, workdir):
    runs = []
    for rate in args.rate_list:
        for round_no in range(args.rounds):
            seed = args.seed * 1_000_003 + rate * 101 + round_no  # the same data for every candidate
            for candidate in rotated(args.candidates, round_no):
                print(
                    f"running {candidate} at {rate:,}/s (round {round_no + 1} of {args.rounds}) ...",
                    flush=True,
                )
                r = run_once(args, broker, jobs, workdir, candidate, rate, round_no, seed)
                print(f"  {describe(r)}", flush=True)
                runs.append(r)
    return runs


def summarize(args, runs):
    """Per (candidate, rate): the median over rounds of each percentile, and the rest."""
    results = []
    for candidate in args.candidates:
        for rate in args.rate_list:
            mine = [r for r in runs if r["candidate"] == candidate and r["rate"] == rate]
            ok = [r for r in mine if "p50_ms" in r]
            s = {"name": candidate, "rate": rate, "runs": len(mine)}
            if ok:
                for key in ("p50_ms", "p90_ms", "p99_ms", "steady_p99_ms"):
                    if all(key in r for r in ok):
                        s[key] = statistics.median(r[key] for r in ok)
                    s[f"rounds_{key}"] = [r[key] for r in ok]
                s["max_ms"] = max(r["max_ms"] for r in ok)
                s["records_out"] = statistics.median(r["records_out"] for r in ok)
                s["records_expected"] = statistics.median(r["records_expected"] for r in ok)
                s["achieved_rate"] = statistics.median(r["achieved_rate"] for r in ok)
            bad = [
                f"round {r['round'] + 1}: {r.get('error') or r.get('check') or 'no output'}"
                for r in mine
                if "error" in r or r.get("check") != "ok"
            ]
            s["check"] = "not run" if not mine else "; ".join(bad) if bad else "ok"
            if not ok:
                s["error"] = s["check"]
            results.append(s)
    return results


def sustained(args, broker, jobs, workdir):
    """Per candidate: each --sustain-rates rate in turn (one run each) while the output keeps up;
    the highest rate kept up, and the highest of those with p99 < SUSTAIN_P99_MS (sustained)."""
    series = {}
    for candidate in args.candidates:
        entry = series[candidate] = {"runs": [], "sustained_rate": None, "kept_up_rate": None}
        for rate in args.sustain_list:
            print(f"sustain: {candidate} at {rate:,}/s ...", flush=True)
            seed = args.seed * 1_000_003 + rate * 101 + 7919
            r = run_once(args, broker, jobs, workdir, candidate, rate, 0, seed)
            behind = not_kept_up(args, r, rate)
            r["kept_up"] = behind or "yes"
            print(f"  {describe(r)}; kept up: {r['kept_up']}", flush=True)
            entry["runs"].append(r)
            if behind:
                entry["limit"] = f"{rate:,}/s: {behind}"
                break
            entry["kept_up_rate"] = rate
            if r["p99_ms"] < SUSTAIN_P99_MS:
                entry["sustained_rate"] = rate
    return series


def not_kept_up(args, r, rate):
    """Why the output of run `r` did not keep up with `rate` (None if it did)."""
    if "error" in r:
        return f"failed: {r['error'][:200]}"
    if r["check"] != "ok":
        return f"check: {r['check']}"
    if r["achieved_rate"] < 0.95 * rate:
        return f"the producer sent {r['achieved_rate']:,.0f}/s only"
    if r["last_out_s"] is None or r["last_out_s"] > args.duration + SUSTAIN_SLACK_S:
        return f"last record out {r['last_out_s'] or 0:,.1f} s after the first send"
    return None


def table(args, results, sustain=None):
    """The markdown table: a row per candidate; per rate the medians over rounds of p50 / p90 / p99,
    then (each per rate, in --rates order) the largest max, records out, the producer's rate, and
    the check; with --sustain the highest sustained rate."""
    rates = args.rate_list
    header = [
        "candidate",
        *[f"{rate:,}/s: p50 / p90 / p99 ms (p99 from {STEADY_AFTER_S} s on)" for rate in rates],
    ]
    align = ["---", *["---:"] * len(rates)]
    if rates:
        header += ["max ms", "records checked", "producer records/s", "check"]
        align += ["---:", "---:", "---:", "---"]
    if sustain:
        header.append(f"sustained records/s: p99 < {SUSTAIN_P99_MS:,} ms (kept up to; stopped at)")
        align.append("---")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]

    def per_rate(mine, key):
        return " · ".join(f"{mine[rate][key]:,.0f}" for rate in rates if key in mine.get(rate, {}))

    for candidate in args.candidates:
        mine = {r["rate"]: r for r in results if r["name"] == candidate}
        cells = [candidate]
        for rate in rates:
            r = mine.get(rate, {})
            steady = f" ({r['steady_p99_ms']:,.0f})" if "steady_p99_ms" in r else ""
            cells.append(
                f"{r['p50_ms']:,.0f} / {r['p90_ms']:,.0f} / {r['p99_ms']:,.0f}{steady}"
                if "p50_ms" in r
                else "failed"
                if r.get("runs")
                else "not run"
            )
        if rates:
            cells += [
                per_rate(mine, "max_ms"),
                per_rate(mine, "records_out"),
                per_rate(mine, "achieved_rate"),
            ]
            bad = [f"{rate:,}/s {mine[rate]['check']}" for rate in rates if mine[rate]["check"] != "ok"]
            cells.append("; ".join(bad).replace("|", "/")[:400] if bad else "ok")
        if sustain:
            cells.append(sustain_cell(sustain.get(candidate)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sustain_cell(s):
    """The highest sustained rate, the highest kept up, and where the steps stopped."""
    if s is None:
        return "not run"
    best, kept = s.get("sustained_rate"), s.get("kept_up_rate")
    notes = [f"kept up to {kept:,}" if kept else "kept up at no rate"]
    if s.get("limit"):
        notes.append(f"not {s['limit']}")
    return ((f"{best:,}" if best else "none") + f" ({'; '.join(notes)})").replace("|", "/")


def plot(args, results, path):
    """p50 and p99 bars per candidate and rate, log-scale y."""
    plt = pyplot()
    if plt is None:
        return False
    rates, names = args.rate_list, args.candidates
    width = 0.8 / (2 * len(rates))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    colors = plt.get_cmap("tab20").colors
    for j, rate in enumerate(rates):
        for k, key in enumerate(("p50_ms", "p99_ms")):
            values = [
                next(
                    (r.get(key, float("nan")) for r in results if r["name"] == n and r["rate"] == rate),
                    float("nan"),
                )
                for n in names
            ]
            offset = (2 * j + k - len(rates) + 0.5) * width
            bars = ax.bar(
                [i + offset for i in range(len(names))],
                values,
                width,
                label=f"{rate:,}/s {key[:3]}",
                color=colors[(2 * j + k) % len(colors)],
            )
            ax.bar_label(bars, labels=[f"{v:,.0f}" if v == v else "" for v in values], fontsize=7, padding=2)
    ax.set_xticks(range(len(names)), names)
    ax.set_yscale("log")
    ax.set_ylabel("end-to-end latency, ms (log scale)")
    ax.set_title(
        f"Kafka -> dedup -> Kafka latency, median of {args.rounds} round{'s' * (args.rounds != 1)}, {args.duration:g} s per run "
        f"(2 cores, {args.master})"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def main(argv=None):
    args = parse_args(argv)
    # the consumer thread records receive times: hand the GIL over often (the producer's bursts)
    sys.setswitchinterval(0.0005)
    # a SIGTERM to the driver still ends its jobs and the broker (finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = tempfile.mkdtemp(prefix="kstreams-latency-")
    jobs, broker = Jobs(), None
    runs, sustain = [], None
    try:
        broker = start_broker(workdir)
        runs = run_rates(args, broker, jobs, workdir)
        if args.sustain:
            sustain = sustained(args, broker, jobs, workdir)
    finally:
        jobs.kill_all()
        if broker is not None:
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    results = summarize(args, runs)
    text = table(args, results, sustain)
    print()
    print(text)
    command = "python benchmarks/latency.py " + " ".join(sys.argv[1:] if argv is None else argv)
    document = {
        "regime": "latency",
        "command": command.strip(),
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "settings": {
            k: v for k, v in vars(args).items() if k not in ("rate_list", "sustain_list", "candidates")
        },
        "table": text,
        "results": results,
        "sustain": sustain,
        "runs": runs,
    }
    paths = [args.json] if args.json else []
    if not args.no_update:
        os.makedirs(RESULTS, exist_ok=True)
        paths.append(os.path.join(RESULTS, "latency.json"))
        if args.rate_list:
            plot(args, results, os.path.join(RESULTS, "latency.png"))
    for path in paths:
        with open(path, "w") as f:
            json.dump(document, f, indent=2)
    return 0 if all(r["check"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
