"""The local Spark session the tests, the crash job and the docstring examples run on: real
Spark, ``local[2]``, 2 shuffle partitions, the RocksDB state store (``configure_spark``), UTC."""

from __future__ import annotations

import os

from kstreams_spark import configure_spark
from pyspark.sql import SparkSession

SCALA_TEST_CLASSES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jvm", "target", "scala-2.13", "test-classes"
)


def local_spark(app_name: str, **conf: str) -> SparkSession:
    """The session (created, or the running one), with ``conf`` on top of the shared settings."""
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
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
