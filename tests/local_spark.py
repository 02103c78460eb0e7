"""The local Spark session the tests, the Kafka crash job and the docstring examples run on: real
Spark, ``local[2]``, 2 shuffle partitions, the RocksDB state store (``configure_spark``), UTC."""

from __future__ import annotations

from kstreams_spark import configure_spark
from pyspark.sql import SparkSession


def local_spark(app_name: str, **conf: str) -> SparkSession:
    """The session (created, or the running one), with ``conf`` on top of the shared settings."""
    builder = configure_spark(SparkSession.builder.master("local[2]")).appName(app_name)
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
