"""Session set-up: the bundled jar on the classpath and the RocksDB state store."""
from __future__ import annotations

import os
from typing import Optional
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from kstreams_spark._jvm import jar_path

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"


def configure_spark(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Put the bundled kstreams-spark jar on the classpath and use the RocksDB state store.

    The jar goes on the driver's classpath and into ``spark.jars`` (which ships it to executors,
    also on a cluster); both keep any jars already configured, also those of ``spark-submit
    --jars``. Under spark-submit the driver's JVM is already running, so pass the jar there too
    (``--jars``) for the driver to see it.

    >>> spark = configure_spark(SparkSession.builder.master("local[2]")).getOrCreate()
    """
    jar = jar_path()
    options = getattr(builder, "_options", {})

    def appended(key: str, sep: str) -> str:
        current = options.get(key) or _submitted_value(key)
        if not current:
            return jar
        # spark-submit's --jars arrive as file: URIs
        parts = [urlparse(p).path if p.startswith("file:") else p for p in str(current).split(sep)]
        return current if jar in parts else f"{current}{sep}{jar}"

    return (
        builder.config("spark.jars", appended("spark.jars", ","))
        .config("spark.driver.extraClassPath", appended("spark.driver.extraClassPath", ":"))
        .config(PROVIDER_KEY, ROCKSDB_PROVIDER)
    )


def _submitted_value(key: str) -> Optional[str]:
    """The value spark-submit gave ``key`` (``--jars`` is ``spark.jars``), so that configure_spark
    adds to it instead of replacing it; None when Python started without spark-submit."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # set only by spark-submit's PythonRunner
        return None
    from pyspark import SparkContext

    SparkContext._ensure_initialized()  # connects to the JVM spark-submit started
    conf = SparkContext._jvm.SparkConf(True)  # its defaults: spark-submit's --jars and --conf
    return conf.get(key) if conf.contains(key) else None
