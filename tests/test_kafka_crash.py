"""Crash safety on a real broker: the query runs in a child process that is killed with SIGKILL
(its Python driver and its JVM, the whole process group) at several points, including in the middle
of a micro-batch, and restarted from the same checkpoints until the input is consumed.

The Parquet sink is exactly-once: it must hold exactly the rows of an uninterrupted run. The Kafka
output topic is at-least-once: it must hold every expected record; records of a micro-batch that
was cut short are written again after the restart (replays), and the test reports how many.
"""

import os
import random
import signal
import subprocess
import sys
import time

from kafka_broker import EndOffsets, produce, read_topic
from kafka_streams import (
    OPERATORS,
    PARTITIONS,
    as_inputs,
    at_least_once_records,
    expected_dedup_by_key,
    kafka_source,
    output_provenance,
    parquet_rows,
    rows_of,
    start_parquet_sink,
)

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_crash_job.py")
MAX_OFFSETS = 150  # records per micro-batch over all partitions: 6 micro-batches


def batches(checkpoint: str, kind: str) -> list[int]:
    """Batch ids with a file in ``checkpoint/kind`` (``offsets``: planned, ``commits``: done)."""
    folder = os.path.join(checkpoint, kind)
    return sorted(int(n) for n in os.listdir(folder) if n.isdigit()) if os.path.isdir(folder) else []


def position(checkpoint: str) -> tuple[int, int]:
    """(last planned batch, last committed batch), -1 for none."""
    planned, committed = batches(checkpoint, "offsets"), batches(checkpoint, "commits")
    return (planned[-1] if planned else -1, committed[-1] if committed else -1)


def wait_for(condition, timeout: float, proc: subprocess.Popen) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_kill_9_at_random_points_loses_and_doubles_nothing(spark, kafka, tmp_path):
    rng = random.Random(11)
    topic = kafka.create_topic("crash-in", PARTITIONS)
    out_topic = kafka.create_topic("crash-out", PARTITIONS)
    produce(kafka.bootstrap, topic, at_least_once_records(150, seed=11))
    records = as_inputs(read_topic(kafka.bootstrap, topic))
    expected = rows_of(expected_dedup_by_key(records))

    # the uninterrupted run, in this process
    clean = start_parquet_sink(
        OPERATORS["dedup_by_key"](kafka_source(spark, kafka.bootstrap, topic, MAX_OFFSETS)),
        str(tmp_path / "clean"),
        str(tmp_path / "clean-ck"),
    )
    clean.awaitTermination()
    uninterrupted = parquet_rows(spark, str(tmp_path / "clean"))
    assert uninterrupted == expected

    checkpoints = tmp_path / "ck"
    parquet_ck, kafka_ck = str(checkpoints / "parquet"), str(checkpoints / "kafka")
    command = [
        sys.executable,
        JOB,
        kafka.bootstrap,
        topic,
        out_topic,
        str(tmp_path / "out"),
        str(checkpoints),
        str(MAX_OFFSETS),
    ]

    def mid_batch(checkpoint, after):
        """A micro-batch after ``after`` is planned and not committed."""

        def check():
            planned, committed = position(checkpoint)
            return planned > max(committed, after)

        return check

    written_so_far = EndOffsets(kafka.bootstrap, out_topic)

    def kafka_batch_half_written(after):
        """The Kafka query's batch after ``after`` has written records and is not committed."""
        state = {}

        def check():
            planned, committed = position(kafka_ck)
            if planned <= max(committed, after):
                state.clear()
                return False
            if planned not in state:
                state[planned] = written_so_far.total()
                return False
            return written_so_far.total() > state[planned] and position(kafka_ck)[1] < planned

        return check

    # Where to kill: a random moment (start-up or a batch); mid-batch in the Parquet query; in the
    # Kafka query once its batch has written records but is not committed. Each restart costs a
    # Spark start-up, so three kills, the minimum that covers these points.
    plan = ["random", "mid-batch parquet", "mid-batch kafka"]
    crashes = []
    for point in plan:
        log = open(tmp_path / f"job-{len(crashes)}.log", "w")
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        start = time.time()
        p0, k0 = position(parquet_ck)[0], position(kafka_ck)[0]
        if point == "random":
            reached = wait_for(lambda: False, rng.uniform(5, 30), proc) or proc.poll() is None
        elif point == "mid-batch parquet":
            reached = wait_for(mid_batch(parquet_ck, p0), 120, proc)
        else:
            reached = wait_for(kafka_batch_half_written(k0), 120, proc)
        if reached and point == "mid-batch parquet":
            time.sleep(rng.uniform(0, 0.5))  # somewhere inside the batch
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        log.close()
        crashes.append(
            (point, round(time.time() - start, 1), proc.returncode, position(parquet_ck), position(kafka_ck))
        )
        assert proc.returncode in (-signal.SIGKILL, 0), open(tmp_path / f"job-{len(crashes) - 1}.log").read()[
            -3000:
        ]

    written_so_far.close()
    final = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stdout[-3000:]

    killed = [c for c in crashes if c[2] == -signal.SIGKILL]
    cut_short = [c for c in killed if c[3][0] > c[3][1] or c[4][0] > c[4][1]]
    assert len(killed) >= 3, crashes
    assert cut_short, f"no kill landed inside a micro-batch: {crashes}"

    got = parquet_rows(spark, str(tmp_path / "out"))
    assert got == uninterrupted  # exactly-once: nothing lost, nothing doubled

    written = output_provenance(read_topic(kafka.bootstrap, out_topic))
    assert sorted(set(written)) == expected  # every expected record, nothing else
    replays = len(written) - len(expected)
    print(
        f"\ncrash test: {len(records)} input records, {len(expected)} expected rows; kills "
        f"(point, seconds after start, exit code, parquet (planned, committed), kafka (planned, "
        f"committed)): {crashes}; parquet rows lost 0, doubled 0; kafka rows lost 0, replays {replays}"
    )
