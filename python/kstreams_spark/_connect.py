"""The Spark Connect path: what ``_jvm`` does over py4j, done over a Connect session.

A Connect client has no JVM. :class:`RemoteObject` stands for a JVM object on the server: each
method call on it records a call of the same Scala API the classic path calls (message ``Call``
of ``proto/kstreams_connect.proto``), and a DataFrame result becomes a Connect DataFrame whose plan
is that call, which the server's ``KStreamsConnectPlugin`` makes. Errors therefore surface when
the server analyzes the plan; :func:`connect_dataframe` asks for the schema at once, so a bad
argument fails at the call, as in a classic session.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession

from kstreams_spark.errors import KStreamsError

CALL_TYPE_URL = "type.googleapis.com/kstreams.connect.Call"
PLUGIN_CLASS = "org.apache.spark.sql.kstreams.KStreamsConnectPlugin"

# The one call known to give a value: which static methods of a kstreams class do (the JVM says,
# by their return types; PythonAPI.valueMethods), asked once per session and class.
_VALUE_METHODS_CALL = "valueMethods"
_value_methods: dict[tuple[str, str], frozenset[str]] = {}


def _gives_value(spark: SparkSession, class_name: str, method: str) -> bool:
    if method == _VALUE_METHODS_CALL:
        return True
    key = (spark.session_id, class_name)
    if key not in _value_methods:
        asked = RemoteObject(spark, None, "PythonAPI", _VALUE_METHODS_CALL, (class_name,))
        _value_methods[key] = frozenset(asked.value())
    return method in _value_methods[key]


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (Columns, which carry no session, follow
    pyspark's own ``is_remote()`` instead; see ``_jvm.java_column``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


class RemoteDataFrame:
    """A DataFrame argument of a call."""

    __slots__ = ("df",)

    def __init__(self, df: DataFrame) -> None:
        self.df = df


class RemoteColumn:
    """A Column argument of a call."""

    __slots__ = ("column",)

    def __init__(self, column: Column) -> None:
        self.column = column


class RemoteObject:
    """A JVM object on the Connect server: the result of ``method(*args)`` on ``target``, or
    without a target the static methods of ``kstreams.<class_name>``."""

    __slots__ = ("_spark", "_target", "_class_name", "_method", "_args")

    def __init__(self, spark, target=None, class_name: str = "", method: str = "", args=()) -> None:
        self._spark, self._target, self._class_name = spark, target, class_name
        self._method, self._args = method, tuple(args)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)

        def call(*args: Any) -> Any:
            result = RemoteObject(self._spark, self if self._method else None, self._class_name, name, args)
            # a static call may give a value; a call on an object (a KStream...) gives an object
            static = not self._method
            return result.value() if static and _gives_value(self._spark, self._class_name, name) else result

        return call

    def __getitem__(self, key: str) -> RemoteObject:
        # the map PythonAPI.branches returns
        return RemoteObject(self._spark, self, self._class_name, "get", (key,))

    def value(self) -> Any:
        """The call's result, for results that are plain values. The server makes a call each time
        it plans the call's relation, and some calls change things (``repartitionState`` moves a
        checkpoint): so the relation is planned once, by the collect, with no analysis first."""
        with connect_errors():
            rows = connect_dataframe(self, self._spark, analyze=False).collect()
        return json.loads(rows[0][0])

    def to_proto(self, client):
        from kstreams_spark import kstreams_connect_pb2 as pb

        call = pb.Call(class_name=self._class_name, method=self._method)
        if self._target is not None:
            call.target.CopyFrom(self._target.to_proto(client))
        call.args.extend(_value(a, client) for a in self._args)
        return call


def _value(arg: Any, client):
    from kstreams_spark import kstreams_connect_pb2 as pb

    if arg is None:
        return pb.Value(null=True)
    if isinstance(arg, bool):
        return pb.Value(boolean=arg)
    if isinstance(arg, int):
        return pb.Value(long=arg)
    if isinstance(arg, float):
        return pb.Value(double=arg)
    if isinstance(arg, str):
        return pb.Value(string=arg)
    if isinstance(arg, RemoteObject):
        return pb.Value(call=arg.to_proto(client))
    if isinstance(arg, RemoteDataFrame):
        return pb.Value(relation=arg.df._plan.plan(client).SerializeToString())
    if isinstance(arg, RemoteColumn):
        return pb.Value(expression=_expression(arg.column, client))
    if isinstance(arg, list) and all(isinstance(a, RemoteColumn) for a in arg):
        return pb.Value(columns=pb.Expressions(expressions=[_expression(a.column, client) for a in arg]))
    raise KStreamsError(f"cannot send a {type(arg).__name__} to the Spark Connect server")


def _expression(column: Column, client) -> bytes:
    return column._expr.to_plan(client).SerializeToString()


def connect_dataframe(call: RemoteObject, spark, analyze: bool = True) -> DataFrame:
    """The Connect DataFrame whose plan is ``call``, analyzed at once unless ``analyze`` is False
    (see the module's doc)."""
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
    from pyspark.sql.connect.plan import LogicalPlan

    class CallPlan(LogicalPlan):
        def __init__(self) -> None:
            super().__init__(None)

        def plan(self, client):
            relation = self._create_proto_relation()
            relation.extension.type_url = CALL_TYPE_URL
            relation.extension.value = call.to_proto(client).SerializeToString()
            return relation

    df = ConnectDataFrame(CallPlan(), spark)
    if analyze:
        with connect_errors():
            df.schema  # noqa: B018 (analysis on the server: a bad argument fails here)
    return df


@contextlib.contextmanager
def connect_errors() -> Iterator[None]:
    """Turns the server's ``kstreams.KStreamsException`` (and a server without the plugin) into
    :class:`KStreamsError`, as ``_jvm.jvm_errors`` does for py4j."""
    from pyspark.errors.exceptions.connect import SparkConnectException

    try:
        yield
    except SparkConnectException as e:
        # the server's message, without the JVM stack trace str(e) appends
        text = getattr(e, "_message", None) or str(e)
        if "NO_HANDLER_FOR_EXTENSION" in str(e):
            raise KStreamsError(
                "the Spark Connect server does not have the kstreams plugin; start it with the "
                f"kstreams jar on --jars and --conf spark.connect.extensions.relation.classes={PLUGIN_CLASS} "
                "(or run `kstreams-spark connect-server`)"
            ) from None
        marker = "(kstreams.KStreamsException) "
        if marker in text:
            raise KStreamsError(text.split(marker, 1)[1]) from None
        raise
