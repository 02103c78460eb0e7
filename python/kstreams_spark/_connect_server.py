"""A local Spark Connect server with kstreams (``kstreams-spark connect-server``, the tests): Spark's
server from the installed pyspark, with the kstreams jar, its plugin and the settings
``configure_spark`` gives a classic session."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

from kstreams_spark._connect import PLUGIN_CLASS
from kstreams_spark._jars import jar_path, kafka_connector_jars
from kstreams_spark.errors import KStreamsError
from kstreams_spark.session import DEFAULT_SETTINGS, REQUIRED_SETTINGS, _local_workers_python


def server_command(
    port: int, host: str = "127.0.0.1", master: str = "local[*]", shuffle_partitions: int = 4
) -> list[str]:
    """spark-submit of Spark's Connect server from the installed pyspark, with the kstreams jar,
    the plugin and the settings ``configure_spark`` gives a classic session.

    ``shuffle_partitions`` is the sessions' default ``spark.sql.shuffle.partitions`` (the state
    partitions of a new checkpoint), as the CLI's ``dedup`` sets it: Spark's default of 200 costs
    a RocksDB commit per state partition and micro-batch, seconds per micro-batch on a laptop."""
    import pyspark

    spark_home = os.path.dirname(pyspark.__file__)
    conf = {
        "spark.connect.extensions.relation.classes": PLUGIN_CLASS,
        **REQUIRED_SETTINGS,
        **DEFAULT_SETTINGS,
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.grpc.binding.address": host,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.ui.enabled": "false",
    }
    command = [
        os.path.join(spark_home, "bin", "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name",
        "kstreams Spark Connect server",
        "--master",
        master,
        "--jars",
        ",".join([jar_path(), *kafka_connector_jars()]),
    ]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return command + ["spark-internal"]


def start_server(
    port: int,
    host: str = "127.0.0.1",
    master: str = "local[*]",
    timeout_s: float = 120,
    log=None,
    command: list[str] | None = None,
    shuffle_partitions: int = 4,
):
    """Starts ``command`` (default: :func:`server_command`) in its own process group and waits
    until it listens; returns the process (stop it with :func:`stop_server`)."""
    import pyspark

    env = dict(os.environ, SPARK_HOME=os.path.dirname(pyspark.__file__))
    # The server starts Python processors' workers with the interpreter its PYSPARK_PYTHON names
    # (`python3` from the PATH without it): on a local master, the one configure_spark would name
    workers_python = _local_workers_python({"spark.master": master})
    if workers_python:
        env["PYSPARK_PYTHON"] = workers_python
    process = subprocess.Popen(
        command or server_command(port, host, master, shuffle_partitions),
        env=env,
        stdout=log or subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise KStreamsError(
                f"the Spark Connect server exited with code {process.returncode} before listening"
            )
        try:
            with socket.create_connection((host, port), timeout=1):
                return process
        except OSError:
            time.sleep(0.5)
    stop_server(process)
    raise KStreamsError(f"the Spark Connect server did not listen on {host}:{port} within {timeout_s:.0f} s")


def stop_server(process) -> None:
    """Stops the server's process group: SIGTERM, then SIGKILL after 30 s."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass
