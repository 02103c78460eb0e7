"""On a real Spark standalone cluster (a master and two workers on 127.0.0.1, started from the
pyspark wheel): the example app (examples/cluster_app.py) runs a streaming deduplicate_by_key and a
windowed distinct with RocksDB state and checkpoints on a shared folder, one file per micro-batch.

* As a plain Python driver (configure_spark ships the jar, no --jars), one worker and its executor
  are killed (SIGKILL) mid-stream, while the executor runs a task (seen in its log): tasks move to
  the other executor, which reloads the lost state from the checkpoint. Later the driver itself
  (its Python process and JVM) is killed while the other executor runs a task, and a new driver
  restarts the queries from their checkpoints. They complete, and their Parquet sinks equal the
  local-mode result exactly (nothing lost, nothing doubled), which is in turn exactly the rows a
  model of the spec's rules in this module expects (``expected_rows``).
* Through the wheel's ``bin/spark-submit --jars`` (a fresh worker replacing the killed one, all
  files in one micro-batch): the same result.

Both prove the jar reached executors: each executor's work dir holds the fetched jar and its log
shows finished tasks. Select with ``pytest -m cluster``.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import signal
import subprocess
import sys
import time
import zipfile

import pytest
from cluster import SPARK_HOME, StandaloneCluster, cluster_env, tail
from kstreams_spark import jar_path
from kstreams_spark.session import CODEGEN_CACHE_MAX_ENTRIES_KEY, DEFAULT_SETTINGS
from streams import BASE, Rec, _write_file, with_offsets

pytestmark = pytest.mark.cluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APP = os.path.join(ROOT, "examples", "cluster_app.py")
sys.path.insert(0, os.path.dirname(APP))
import cluster_app  # noqa: E402

FILES = 4  # one micro-batch each
KILL_WORKER_AFTER = 1  # kill a worker once both queries have committed this many micro-batches
KILL_DRIVER_AFTER = 2  # and then the driver, once one has committed this many and one is not done
DRIVER_TIMEOUT_S = 240


def input_records() -> list[list[Rec]]:
    """FILES files over 4 Kafka partitions. Each file replays (same key, value and time, new
    offset: a producer retry) the first records of the previous file, so a replay after the kill
    is dropped only if the state written before the kill was reloaded from the checkpoint."""
    files, previous = [], []
    for b in range(FILES):
        fresh = [
            Rec(f"k{(p * 3 + i) % 8}", b * 4 + i * 0.5, partition=p, value=f"b{b}p{p}i{i}")
            for p in range(4)
            for i in range(5)
        ]
        replays = [Rec(r.key, r.t, partition=r.partition, value=r.value) for r in previous[:6]]
        files.append(fresh + replays)
        previous = fresh
    numbered = iter(with_offsets([r for f in files for r in f]))
    return [[next(numbered) for _ in f] for f in files]


def expected_rows() -> dict[str, list[tuple]]:
    """Both sinks' rows as SEMANTICS.md says (the app's defaults: interval and window 10 s, no
    grace), from a model of the rules written here, not from the library. Both operators keep
    their state per input partition and judge a partition's records in offset order (section 1),
    so each partition is replayed alone, whatever the micro-batches: ``deduplicate_by_key``
    (section 2) and the first record per key and epoch-aligned window ``[start, start + 10 s)``,
    a record of a window that ended at or before its partition's stream time being late
    (section 3)."""
    interval = size = 10.0
    by_partition: dict[int, list[Rec]] = {}
    for r in (r for f in input_records() for r in f):
        by_partition.setdefault(r.partition, []).append(r)

    def at(seconds: float):
        return (BASE + dt.timedelta(seconds=seconds)).replace(tzinfo=None)  # as collect() gives it

    dedup, windowed = [], []
    for records in by_partition.values():
        stream_time = float("-inf")
        stored: dict[str, tuple[float, int]] = {}  # key -> (t, offset) of the stored entry
        first: set[tuple[str, float]] = set()  # (key, window start) already forwarded
        for r in sorted(records, key=lambda r: r.offset):
            row = (r.key, r.value, at(r.t), r.partition, r.offset)
            stream_time = max(stream_time, r.t)
            entry = stored.get(r.key)
            live = entry is not None and not entry[0] < stream_time - interval
            if not (live and abs(entry[0] - r.t) <= interval and entry[1] != r.offset):
                dedup.append(row)
                if not r.t < stream_time - interval:  # a late record is never stored
                    stored[r.key] = (r.t, r.offset)
            start = r.t // size * size  # BASE is a multiple of 10 s after the epoch
            if start + size > stream_time and (r.key, start) not in first:
                first.add((r.key, start))
                windowed.append((*row, (at(start), at(start + size))))
    # replays and repeated keys are dropped: a result that lost state would differ
    records = sum(len(f) for f in input_records())
    assert 0 < len(dedup) < records and 0 < len(windowed) < records, (len(dedup), len(windowed))
    return {"dedup": sorted(dedup), "windowed": sorted(windowed)}


def app_args(root: str, input_dir: str, files_per_batch: int = 1) -> list[str]:
    return [
        "--input",
        input_dir,
        "--output",
        os.path.join(root, "out"),
        "--checkpoint",
        os.path.join(root, "checkpoint"),
        "--files-per-batch",
        str(files_per_batch),
    ]


def sink_rows(spark, root: str) -> dict[str, list[tuple]]:
    """Rows of both Parquet sinks (read through the sink's log: committed files only), sorted."""
    return {
        name: sorted(tuple(r) for r in spark.read.parquet(os.path.join(root, "out", name)).collect())
        for name in ("dedup", "windowed")
    }


@pytest.fixture(scope="module")
def input_dir(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("cluster-input"))
    for i, records in enumerate(input_records()):
        _write_file(os.path.join(d, f"batch-{i:05d}.json"), records, 1_700_000_000 + i)
    return d


@pytest.fixture(scope="module")
def local_result(spark, input_dir, tmp_path_factory) -> dict[str, list[tuple]]:
    """The same app's queries on the suite's local[2] session."""
    root = str(tmp_path_factory.mktemp("cluster-local"))
    for query in cluster_app.start_queries(spark, cluster_app.parse_args(app_args(root, input_dir))).values():
        query.awaitTermination()
    rows = sink_rows(spark, root)
    assert rows == expected_rows()
    return rows


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    c = StandaloneCluster(str(tmp_path_factory.mktemp("cluster")), workers=2)
    try:
        yield c.start_in_background()  # booting while local_result runs
    finally:
        c.stop()


def run_driver(command: list[str], log: str, on_progress=None) -> dict | None:
    """Runs a driver process to its end (calling ``on_progress(driver)`` while it runs); returns the
    app's JSON summary line, or None if ``on_progress`` killed the driver (its process group)."""
    with open(log, "w") as out:
        driver = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=out,
            env=cluster_env(),
            cwd=ROOT,
            text=True,
            start_new_session=True,  # its own process group: the Python driver and its JVM
        )
        try:
            deadline = time.monotonic() + DRIVER_TIMEOUT_S
            while driver.poll() is None and time.monotonic() < deadline:
                if on_progress and on_progress(driver):
                    driver.wait()
                    return None
                time.sleep(0.1)
            if driver.poll() is None:
                pytest.fail(f"driver still running after {DRIVER_TIMEOUT_S} s; log: {log}")
        finally:
            if driver.poll() is None:
                driver.kill()
            stdout = driver.stdout.read()
            driver.wait()
    assert driver.returncode == 0, f"driver failed ({driver.returncode}); log {log}:\n{tail(log)}"
    return json.loads(stdout.strip().splitlines()[-1])


def executors_that_ran_tasks(c: StandaloneCluster, app_id: str, jar: str = jar_path()) -> list[str]:
    """Work dirs (worker-N/app-id/executor-id) of the app's executors that fetched ``jar`` (the
    kstreams jar) from the driver and finished tasks."""
    jar = os.path.basename(jar)
    ran = []
    for d in sorted(glob.glob(os.path.join(c.root, "worker-*", app_id, "*"))):
        with open(os.path.join(d, "stderr"), errors="replace") as f:
            finished = "Finished task" in f.read()
        if finished and os.path.exists(os.path.join(d, jar)):
            ran.append(os.path.relpath(d, c.root))
    return ran


def running_a_task(work_dir: str) -> bool:
    """Whether an executor under the worker's ``work_dir`` has started a task it has not finished."""
    started = finished = 0
    for path in glob.glob(os.path.join(work_dir, "*", "*", "stderr")):
        with open(path, errors="replace") as f:
            log = f.read()
        started, finished = started + log.count("Running task"), finished + log.count("Finished task")
    return started > finished


def committed(checkpoint: str) -> int:
    """Micro-batches committed in a query's checkpoint."""
    return len(glob.glob(os.path.join(checkpoint, "commits", "[0-9]*")))


def test_python_driver_survives_losing_a_worker_and_its_own_process_mid_stream(
    spark, standalone, input_dir, local_result, tmp_path
):
    standalone.ready()
    root = str(tmp_path)
    checkpoints = [os.path.join(root, "checkpoint", n) for n in ("dedup", "windowed")]
    worker, survivor = standalone.worker_daemons[1], standalone.worker_daemons[0]
    killed = {}

    def kill_mid_stream(driver: subprocess.Popen) -> bool:
        """Kills the worker, then the driver, each only while an executor runs a task (the
        stateful stages are most of the work); True once the driver is dead."""
        done = [committed(c) for c in checkpoints]
        if "worker" not in killed:
            if min(done) >= KILL_WORKER_AFTER and running_a_task(worker.work_dir):
                killed["worker"] = {"name": worker.name, "committed": done}
                worker.kill()  # the worker and its executor, as when a machine dies
            return False
        if max(done) >= KILL_DRIVER_AFTER and min(done) < FILES and running_a_task(survivor.work_dir):
            killed["driver"] = {"committed": done}
            os.killpg(driver.pid, signal.SIGKILL)
            return True
        return False

    app = [sys.executable, APP, "--master", standalone.url, *app_args(root, input_dir)]
    first = run_driver([*app, "--min-executors", "2"], os.path.join(root, "driver.log"), kill_mid_stream)
    assert first is None and "worker" in killed and "driver" in killed, (
        f"the queries ended before the worker and then the driver could be killed while an executor ran a task: {killed}"
    )
    # the new driver finds one worker alive
    summary = run_driver([*app, "--min-executors", "1"], os.path.join(root, "driver-restarted.log"))

    assert sink_rows(spark, root) == local_result, f"killed: {killed}"
    assert all(n >= 1 for n in summary["batches_with_data"].values()), summary
    assert summary["settings"] == DEFAULT_SETTINGS
    first_app = sorted(os.listdir(worker.work_dir))[0]  # the only app the killed worker ran
    ran = executors_that_ran_tasks(standalone, first_app)
    assert len(ran) == 2 and any(d.startswith(worker.name + os.sep) for d in ran), ran
    assert executors_that_ran_tasks(standalone, summary["application_id"]), "the restarted driver's executor"


def test_spark_submit_with_jars(spark, standalone, input_dir, local_result, tmp_path):
    if len(standalone.alive_workers(standalone.ready().state())) < 2:  # the first test killed one
        # a fresh worker joins while spark-submit starts; the app waits for its executor
        standalone.worker_daemons.append(standalone.start_worker(len(standalone.worker_daemons)))
    root = str(tmp_path)
    # another jar given to spark-submit must reach the executors too (configure_spark adds to it)
    other_jar = os.path.join(root, "other.jar")
    with zipfile.ZipFile(other_jar, "w") as z:
        z.writestr("other.txt", "not a class")
    summary = run_driver(
        [
            os.path.join(SPARK_HOME, "bin", "spark-submit"),
            "--master",
            standalone.url,
            "--jars",
            f"{other_jar},{jar_path()}",
            "--conf",  # a user's own value of a default configure_spark changes: it must stay
            f"{CODEGEN_CACHE_MAX_ENTRIES_KEY}=500",
            APP,
            "--min-executors",
            "2",
            *app_args(root, input_dir, files_per_batch=FILES),
        ],
        os.path.join(root, "driver.log"),
    )
    assert summary["batches_with_data"] == {"dedup": 1, "windowed": 1}
    assert summary["settings"] == {**DEFAULT_SETTINGS, CODEGEN_CACHE_MAX_ENTRIES_KEY: "500"}
    assert sink_rows(spark, root) == local_result
    assert len(executors_that_ran_tasks(standalone, summary["application_id"])) == 2
    assert len(executors_that_ran_tasks(standalone, summary["application_id"], other_jar)) == 2
