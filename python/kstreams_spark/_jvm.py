"""The narrow bridge to the JVM: the one entry object and the translation of its errors."""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Iterator

from pyspark.sql import SparkSession

from kstreams_spark.errors import KStreamsError

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


def python_api(spark: SparkSession):
    """The JVM object ``kstreams.PythonAPI`` of ``spark``'s JVM, with a clear error if absent."""
    jvm = spark.sparkContext._jvm
    api = jvm.kstreams.PythonAPI
    # py4j returns a JavaPackage (not a JavaClass) when the class is not on the classpath.
    if type(api).__name__ == "JavaPackage":
        raise KStreamsError(
            "the kstreams-spark jar is not on this session's classpath; create the session with "
            "kstreams_spark.configure_spark(SparkSession.builder).getOrCreate() "
            f"(or pass --jars {jar_path()} to spark-submit)"
        )
    return api


@contextlib.contextmanager
def jvm_errors() -> Iterator[None]:
    """Turns the JVM's ``kstreams.KStreamsException`` into :class:`KStreamsError`."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import AnalysisException

    try:
        yield
    except AnalysisException as e:
        # a user's Column expression that does not resolve (pyspark already converted it)
        first = (e.getMessage() or str(e)).strip().splitlines()[0]
        raise KStreamsError(f"Spark could not resolve an expression: {first}") from None
    except Py4JJavaError as e:
        message = _kstreams_message(e.java_exception)
        if message is not None:
            raise KStreamsError(message) from None
        if "AnalysisException" in e.java_exception.getClass().getName():
            # a user's Column expression that does not resolve: Spark's own message says why
            first = str(e.java_exception.getMessage()).strip().splitlines()[0]
            raise KStreamsError(f"Spark could not resolve an expression: {first}") from None
        raise


def _kstreams_message(throwable) -> str | None:
    """The message of the first ``KStreamsException`` in a Java cause chain, if any."""
    seen = 0
    while throwable is not None and seen < 20:
        if throwable.getClass().getName() == "kstreams.KStreamsException":
            return str(throwable.getMessage())
        throwable = throwable.getCause()
        seen += 1
    return None
