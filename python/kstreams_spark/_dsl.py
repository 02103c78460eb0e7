"""What the DSL modules (``kstream``, ``grouped``, ``ktable``, ``windows``) share: the argument
types, the interval text for the JVM's parser, and user functions applied once to Columns."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Literal

from pyspark.sql import Column
from pyspark.sql import functions as F

from kstreams_spark._jvm import door, java_column
from kstreams_spark.errors import KStreamsError

Interval = timedelta | str
# What an operator does with a late record (Scala's kstreams.LateRecords, the manual, "Late records")
LateRecords = Literal["forward", "drop", "side_output"]
ColumnOrName = Column | str
ValueFunction = Callable[[Column], Column]
KeyValueFunction = Callable[[Column, Column], Column]


def interval_text(interval: Interval) -> str:
    """The interval as text for the JVM parser (one parser for Python and Scala)."""
    if isinstance(interval, timedelta):
        return f"{interval // timedelta(microseconds=1)} microseconds"
    if isinstance(interval, str):
        return interval
    raise KStreamsError(
        f"interval must be a datetime.timedelta or a string like '10 seconds', "
        f"got {type(interval).__name__} {interval!r}"
    )


def check_intervals(*intervals: Interval | None) -> None:
    """Checks the types of a window's intervals when it is built (None: no grace); the values are
    checked by the Scala factories when the windows are used."""
    for interval in intervals:
        if interval is not None:
            interval_text(interval)


# The Scala join methods, by the kind of join they are (for error messages).
JOIN_KINDS = {"join": "inner", "leftJoin": "left", "outerJoin": "outer"}


def applied(function, what: str, *inputs: Column):
    """A user function as a Java Column: a Column as it is, or a callable applied once to the
    ``inputs`` Columns (building an expression, never running per record)."""
    if isinstance(function, Column):
        return java_column(function, what)
    if not callable(function):
        raise KStreamsError(f"{what} must be a Column or a callable, got {type(function).__name__}")
    try:
        result = function(*inputs)
    except KStreamsError:
        raise
    except Exception as e:
        # the usual cause: code for one record's values (v.upper(), v + "x" on ints, len(v))
        raise KStreamsError(
            f"{what} raised {type(e).__name__}: {e}; it is called once, with Columns, to build a Spark "
            "expression (not once per record with its values): write it with pyspark.sql.functions, "
            "e.g. lambda v: F.upper(v)"
        ) from e
    if not isinstance(result, Column):
        # a str would be read as a column name, and Spark would then suggest kstreams' own columns
        raise KStreamsError(
            f"{what} must return a Column, got {type(result).__name__} {result!r}; for a constant, "
            "return F.lit(...)"
        )
    return java_column(result, f"{what} result")


def joined_column(spark, joiner: Column | KeyValueFunction):
    """The joiner applied to the left and right value Columns, as a Java Column."""
    api = door(spark)
    return applied(joiner, "joiner", F.col(api.leftValueName()), F.col(api.rightValueName()))
