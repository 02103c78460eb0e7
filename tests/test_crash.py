"""Crash safety of every stateful operator (tests/crash.py lists them): the operators run in a
child process (tests/crash_job.py) that is killed with SIGKILL (its Python driver, its JVM and its
Python workers: the whole process group) again and again, and restarted from the same checkpoints
until the input is consumed.

Inputs: one random at-least-once stream (duplicates, replays, out-of-order and late records, null
keys, 3 partitions, events sent on every partition), read from JSON files and from a topic of a
real Kafka broker. ``make test`` runs each operator from one of the two sources, chosen by the seed
(CRASH_SEED); ``make test-crash`` runs every operator from both (CRASH_BOTH_SOURCES=1).

* Each Parquet sink (exactly-once) must hold exactly the rows of an uninterrupted run, operator by
  operator, timestamps included: equal as multisets.
* The Kafka sink (at-least-once) must hold every row of the uninterrupted run, and the rows it holds
  more than once must all be rows of micro-batches that a kill cut short (planned, not committed);
  the test counts them, and at least one kill must have cut a micro-batch of this sink short
  after it wrote rows, so that the count is not trivially zero.
* The exactly-once Kafka sink (the same operators as the Kafka sink, `to(topic, exactly_once=True)`)
  must hold, for a read_committed consumer, exactly the rows of the uninterrupted run.
* Kills: one at a random moment once the job has started its queries; the others land while a
  task that runs the stateful operators is running, proven by the marker that task writes
  (tests/crash.py), "before" it pulls rows through the operators or "after" they committed their
  state and half of its output went to the sink. Every query (file, Kafka, both Kafka sinks) must
  have been killed while it ran (started, not finished): at least twice, the exactly-once Kafka
  sink's query 3 times.

``make test`` runs 3 kills on a small stream; ``make test-crash`` runs a longer soak
(CRASH_KILLS, CRASH_EVENTS and CRASH_BATCHES set its size).
"""

from __future__ import annotations

import glob
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from crash import OPERATORS, as_stored, await_queries, records, split_operators, start_queries, write_files
from kafka_broker import EndOffsets, produce, read_committed, read_topic
from kstreams_spark import KStream, configure_spark
from pyspark.errors import StreamingQueryException
from streams import Rec, StreamRun, forwarded, with_offsets

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_job.py")
KILLS = int(os.environ.get("CRASH_KILLS", "3"))
EVENTS = int(os.environ.get("CRASH_EVENTS", "24"))  # per partition, before duplicates
BATCHES = int(os.environ.get("CRASH_BATCHES", "3"))
SEED = int(os.environ.get("CRASH_SEED", "16"))
BOTH_SOURCES = os.environ.get("CRASH_BOTH_SOURCES") == "1"
QUERIES = ("file", "kafka", "kafka_sink", "kafka_eos")


def batches(checkpoint: str, kind: str) -> list[int]:
    """Batch ids with a file in ``checkpoint/kind`` (``offsets``: planned, ``commits``: done)."""
    folder = os.path.join(checkpoint, kind)
    return sorted(int(n) for n in os.listdir(folder) if n.isdigit()) if os.path.isdir(folder) else []


def position(checkpoint: str) -> tuple[int, int]:
    """(last planned batch, last committed batch), -1 for none."""
    planned, committed = batches(checkpoint, "offsets"), batches(checkpoint, "commits")
    return (planned[-1] if planned else -1, committed[-1] if committed else -1)


def wait_for(condition, timeout: float, proc: subprocess.Popen):
    """``condition()``'s first truthy value while ``proc`` runs, or None."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    return None


def sink_batches(path: str) -> dict[str, int]:
    """Parquet part file name -> the micro-batch that wrote it, from the file sink's log."""
    out = {}
    for log in glob.glob(os.path.join(path, "_spark_metadata", "*")):
        name = os.path.basename(log)
        if not name.isdigit():
            continue
        for line in open(log).read().splitlines()[1:]:
            out[os.path.basename(json.loads(line)["path"])] = int(name)
    return out


def parquet_rows(spark, path: str) -> Counter:
    """(operator, output row as JSON) -> how many times the sink holds it."""
    return Counter((r["key"], r["value"]) for r in spark.read.parquet(path).collect())


def rows_with_batch(spark, path: str) -> list[tuple[tuple, int]]:
    """((operator, row), the micro-batch that wrote it) for every row of a Parquet sink."""
    from pyspark.sql import functions as F

    by_file = sink_batches(path)
    rows = spark.read.parquet(path).withColumn("file", F.input_file_name()).collect()
    return [((r["key"], r["value"]), by_file[os.path.basename(r["file"])]) for r in rows]


def job_failure(log: str) -> str:
    """What a failed job's log says: its error lines (a query's plan can follow them for pages), then
    its tail."""
    errors = [line[:500] for line in log.splitlines() if "Exception" in line or "Error" in line]
    return "\n".join(errors[:20]) + "\n...\n" + log[-1500:]


def test_every_operator_survives_kill_9(spark, kafka, tmp_path):
    rng = random.Random(SEED)
    stored = as_stored(records(EVENTS, seed=SEED))
    topic, out_topic = kafka.create_topic("crash-in", 3), kafka.create_topic("crash-out", 3)
    eos_topic = kafka.create_topic("crash-out-eos", 3)
    produce(kafka.bootstrap, topic, [(p, key, value, t) for p, _, key, value, t in stored])
    assert [(r.partition, r.offset) for r in read_topic(kafka.bootstrap, topic)] == sorted(
        (p, offset) for p, offset, *_ in stored
    )
    write_files(str(tmp_path / "in"), stored, BATCHES)
    setup = {
        "files": str(tmp_path / "in"),
        "bootstrap": kafka.bootstrap,
        "topic": topic,
        "max_offsets": -(-len(stored) // BATCHES),
    }
    if BOTH_SOURCES:
        setup["file_operators"] = setup["kafka_operators"] = sorted(OPERATORS)
    else:
        setup["file_operators"], setup["kafka_operators"] = split_operators(SEED)

    # The uninterrupted run, in this process, while the killed runs go on in the child's (it needs
    # no result of theirs, and they need its output only for the checks after the last run): the
    # two overlap where one of them waits (a JVM starting, a kill's random moment).
    # The exactly-once sink's query runs the operators of the at-least-once sink's over the same
    # source in the same micro-batches, so the uninterrupted run of the one is that of the other:
    # one query for both (its rows are what each sink must hold).
    began = time.time()
    clean_root = str(tmp_path / "clean")
    clean_queries = start_queries(spark, {**setup, "root": clean_root}, None, ("file", "kafka", "kafka_sink"))

    root, marker = str(tmp_path / "crashed"), str(tmp_path / "marker")
    os.makedirs(marker)
    setup_path = str(tmp_path / "setup.json")
    json.dump(
        {**setup, "root": root, "kafka_out": out_topic, "kafka_eos_out": eos_topic, "marker": marker},
        open(setup_path, "w"),
    )
    checkpoints = {name: os.path.join(root, "checkpoint", name) for name in QUERIES}
    topic_size = EndOffsets(kafka.bootstrap, out_topic)

    def has_committed(target: str) -> bool:
        """The target query (any for "*") has committed a micro-batch."""
        names = QUERIES if target == "*" else [target]
        return any(position(checkpoints[name])[1] >= 0 for name in names)

    def marker_written():
        path = os.path.join(marker, "running")
        return json.load(open(path)) if os.path.exists(path) else None

    # One kill at a random moment, then kills in the middle of a task; each waits until its query
    # has committed a micro-batch, so that restarts also recover committed state. It arms the marker
    # as soon as its own query has committed: waiting for every query to commit let the quicker ones
    # finish their input meanwhile, and a later kill aimed at one of them found nothing running (CI,
    # stop 52). A kill "after" in the Kafka sink's query waits a little longer for other tasks of the
    # micro-batch to write records.
    # (make test's 3 kills take the first two points: the Kafka sink's query after it wrote rows,
    # then the exactly-once sink's; all queries run in one process, so each kill stops all those
    # still running.)
    points = [
        ("after", "kafka_sink"),
        ("before", "kafka_eos"),
        ("after", "kafka_eos"),
        ("after", "file"),
        ("after", "kafka"),
        ("before", "*"),
    ]
    plan = [("random", "")] + [points[i % len(points)] for i in range(KILLS - 1)] + [("final", "")]
    runs = []
    for i, (point, target) in enumerate(plan):
        for f in glob.glob(os.path.join(marker, "*")):
            os.remove(f)
        size_before, committed_before = topic_size.total(), position(checkpoints["kafka_sink"])[1]
        log_path = tmp_path / f"job-{i}.log"
        log = open(log_path, "w")
        proc = subprocess.Popen(
            [sys.executable, JOB, setup_path], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        start, inside = time.time(), None
        if point == "random":
            # at a random moment after the job started its queries (crash_job.py prints "started")
            wait_for(lambda path=log_path: "started" in path.read_text(), 300, proc)
            wait_for(lambda: False, rng.uniform(0, 10), proc)
        elif point == "final":
            proc.wait(timeout=900)
        elif wait_for(lambda target=target: has_committed(target), 300, proc):
            with open(os.path.join(marker, "arm"), "w") as f:
                f.write(f"{point} {target}")
            inside = wait_for(marker_written, 300, proc)
            if inside and target == "kafka_sink":
                size = topic_size.total()
                wait_for(lambda size=size: topic_size.total() > size, 10, proc)
        killed = proc.poll() is None
        if killed:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        log.close()
        assert proc.returncode == (-signal.SIGKILL if killed else 0), job_failure(log_path.read_text())
        positions = {name: position(ck) for name, ck in checkpoints.items()}
        if inside:  # the marked task's micro-batch was cut short
            planned, committed = positions[inside["query"]]
            assert planned >= inside["batch"] > committed, (inside, positions)
        # the Kafka sink's records written in this run and the micro-batches it committed (what it
        # wrote beyond those is counted below, from the clean run's rows per micro-batch)
        written_in_run = topic_size.total() - size_before
        committed_in_run = range(committed_before + 1, positions["kafka_sink"][1] + 1)
        runs.append(
            {
                "point": f"{point} {target}".strip(),
                "killed": killed,
                # the queries were running when the kill came: all started, not all done
                "queries_running": killed and "started" in log_path.read_text(),
                "seconds": round(time.time() - start, 1),
                "inside": inside,
                "kafka_sink_written": written_in_run,
                "kafka_sink_committed": committed_in_run,
                **positions,
            }
        )
    topic_size.close()
    await_queries(spark, {**setup, "root": clean_root}, None, clean_queries)
    clean = {name: parquet_rows(spark, os.path.join(clean_root, "out", name)) for name in clean_queries}
    clean["kafka_eos"] = clean["kafka_sink"]
    # Micro-batch boundaries differ between the sources, so may the outputs (records of several
    # partitions meet in a micro-batch in timestamp order): each source has its own clean run.
    # every operator gives rows in the source(s) that run it
    for name in ("file", "kafka"):
        assert {op for op, _ in clean[name]} == set(setup[f"{name}_operators"]), name
    # the late-record side outputs route records in this input (to_json leaves null fields out)
    for name in ("file", "kafka"):
        routed = {op for op, row in clean[name] if op.endswith("_late_aside") and '"kstreams_reason"' in row}
        assert routed == {op for op in setup[f"{name}_operators"] if op.endswith("_late_aside")}, (
            name,
            routed,
        )
    sink_rows = rows_with_batch(spark, os.path.join(clean_root, "out", "kafka_sink"))
    rows_in_batch = Counter(batch for _, batch in sink_rows)
    batch_of: dict[tuple, set[int]] = {}
    for row, batch in sink_rows:
        batch_of.setdefault(row, set()).add(batch)
    clean_seconds = time.time() - began
    # what the Kafka sink wrote in each run beyond the micro-batches it committed
    for run in runs:
        committed_rows = sum(rows_in_batch[b] for b in run.pop("kafka_sink_committed"))
        run["kafka_sink_aborted_rows"] = run.pop("kafka_sink_written") - committed_rows

    kills = [r for r in runs if r["killed"]]
    assert len(kills) >= min(3, KILLS), runs
    # every query was killed while it ran (started, its last micro-batch not yet committed)
    while_running = {
        name: [k for k in kills if k["queries_running"] and k[name][1] < runs[-1][name][1]]
        for name in QUERIES
    }
    # (all of make test's 3 kills stop the exactly-once query while it runs, it is the last to finish;
    # the others are lighter and may be done by the last kill)
    for name, its_kills in while_running.items():
        least = min(3 if name == "kafka_eos" else 2, KILLS)
        assert len(its_kills) >= least, f"kills while the {name} query ran: {its_kills}; {runs}"
    assert any(k["inside"] for k in kills), f"no kill was proven to land inside a task: {runs}"
    # the at-least-once sink's count below is not trivially zero: a kill cut one of its
    # micro-batches short after rows of it were written
    assert any(k["kafka_sink_aborted_rows"] > 0 for k in kills), f"no kill left Kafka sink rows: {runs}"
    assert runs[-1]["kafka_sink_aborted_rows"] == 0, runs[-1]

    # exactly-once sinks: the uninterrupted run's rows, no more, no fewer, for every operator
    for name in ("file", "kafka"):
        got = parquet_rows(spark, os.path.join(root, "out", name))
        doubled = Counter(op for op, _ in (got - clean[name]).elements())
        lost = Counter(op for op, _ in (clean[name] - got).elements())
        assert got == clean[name], f"{name} source: rows doubled per operator {doubled}, lost {lost}"

    # The Kafka sink: every row; the rows written more than once are as many as the runs that were
    # killed wrote beyond what they committed, and all are rows of micro-batches cut short.
    written = Counter((r.key.decode(), r.value.decode()) for r in read_topic(kafka.bootstrap, out_topic))
    assert not clean["kafka_sink"] - written, f"lost: {list((clean['kafka_sink'] - written).items())[:5]}"
    repeats = written - clean["kafka_sink"]
    assert sum(repeats.values()) == sum(r["kafka_sink_aborted_rows"] for r in runs) > 0, (repeats, runs)
    cut_short = {b for k in kills for b in range(k["kafka_sink"][1] + 1, k["kafka_sink"][0] + 1)}
    outside = [row for row in repeats if not batch_of[row] & cut_short]
    assert not outside, f"repeated rows of micro-batches that were not cut short: {outside[:5]}"
    # The exactly-once Kafka sink: a read_committed consumer reads the uninterrupted run's rows,
    # each as often as that run wrote it
    eos = Counter((r.key.decode(), r.value.decode()) for r in read_committed(kafka.bootstrap, eos_topic))
    assert eos == clean["kafka_eos"], (
        f"exactly-once sink: doubled {list((eos - clean['kafka_eos']).items())[:5]}, "
        f"lost {list((clean['kafka_eos'] - eos).items())[:5]}"
    )
    print(
        f"\ncrash test: {len(stored)} input records, {len(OPERATORS)} operators, output rows "
        f"{ {name: sum(c.values()) for name, c in clean.items()} }; clean runs done after {clean_seconds:.0f} s, "
        f"all {time.time() - began:.0f} s; runs: {runs}; Parquet sinks lost 0 and doubled 0; Kafka sink "
        f"lost 0, repeated {sum(repeats.values())} rows, all of cut-short micro-batches {sorted(cut_short)}; "
        f"exactly-once Kafka sink lost 0 and doubled 0 ({sum(eos.values())} rows); kills while each query "
        f"ran { {name: len(k) for name, k in while_running.items()} }"
    )


def test_a_query_killed_while_writing_its_first_offsets_restarts(spark, tmp_path):
    """A kill while Spark writes the first offset-log entry leaves a hidden temporary file in
    ``offsets/`` and no entry. Spark's check for a new checkpoint then refuses to start the query,
    for good; configure_spark turns that check off, and the query starts from the beginning."""
    run = StreamRun(spark, str(tmp_path), lambda df: KStream(df).deduplicate_by_key("10 seconds").df)
    run.add_batch(with_offsets([Rec("a", 1), Rec("a", 2), Rec("b", 3)]))
    offsets = tmp_path / "checkpoint" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / ".0.5f2c1e0a-0d7e-4f63-9a57-0c8f4a1d2b3c.tmp").touch()  # what the kill left

    key = "spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart"
    assert spark.conf.get(key) == "false"
    spark.conf.set(key, "true")  # Spark's default
    try:
        with pytest.raises(StreamingQueryException, match="STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"):
            run.run()
    finally:
        spark.conf.set(key, "false")
    run.run()
    assert forwarded(run.output()) == [("a", "v0"), ("b", "v2")]


def test_state_commits_write_changelogs_unless_the_session_says_otherwise(spark, tmp_path):
    """configure_spark turns on RocksDB's changelog checkpointing (its docstring says why): each
    commit writes ``<version>.changelog`` files in the state folders. A user's own setting wins,
    on the builder and on a running session; the output is the same either way, also restarted
    with the other setting."""
    from kstreams_spark.session import CHANGELOG_CHECKPOINTING_KEY as key
    from pyspark.sql import SparkSession

    assert spark.conf.get(key) == "true"
    assert configure_spark(SparkSession.builder.config(key, "false"))._options[key] == "false"
    assert configure_spark(SparkSession.builder)._options[key] == "true"

    def state_files(root):
        return [
            os.path.basename(f)
            for f in glob.glob(os.path.join(root, "checkpoint", "state", "**"), recursive=True)
        ]

    for first, second in (("true", "false"), ("false", "true")):
        root = tmp_path / f"first-{first}"
        run = StreamRun(spark, str(root), lambda df: KStream(df).deduplicate_by_key("10 seconds").df)
        try:
            spark.conf.set(key, first)
            run.add_batch(with_offsets([Rec("a", 1), Rec("a", 2), Rec("b", 3)]))
            run.run()
            assert any(f.endswith(".changelog") for f in state_files(root)) == (first == "true")
            spark.conf.set(key, second)
            run.add_batch([Rec("a", 4, 0, 3, "v3"), Rec("b", 20, 0, 4, "v4"), Rec("b", 21, 0, 5, "v5")])
            run.run()
        finally:
            spark.conf.set(key, "true")
        assert forwarded(run.output()) == [("a", "v0"), ("b", "v2"), ("b", "v4")]
