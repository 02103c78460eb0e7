"""Real-time mode (SEMANTICS.md section 8) on a real broker, as a user runs it: ``kstreams-spark
dedup --real-time`` in a process of its own (a real-time query needs a task slot per topic
partition and per state partition, more than the tests' shared ``local[2]`` session has).

Records are produced one by one while the query runs; the output topic has one partition, so the
order in which each state task wrote its rows is kept, and each input partition's output is read
back in that order. Then the process is killed (kill -9) three times inside a real-time batch and
restarted from its checkpoint: no record may be lost, and only records of a batch a kill cut short
(at or after the offsets its checkpoint had committed) may be written again.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

from kafka_broker import produce, read_topic
from kafka_streams import BASE_MS, as_inputs
from reference import dedup_reference

SCRIPT = os.path.join(os.path.dirname(sys.executable), "kstreams-spark")
INTERVAL_MS = 10_000

# SEMANTICS.md section 2's examples with interval 10 s: (records as (key, seconds), forwarded)
EXAMPLES = [
    ([("a", 100), ("a", 108), ("a", 111)], [0, 2]),
    ([("a", 100), ("a", 92), ("a", 89)], [0, 2]),
    ([("a", 5), ("a", 15), ("a", 16)], [0, 2]),
    ([("a", 15), ("a", 5), ("a", 4)], [0, 2]),
    ([("k", 20), ("k", 25), ("k", 11), ("k", 9)], [0, 3]),
    ([("k1", 10), ("k2", 20), ("k1", 9)], [0, 1]),
    ([("k1", 10), ("k2", 21), ("k1", 9)], [0, 1, 2]),
]


def _start(kafka, topic: str, out_topic: str, checkpoint: str) -> subprocess.Popen:
    # a session of its own: kill -9 takes the CLI's Python and its Spark JVM together
    return subprocess.Popen(
        [
            SCRIPT,
            "dedup",
            "--bootstrap-servers",
            kafka.bootstrap,
            "--topic",
            topic,
            "--output-topic",
            out_topic,
            "--checkpoint",
            checkpoint,
            "--interval",
            "10 seconds",
            "--real-time",
            "5 seconds",
            "--shuffle-partitions",
            "2",
            "--master",
            "local[4]",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _wait_for(out_topic: str, kafka, count: int, process: subprocess.Popen, timeout: float = 120.0) -> list:
    """The output topic's records once it holds at least ``count`` of them."""
    deadline = time.monotonic() + timeout
    while True:
        written = read_topic(kafka.bootstrap, out_topic)
        if len(written) >= count:
            return written
        if process.poll() is not None:
            raise AssertionError(
                f"the query stopped (exit {process.returncode}): {process.stdout.read()[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(written)} of {count} records written in {timeout:.0f} s")
        time.sleep(0.2)


def _committed_offsets(checkpoint: str) -> dict[int, int]:
    """Per input partition, where the last committed batch of the checkpoint ended (0: none)."""
    commits = [int(n) for n in os.listdir(os.path.join(checkpoint, "commits")) if n.isdigit()]
    if not commits:
        return {}
    with open(os.path.join(checkpoint, "offsets", str(max(commits)))) as f:
        (source,) = [json.loads(line) for line in f.read().splitlines()[2:]]
    ((_, by_partition),) = source.items()
    return {int(p): o for p, o in by_partition.items()}


def test_real_time_dedup_record_by_record_and_through_kill_9(kafka, tmp_path):
    topic = kafka.create_topic("rt-in", 2)
    out_topic = kafka.create_topic("rt-out", 1)
    checkpoint = str(tmp_path / "ck")
    process = _start(kafka, topic, out_topic, checkpoint)
    try:
        # 1. Every example, one after another on two partitions, each 1,000 s after the one before
        # on its partition and with keys of its own (so it behaves as on a fresh partition), produced
        # one record at a time while the query runs.
        want: dict[int, list[str]] = {0: [], 1: []}
        for i, (records, forwarded) in enumerate(EXAMPLES):
            partition, shift_s = i % 2, 1000 * (i // 2 + 1)
            for j, (key, seconds) in enumerate(records):
                value = f"e{i}-r{j}"
                produce(
                    kafka.bootstrap,
                    topic,
                    [(partition, f"e{i}-{key}", value, BASE_MS + (shift_s + seconds) * 1000)],
                )
                if j in forwarded:
                    want[partition].append(value)
        total = sum(len(v) for v in want.values())
        _wait_for(out_topic, kafka, total, process)
        time.sleep(6)  # one more batch: nothing else may come
        written = read_topic(kafka.bootstrap, out_topic)
        got = {p: [r.value.decode() for r in written if r.value.decode() in want[p]] for p in want}
        assert len(written) == total
        assert got == want

        # 2. Random at-least-once input (late and out-of-order records, repeats), three kill -9 inside
        # a batch, each followed by a restart from the checkpoint.
        rng = random.Random(7)
        events = []
        for p in range(2):
            for i in range(160):
                t = (
                    BASE_MS
                    + 2_000_000
                    + i * 300
                    + (-rng.randrange(15_000, 30_000) if rng.random() < 0.1 else 0)
                )
                events.append((p, f"k{rng.randrange(40)}", f"p{p}-{i}", t))
                if rng.random() < 0.2:  # the producer's retry, a moment later
                    events.append((p, events[-1][1], f"p{p}-{i}-again", t + rng.randrange(0, 3000)))
        chunks = [events[k::4] for k in range(4)]
        cut_short: list[dict[int, int]] = []
        for k, chunk in enumerate(chunks):
            before = len(read_topic(kafka.bootstrap, out_topic))
            for record in sorted(chunk, key=lambda r: int(r[2].split("-")[1])):
                produce(kafka.bootstrap, topic, [record])
            if k == len(chunks) - 1:
                break
            _wait_for(out_topic, kafka, before + 1, process)  # the batch has written rows of this chunk
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            cut_short.append(_committed_offsets(checkpoint))
            process = _start(kafka, topic, out_topic, checkpoint)

        inputs = as_inputs(read_topic(kafka.bootstrap, topic))
        expected = {r.value for r in dedup_reference(inputs, INTERVAL_MS)}
        offset_of = {r.value: (r.partition, r.offset) for r in inputs}
        deadline = time.monotonic() + 180
        while True:
            values = [r.value.decode() for r in read_topic(kafka.bootstrap, out_topic)]
            if set(values) >= expected or time.monotonic() > deadline:
                break
            assert process.poll() is None, process.stdout.read()[-3000:]
            time.sleep(0.5)
        time.sleep(6)  # one more batch: nothing else may come
        values = [r.value.decode() for r in read_topic(kafka.bootstrap, out_topic)]
        assert set(values) == expected  # nothing lost, nothing the rule drops
        for value in {v for v in values if values.count(v) > 1}:
            partition, offset = offset_of[value]
            # written again only if a kill cut its batch short: read after what was committed
            assert any(offset >= committed.get(partition, 0) for committed in cut_short), value
            assert values.count(value) <= 1 + len(cut_short), value
        # each kill landed inside a batch that had written rows: those rows were written again
        assert len(values) > len(set(values))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_real_time_arguments_are_checked_before_anything_starts(tmp_path):
    base = [SCRIPT, "dedup", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--output-topic", "o"]
    base += ["--checkpoint", str(tmp_path / "ck")]
    cases = {
        ("--by", "id", "--id", "key", "--real-time"): (
            "--real-time runs --by key, key-value and sequence; --by id needs micro-batches (drop --real-time)"
        ),
        ("--real-time", "--exactly-once"): (
            "--real-time and --exactly-once do not go together: its transactions commit once per batch, "
            "so a read_committed consumer would wait a whole batch duration"
        ),
        (
            "--real-time",
            "1 second",
        ): "--real-time: a batch lasts at least 5 seconds (Spark's minimum), got '1 second'",
        ("--real-time", "soon"): "--real-time: cannot read interval 'soon'",
    }
    for args, message in cases.items():
        out = subprocess.run([*base, *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"kstreams-spark dedup: error: {message}"), out.stderr


README_JOB = """
import sys, time
sys.path.insert(0, {tests!r})
from kstreams_spark import KStream, configure_spark
from pyspark.sql import SparkSession
from test_readme import section_blocks

spark = configure_spark(SparkSession.builder.master("local[8]")).config("spark.sql.shuffle.partitions", "2").getOrCreate()
df = (
    spark.readStream.format("kafka").option("kafka.bootstrap.servers", {bootstrap!r})
    .option("subscribe", {topic!r}).option("startingOffsets", "earliest").load()
)
# the dedup block, then the running count: both queries on the one session
for _, code in section_blocks("Real-time mode"):
    code = code.replace("broker:9092", {bootstrap!r}).replace("5 minutes", "5 seconds")
    code = code.replace("events-deduped", {out_topic!r}).replace("counts-by-key", {count_topic!r})
    code = code.replace('"ckpt/"', repr({checkpoint!r} + "/dedup"))
    code = code.replace('"ckpt-counts/"', repr({checkpoint!r} + "/counts"))
    exec(code)
print("started", flush=True)
time.sleep(3600)
"""


def test_readme_real_time_example_runs(kafka, tmp_path):
    """the manual's "Real-time mode" blocks, as written but for the broker, topics, checkpoints and a
    5-second batch, in a process of its own (``local[8]``: two queries' task slots): each key's
    first record comes out of the dedup, and each of its running counts out of the count."""
    topic = kafka.create_topic("readme-rt-in", 2)
    out_topic = kafka.create_topic("readme-rt-out", 1)
    count_topic = kafka.create_topic("readme-rt-counts", 1)
    job = README_JOB.format(
        tests=os.path.dirname(__file__),
        bootstrap=kafka.bootstrap,
        topic=topic,
        out_topic=out_topic,
        count_topic=count_topic,
        checkpoint=str(tmp_path / "ck"),
    )
    process = subprocess.Popen(
        [sys.executable, "-c", job],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        records = [(0, "a", "a1", BASE_MS), (0, "a", "a2", BASE_MS + 1000), (1, "b", "b1", BASE_MS)]
        produce(kafka.bootstrap, topic, records)
        _wait_for(out_topic, kafka, 2, process)
        _wait_for(count_topic, kafka, 3, process)
        time.sleep(6)  # one more batch: nothing else may come
        written = read_topic(kafka.bootstrap, out_topic)
        assert sorted(r.value.decode() for r in written) == ["a1", "b1"]
        # one partition out: each key's counts in the order they were written
        counts = [(r.key.decode(), r.value.decode()) for r in read_topic(kafka.bootstrap, count_topic)]
        assert [c for c in counts if c[0] == "a"] == [("a", "1"), ("a", "2")]
        assert [c for c in counts if c[0] == "b"] == [("b", "1")]
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_demo_on_a_broker_prints_both_modes_latency(kafka, tmp_path):
    """``kstreams-spark demo --bootstrap-servers``: one row per trigger mode with its latency
    percentiles, each mode's output checked by the demo's probe (every key once, the original)."""
    out = subprocess.run(
        [SCRIPT, "demo", "--bootstrap-servers", kafka.bootstrap, "--rate", "200", "--seconds", "2"]
        + ["--master", "local[4]", "--output", str(tmp_path / "demo" / "deduplicated")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {
        line.split()[0]: line.split()
        for line in out.stdout.splitlines()
        if line.strip().startswith(("real-time ", "micro-batch "))
    }
    assert sorted(rows) == ["micro-batch", "real-time"], out.stdout
    for fields in rows.values():
        p50, p90, p99, largest = (int(f.replace(",", "")) for f in fields[1:5])
        assert 0 < p50 <= p90 <= p99 <= largest, fields
        assert " ".join(fields[5:]).startswith("400 keys (")
        assert " ".join(fields[5:]).endswith("sent twice): each key once, the original")


def test_demo_on_a_broker_checks_its_arguments():
    for args, message in {
        (
            "--input",
            "x",
            "--bootstrap-servers",
            "127.0.0.1:1",
        ): "--input and --bootstrap-servers are two demos",
        (
            "--bootstrap-servers",
            "127.0.0.1:9092",
            "--seconds",
            "0",
        ): "--seconds must be more than 0 and at most 3600, got 0",
        ("--bootstrap-servers", "127.0.0.1:9092", "--rate", "0"): "--rate must be at least 1, got 0",
        ("--bootstrap-servers", "127.0.0.1:9092", "--interval", "300 ms"): (
            "--interval must be at least 1 second with --bootstrap-servers, got '300 ms'"
        ),
    }.items():
        out = subprocess.run([SCRIPT, "demo", *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip().startswith(f"kstreams-spark demo: error: {message}"), out.stderr
