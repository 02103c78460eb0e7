"""Session set-up: the bundled jar on the classpath and the RocksDB state store."""
from __future__ import annotations

from pyspark.sql import SparkSession

from kstreams_spark._jvm import jar_path

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"


def configure_spark(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Put the bundled kstreams-spark jar on the classpath and use the RocksDB state store.

    The jar goes on the driver's classpath and into ``spark.jars`` (which ships it to executors,
    also on a cluster); both keep any jars already configured.

    >>> spark = configure_spark(SparkSession.builder.master("local[2]")).getOrCreate()
    """
    jar = jar_path()
    options = getattr(builder, "_options", {})

    def appended(key: str, sep: str) -> str:
        current = options.get(key)
        if not current:
            return jar
        parts = str(current).split(sep)
        return current if jar in parts else f"{current}{sep}{jar}"

    return (
        builder.config("spark.jars", appended("spark.jars", ","))
        .config("spark.driver.extraClassPath", appended("spark.driver.extraClassPath", ":"))
        .config(PROVIDER_KEY, ROCKSDB_PROVIDER)
    )
