"""Session set-up: the bundled jars on the classpath and the RocksDB state store."""
from __future__ import annotations

import glob
import os

from pyspark.sql import SparkSession

from kstreams_spark._jvm import jar_path

KAFKA_CONNECTOR_DIR = os.path.join(os.path.dirname(__file__), "jars", "kafka")

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"


def configure_spark(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Put the bundled jars on the classpath and use the RocksDB state store.

    The bundled jars are kstreams-spark's and Spark's Kafka connector (``spark.readStream
    .format("kafka")``, see :func:`kafka_connector_jars`). They go on the driver's classpath and
    into ``spark.jars`` (which ships them to executors, also on a cluster); both keep any jars
    already configured.

    >>> spark = configure_spark(SparkSession.builder.master("local[2]")).getOrCreate()
    """
    jars = [jar_path(), *kafka_connector_jars()]
    options = getattr(builder, "_options", {})

    def appended(key: str, sep: str) -> str:
        current = str(options.get(key) or "")
        parts = current.split(sep) if current else []
        return sep.join(parts + [j for j in jars if j not in parts])

    return (
        builder.config("spark.jars", appended("spark.jars", ","))
        .config("spark.driver.extraClassPath", appended("spark.driver.extraClassPath", ":"))
        .config(PROVIDER_KEY, ROCKSDB_PROVIDER)
    )


def kafka_connector_jars() -> list[str]:
    """The bundled Spark Kafka connector jars (``spark-sql-kafka-0-10`` and what it needs beyond
    pyspark's own jars), fetched at build time by ``make install``; empty if they were not.

    >>> any("spark-sql-kafka-0-10" in jar for jar in kafka_connector_jars())
    True
    """
    return sorted(glob.glob(os.path.join(KAFKA_CONNECTOR_DIR, "*.jar")))
