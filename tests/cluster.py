"""A Spark standalone cluster on 127.0.0.1, started from the pyspark wheel's own ``bin/spark-class``.

One master and N workers, each a separate JVM in its own process group (so killing a worker's group
also kills the executors it launched, as when a machine dies), each worker with its own work dir,
free ports, 1 core and a little memory. Used by tests/test_cluster.py.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import pyspark

SPARK_HOME = os.path.dirname(pyspark.__file__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Test-only defaults for every driver (plain Python or spark-submit both read spark-defaults.conf):
# short-lived JVMs on a shared 2-core machine start faster with the C1 compiler and serial GC.
SPARK_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.executor.memory": "512m",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
_CONF_DIR = tempfile.mkdtemp(prefix="kstreams-cluster-conf-")
atexit.register(shutil.rmtree, _CONF_DIR, True)
with open(os.path.join(_CONF_DIR, "spark-defaults.conf"), "w") as _f:
    _f.writelines(f"{k} {v}\n" for k, v in SPARK_DEFAULTS.items())


def cluster_env() -> dict:
    """Environment for the daemons, drivers and spark-submit: Spark is the pyspark wheel with the
    test's spark-defaults.conf, everything binds to 127.0.0.1, and executors' Python (if any) is
    this interpreter."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=SPARK_HOME,
        SPARK_CONF_DIR=_CONF_DIR,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS="-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    return env


# Kills the daemons if the test process dies without stopping them (e.g. SIGKILL on a timeout):
# they run in sessions of their own, so nothing else would.
_WATCHDOG = """
import os, signal, sys, time
parent, pids = int(sys.argv[1]), sys.argv[2]
while True:
    time.sleep(1)
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
for pgid in open(pids).read().split():
    try:
        os.killpg(int(pgid), signal.SIGKILL)
    except ProcessLookupError:
        pass
"""


@dataclass
class Daemon:
    name: str
    process: subprocess.Popen
    log: str
    web_port: int
    work_dir: str | None = None

    def kill(self) -> None:
        """SIGKILL to the daemon's whole process group (a worker and its executors)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)


@dataclass
class StandaloneCluster:
    root: str
    workers: int = 2
    worker_memory: str = "1g"
    master_port: int = field(default_factory=free_port)
    master: Daemon | None = None
    worker_daemons: list = field(default_factory=list)
    watchdog: subprocess.Popen | None = None
    _starting: Future | None = None

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _start(self, name: str, cls: str, args: list, work_dir: str | None = None) -> Daemon:
        web_port = free_port()
        log = os.path.join(self.root, f"{name}.log")
        with open(log, "w") as out:
            process = subprocess.Popen(
                [
                    os.path.join(SPARK_HOME, "bin", "spark-class"),
                    cls,
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(web_port),
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=cluster_env(),
                cwd=self.root,
                start_new_session=True,
            )
        with open(os.path.join(self.root, "daemon-pids"), "a") as pids:
            pids.write(f"{process.pid}\n")
        return Daemon(name, process, log, web_port, work_dir)

    def start(self) -> StandaloneCluster:
        os.makedirs(self.root, exist_ok=True)
        self.watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), os.path.join(self.root, "daemon-pids")],
            start_new_session=True,
        )
        self.master = self._start(
            "master", "org.apache.spark.deploy.master.Master", ["--port", str(self.master_port)]
        )
        self.wait_for(lambda s: s is not None, "the master to answer")
        for i in range(self.workers):
            self.worker_daemons.append(self.start_worker(i))
        self.wait_for(
            lambda s: len(self.alive_workers(s)) == self.workers, f"{self.workers} workers to register"
        )
        return self

    def start_in_background(self) -> StandaloneCluster:
        """Starts the cluster on a thread, so the JVMs boot while the caller does other work."""
        self._starting = ThreadPoolExecutor(1).submit(self.start)
        return self

    def ready(self) -> StandaloneCluster:
        """Waits for a start_in_background() to finish (raising what it raised)."""
        if self._starting is not None:
            self._starting.result()
        return self

    def start_worker(self, i: int) -> Daemon:
        work_dir = os.path.join(self.root, f"worker-{i}")
        os.makedirs(work_dir, exist_ok=True)
        return self._start(
            f"worker-{i}",
            "org.apache.spark.deploy.worker.Worker",
            [
                "--port",
                str(free_port()),
                "--cores",
                "1",
                "--memory",
                self.worker_memory,
                "--work-dir",
                work_dir,
                self.url,
            ],
            work_dir,
        )

    def state(self) -> dict | None:
        """The master's JSON status page, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.master.web_port}/json/", timeout=2) as r:
                return json.load(r)
        except OSError:
            return None

    @staticmethod
    def alive_workers(state: dict | None) -> list:
        return [w for w in (state or {}).get("workers", []) if w["state"] == "ALIVE"]

    def wait_for(self, condition, what: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for d in [self.master, *self.worker_daemons]:
                if d.process.poll() is not None and d.process.returncode != -signal.SIGKILL:
                    raise RuntimeError(f"{d.name} exited ({d.process.returncode}); log:\n{tail(d.log)}")
            state = self.state()
            if condition(state):
                return state
            time.sleep(0.2)
        raise TimeoutError(f"timed out waiting for {what}; master log:\n{tail(self.master.log)}")

    def stop(self) -> None:
        if self._starting is not None:
            wait([self._starting])
        for d in [*self.worker_daemons, self.master]:
            if d is not None:
                d.kill()
        if self.watchdog is not None:
            self.watchdog.kill()
            self.watchdog.wait()


def tail(path: str, lines: int = 40) -> str:
    """The last lines of a log file."""
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])
