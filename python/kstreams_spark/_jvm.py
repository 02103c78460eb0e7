"""The narrow bridge to the JVM: the only module that speaks py4j.

Python's ``KStream``, ``KTable`` and the config objects call the Scala API itself (the public
``kstreams`` types, plus ``kstreams.PythonAPI`` for what py4j cannot express) through
:class:`JavaObject` handles, whose every call translates the JVM's errors in one place
(:func:`jvm_errors`), and convert values with the functions below.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession

from kstreams_spark._connect import (
    RemoteColumn,
    RemoteDataFrame,
    RemoteObject,
    connect_dataframe,
    is_connect,
)
from kstreams_spark._jars import jar_path
from kstreams_spark._query_errors import install_classic_hook, install_connect_hook, message_in_chain
from kstreams_spark.errors import KStreamsError

# an action or query that a kstreams check stops raises our message first (see _query_errors)
install_classic_hook()


class JavaObject:
    """A JVM object: calling a method runs it under :func:`jvm_errors` and returns a JVM object
    as another ``JavaObject``, a Java array or list as a list, a Java map as a dict, and plain
    values as they are; ``JavaObject`` arguments are unwrapped."""

    __slots__ = ("_obj",)

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __getattr__(self, name: str):
        method = getattr(self._obj, name)

        def call(*args: Any) -> Any:
            with jvm_errors():
                result = method(*(a._obj if isinstance(a, JavaObject) else a for a in args))
            return _wrapped(result)

        return call


def _wrapped(value: Any) -> Any:
    from py4j.java_collections import JavaArray, JavaList, JavaMap
    from py4j.java_gateway import JavaObject as Py4jObject

    if isinstance(value, (JavaArray, JavaList)):
        return [_wrapped(v) for v in value]
    if isinstance(value, JavaMap):
        return {k: _wrapped(v) for k, v in value.items()}
    return JavaObject(value) if isinstance(value, Py4jObject) else value


def door(spark: SparkSession) -> JavaObject:
    """``kstreams.PythonAPI`` in ``spark``'s JVM, with a clear error if the jar is absent (over
    Spark Connect: on the server, see ``kstreams_spark._connect``)."""
    if is_connect(spark):
        install_connect_hook()
        return RemoteObject(spark, class_name="PythonAPI")
    return JavaObject(_jvm_package(spark).PythonAPI)


def expression_problem(text: str, columns: Sequence[str]) -> str | None:
    """Why ``text`` cannot be a Spark SQL expression over ``columns``, or None when it may be (or
    when no JVM could tell), said by Spark's own parser in a JVM started for it alone, without
    Spark (``kstreams.internal.plan.ExpressionText``): about 1.5 s, where a Spark driver takes 2 s
    before it runs anything and a session 30 s. The CLI checks ``--id`` with it before Spark
    starts; Spark's analyzer reads the expression again in any case."""
    import subprocess

    import pyspark

    java_home = os.environ.get("JAVA_HOME")  # the java that spark-submit would run
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    spark_home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    if not java:
        return None  # Spark's own start says that no Java is found
    command = [
        java,
        # a short-lived JVM: the client compiler and serial GC start fastest; Spark's logging off
        *("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dlog4j2.level=OFF"),
        # Most of its time is loading Spark's parser classes, and a third of that is verifying
        # their bytecode: skipped, as these are the installed pyspark's and kstreams' own jars and
        # the process only reads a string (2.0-2.4 s -> 1.3-1.7 s for a syntax error here). A JDK
        # without the flag ignores it.
        *("-XX:+IgnoreUnrecognizedVMOptions", "-XX:+UnlockDiagnosticVMOptions"),
        *("-XX:-BytecodeVerificationRemote", "-XX:-UsePerfData"),
        *("-cp", os.pathsep.join([os.path.join(spark_home, "jars", "*"), jar_path()])),
        "kstreams.internal.plan.ExpressionText",
        text,
        *columns,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    said = done.stdout.strip()
    return said if done.returncode == 1 and said else None


def kstreams_class(spark: SparkSession, name: str) -> JavaObject:
    """The public Scala type ``kstreams.<name>`` (its companion's factories), e.g. ``TimeWindows``."""
    if is_connect(spark):
        return RemoteObject(spark, class_name=name)
    return JavaObject(getattr(_jvm_package(spark), name))


def latency_probe(spark: SparkSession) -> JavaObject:
    """The demo's latency probe in the driver JVM (``kstreams.internal.demo.LatencyProbe``, used by
    ``kstreams-spark demo --bootstrap-servers``); a classic session only."""
    return JavaObject(_jvm_package(spark).internal.demo.LatencyProbe)


def has_kstreams_jar(context) -> bool:
    """Whether the JVM of the SparkContext ``context`` has the kstreams jar on its classpath. (py4j
    gives a JavaPackage, not a JavaClass, for a class that is not there.)"""
    return type(context._jvm.kstreams.PythonAPI).__name__ != "JavaPackage"


def submitted_setting(key: str) -> str | None:
    """The value spark-submit's ``--conf`` (or ``--jars``: ``spark.jars``) gave ``key`` in the JVM
    it started for this Python, or None."""
    from pyspark import SparkContext

    SparkContext._ensure_initialized()  # connects to the JVM spark-submit started
    conf = SparkContext._jvm.SparkConf(True)  # its defaults: spark-submit's --jars and --conf
    return conf.get(key) if conf.contains(key) else None


def _jvm_package(spark: SparkSession):
    package = spark.sparkContext._jvm.kstreams
    if not has_kstreams_jar(spark.sparkContext):
        raise KStreamsError(
            "the kstreams-spark jar is not on this session's classpath; create the session with "
            "kstreams_spark.configure_spark(SparkSession.builder).getOrCreate(), with no other session "
            f"running in this process (stop it first), or pass --jars {jar_path()} to spark-submit"
        )
    return package


# ---- conversions between Python and JVM values, in one place


def java_dataframe(df: DataFrame) -> Any:
    """The JVM Dataset behind a classic pyspark DataFrame (a Connect DataFrame's plan)."""
    if is_connect(df.sparkSession):
        return RemoteDataFrame(df)
    return df._jdf


def java_session(spark: SparkSession) -> Any:
    """The JVM SparkSession behind a classic pyspark session."""
    return spark._jsparkSession


def python_dataframe(jdf: JavaObject, spark: SparkSession) -> DataFrame:
    """A pyspark DataFrame over the JVM Dataset ``jdf``."""
    if isinstance(jdf, RemoteObject):
        return connect_dataframe(jdf, spark)
    return DataFrame(jdf._obj, spark)


def java_column(column: Column | str, what: str) -> Any:
    """A Column or a column name as a JVM Column; ``what`` names the argument in the error. In
    Connect mode (``pyspark.sql.utils.is_remote()``, which also decides what ``F.col`` builds) the
    Column's expression, for the server."""
    from pyspark.sql.utils import is_remote

    if not isinstance(column, (str, Column)):
        raise KStreamsError(
            f"{what} must be a column name or a Column, got {type(column).__name__} {column!r}"
        )
    if is_remote():
        from pyspark.sql import functions as F

        return RemoteColumn(F.col(column) if isinstance(column, str) else column)
    from pyspark.sql.classic.column import _to_java_column

    return _to_java_column(column)


def java_columns(spark: SparkSession, columns: Sequence[Any]) -> Any:
    """JVM Columns as a Java array."""
    if is_connect(spark):
        return list(columns)
    gateway = spark.sparkContext._gateway
    array = gateway.new_array(gateway.jvm.org.apache.spark.sql.Column, len(columns))
    for i, c in enumerate(columns):
        array[i] = c
    return array


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
        message = message_in_chain(e.java_exception)
        if message is not None:
            raise KStreamsError(message) from None
        if "AnalysisException" in e.java_exception.getClass().getName():
            # a user's Column expression that does not resolve: Spark's own message says why
            first = str(e.java_exception.getMessage()).strip().splitlines()[0]
            raise KStreamsError(f"Spark could not resolve an expression: {first}") from None
        raise
