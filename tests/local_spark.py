"""The local Spark session the tests, the crash job and the docstring examples run on: real
Spark, ``local[2]``, 2 shuffle partitions, the RocksDB state store (``configure_spark``), UTC."""

from __future__ import annotations

import os

from kstreams_spark import configure_spark
from pyspark.sql import SparkSession

SCALA_TEST_CLASSES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jvm", "target", "scala-2.13", "test-classes"
)


# The JVMs the tests start in other processes (the CLI, the crash job, the Connect server,
# spark-submit) live seconds to a few minutes and spend them mostly starting up and running small
# micro-batches: most of their CPU goes to the JIT's optimizing compiler (C2) and the G1
# collector's threads, and on 2 cores that CPU is taken from the suites around them. With the quick compiler (C1) only and the serial collector, a CLI run on
# three records uses 13.5 CPU-seconds instead of 23 (12 s instead of 15 s), test_cli.py 97 instead
# of 148. tests/conftest.py sets these for every process a test starts (through SPARK_SUBMIT_OPTS,
# which spark-submit passes to its JVM). The JVM of the pytest process itself runs the whole suite's
# queries for minutes: it keeps C2 (with C1 only, four test modules took 354 s and 476 CPU-seconds
# instead of 254-278 s and 399-435) and takes the serial collector alone (LONG_LIVED_JVM_OPTIONS:
# 241 s and 363-367 CPU-seconds; all of lane 1's pytest files, 526 s and 764 CPU-seconds against 601
# and 935 with G1). In `make test` both cores are busy to the end, so the CPU a JVM
# does not use goes to the other lane. The Scala suite's JVM runs with the serial collector too
# (build.sbt); every JVM a user starts keeps the JVM's defaults. No option changes what a query
# computes.
SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
LONG_LIVED_JVM_OPTIONS = "-XX:+UseSerialGC"


def local_spark(app_name: str, *, long_lived: bool = False, **conf: str) -> SparkSession:
    """The session (created, or the running one), with ``conf`` on top of the shared settings.
    ``long_lived``: the session of the pytest process, whose JVM is started with
    LONG_LIVED_JVM_OPTIONS instead of SHORT_LIVED_JVM_OPTIONS."""
    # The sbt test classes hold the Scala processor of the crash harness (tests/crash.py); on the
    # driver's classpath before configure_spark adds the kstreams jar next to them.
    builder = SparkSession.builder.master("local[2]").config(
        "spark.driver.extraClassPath", SCALA_TEST_CLASSES
    )
    builder = configure_spark(builder).appName(app_name)
    settings = {
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        **conf,
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    jvm_options = os.environ.get("SPARK_SUBMIT_OPTS")
    if long_lived and jvm_options == SHORT_LIVED_JVM_OPTIONS:
        # pyspark starts the JVM with this process's environment
        os.environ["SPARK_SUBMIT_OPTS"] = LONG_LIVED_JVM_OPTIONS
    try:
        session = builder.getOrCreate()
    finally:
        if jvm_options is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = jvm_options
    session.sparkContext.setLogLevel("ERROR")
    return session
