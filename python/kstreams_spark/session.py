"""Session set-up: the bundled jars on the classpath and the RocksDB state store."""

from __future__ import annotations

import os
import sys
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from kstreams_spark._jars import jar_path, kafka_connector_jars
from kstreams_spark._jvm import has_kstreams_jar, submitted_setting
from kstreams_spark.errors import KStreamsError

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
# Four Spark defaults configure_spark changes (see its docstring; the reasons in full are at the
# same keys in SparkSessionChecks.scala, whose KStream.configure sets them for Scala).
VERIFY_EMPTY_CHECKPOINT_KEY = "spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart"
WATERMARK_POLICY_KEY = "spark.sql.streaming.multipleWatermarkPolicy"
CHANGELOG_CHECKPOINTING_KEY = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
CODEGEN_CACHE_MAX_ENTRIES_KEY = "spark.sql.codegen.cache.maxEntries"
# the Python workers' interpreter as a setting (configure_spark passes it on to PYSPARK_PYTHON)
WORKERS_PYTHON_KEY = "spark.pyspark.python"
# What configure_spark gives a session, and `kstreams-spark connect-server` its server: the state
# store the operators need, and four defaults that a user's own setting overrides.
REQUIRED_SETTINGS = {PROVIDER_KEY: ROCKSDB_PROVIDER}
DEFAULT_SETTINGS = {
    VERIFY_EMPTY_CHECKPOINT_KEY: "false",
    WATERMARK_POLICY_KEY: "max",
    CHANGELOG_CHECKPOINTING_KEY: "true",
    CODEGEN_CACHE_MAX_ENTRIES_KEY: "1000",
}


def configure_spark(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Put the bundled jars on the classpath and use the RocksDB state store.

    The bundled jars are kstreams-spark's and Spark's Kafka connector (``spark.readStream
    .format("kafka")``, see :func:`kafka_connector_jars`). They go on the driver's classpath and
    into ``spark.jars`` (which ships them to executors, also on a cluster); both keep any jars
    already configured, also those of ``spark-submit --jars``. Under spark-submit the driver's JVM
    is already running, so pass the kstreams jar there too (``--jars``) for the driver to see it.

    Unless the builder (or ``spark-submit --conf``) already sets them, it also sets
    ``spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart`` to false (with Spark's check on,
    a query killed while writing its first offset-log entry never restarts) and
    ``spark.sql.streaming.multipleWatermarkPolicy`` to ``max`` (the query's watermark follows
    its most advanced input, as a Kafka Streams task's stream time does; under Spark's default
    ``min``, a query with several watermarks gets other results after a restart). Both are in
    the manual, "Crash safety"; a query keeps the policy it started with. It also turns on RocksDB's
    changelog checkpointing (``spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing
    .enabled``): a micro-batch's commit writes its changes to a file instead of checkpointing the
    database's files (0.92x the time per micro-batch at 1M live keys in `benchmarks/bench --tune`);
    Spark's real-time mode turns it on by itself. It gives Spark's cache of generated code room for
    1,000 classes (``spark.sql.codegen.cache.maxEntries``, Spark's default 100, shared by every
    query of the JVM): each state variable of an operator brings classes of its own, and a query of
    a few operators (three joins already) needs more than 100, which Spark then compiles again in
    every micro-batch (26 operators in one query need 732; a count of Spark's
    ``CodeGenerator.compilationTime`` metric that grows every micro-batch asks for more; it is a
    static setting, read once per JVM, so set it on the builder). On a local master, unless
    ``PYSPARK_PYTHON`` is set, it sets that variable of this process to this interpreter (or to
    the builder's ``spark.pyspark.python``, which PySpark reads only under spark-submit), so
    Python processors' workers have the same packages as the driver.

    A plain Spark session already running in this process is refused with a ``KStreamsError``:
    ``getOrCreate()`` would hand it back unchanged, without the jars or settings.

    >>> spark = configure_spark(SparkSession.builder.master("local[2]")).getOrCreate()

    Args:
        builder: ``SparkSession.builder``, e.g. ``SparkSession.builder.master("local[2]")``.

    Returns:
        The builder with the jars and settings; call ``getOrCreate()`` on it.

    Raises:
        KStreamsError: if ``builder`` is not a ``SparkSession.Builder``, or a plain Spark session (without the
            kstreams jar) is already running in this process.
    """
    if not isinstance(builder, SparkSession.Builder):
        raise KStreamsError(
            f"configure_spark takes SparkSession.builder (e.g. SparkSession.builder.master('local[2]')), "
            f"got {type(builder).__name__}; call getOrCreate() on what it returns"
        )
    _refuse_running_session_without_kstreams()
    jars = [jar_path(), *kafka_connector_jars()]
    options = getattr(builder, "_options", {})

    def appended(key: str, sep: str) -> str:
        current = str(options.get(key) or _submitted_value(key) or "")
        parts = current.split(sep) if current else []
        # spark-submit's --jars arrive as file: URIs
        paths = {urlparse(p).path if p.startswith("file:") else p for p in parts}
        return sep.join(parts + [j for j in jars if j not in paths])

    builder = builder.config("spark.jars", appended("spark.jars", ",")).config(
        "spark.driver.extraClassPath", appended("spark.driver.extraClassPath", ":")
    )
    for key, value in REQUIRED_SETTINGS.items():
        builder = builder.config(key, value)
    for key, value in DEFAULT_SETTINGS.items():
        # the builder's options go over spark-submit's --conf: a key given there keeps its value
        if key not in options and _submitted_value(key) is None:
            builder = builder.config(key, value)
    workers_python = _local_workers_python(options)
    if workers_python:
        # PySpark starts its Python workers (and, for transformWithState, a Python runner next to
        # the driver) with the interpreter PYSPARK_PYTHON names when the SparkContext starts, else
        # `python3` from the PATH; outside spark-submit it never reads spark.pyspark.python.
        # Outside an activated venv that `python3` lacks kstreams_spark and pandas. A local
        # master's workers run on this machine, so name this interpreter (or the one the builder's
        # spark.pyspark.python names) where PySpark looks.
        os.environ["PYSPARK_PYTHON"] = workers_python
    return builder


def _refuse_running_session_without_kstreams() -> None:
    """Refuses a SparkContext of this process started without the kstreams jar: the builder's
    ``getOrCreate()`` returns a running session as it is (Spark ignores the builder's jars), so
    every operator would then fail on a missing class."""
    from pyspark import SparkContext

    running = SparkContext._active_spark_context
    if running is not None and not has_kstreams_jar(running):
        raise KStreamsError(
            "a Spark session without kstreams-spark is already running in this process, and "
            "getOrCreate() would return it unchanged: stop it first (spark.stop()), then create the "
            "session with configure_spark(SparkSession.builder...).getOrCreate()"
        )


def _local_workers_python(options: dict) -> str | None:
    """The interpreter for the Python workers of a session that will run locally (master
    local[...], or none set outside spark-submit) when ``PYSPARK_PYTHON`` names none: the
    builder's ``spark.pyspark.python``, else this one. None where PySpark's own choice stands
    (``PYSPARK_PYTHON`` set, under spark-submit, or a cluster master)."""
    if "PYSPARK_PYTHON" in os.environ:
        return None
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit: its --master and --conf decide
        return None
    if not str(options.get("spark.master", "local")).startswith("local"):
        return None
    return str(options.get(WORKERS_PYTHON_KEY) or sys.executable)


def _submitted_value(key: str) -> str | None:
    """The value spark-submit gave ``key`` (``--jars`` is ``spark.jars``, ``--conf``), so that
    configure_spark adds to it or keeps it instead of replacing it; None when Python started without
    spark-submit."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # set only by spark-submit's PythonRunner
        return None
    return submitted_setting(key)
