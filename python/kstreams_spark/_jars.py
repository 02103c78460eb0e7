"""The jars the package ships: kstreams-spark's own and Spark's Kafka connector with its
dependencies (``make jar`` and ``make install`` put them in ``jars/``)."""

from __future__ import annotations

import glob
import os

from kstreams_spark.errors import KStreamsError

KAFKA_CONNECTOR_DIR = os.path.join(os.path.dirname(__file__), "jars", "kafka")
_JAR_DIR = os.path.join(os.path.dirname(__file__), "jars")


def jar_path() -> str:
    """Path of the bundled kstreams-spark jar.

    >>> jar_path().endswith(".jar")
    True
    """
    jars = sorted(glob.glob(os.path.join(_JAR_DIR, "kstreams-spark_*.jar")))
    if not jars:
        raise KStreamsError(
            f"the kstreams-spark jar is missing from {_JAR_DIR}; build it with `make jar` "
            "(a wheel or `make install` includes it)"
        )
    return jars[-1]


def kafka_connector_jars() -> list[str]:
    """The bundled Spark Kafka connector jars (``spark-sql-kafka-0-10`` and what it needs beyond
    pyspark's own jars), fetched at build time by ``make install``; empty if they were not.

    >>> any("spark-sql-kafka-0-10" in jar for jar in kafka_connector_jars())
    True
    """
    return sorted(glob.glob(os.path.join(KAFKA_CONNECTOR_DIR, "*.jar")))
