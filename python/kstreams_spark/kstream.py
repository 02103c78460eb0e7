"""``KStream``: Kafka-Streams-like operators over a Spark DataFrame.

Every method delegates to the Scala core through ``kstreams.PythonAPI``; nothing here decides which
record is forwarded.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Optional, Union

from pyspark.sql import Column, DataFrame

from kstreams_spark._jvm import jvm_errors, python_api
from kstreams_spark.errors import KStreamsError

Interval = Union[timedelta, str]
ColumnOrName = Union[Column, str]


class KStream:
    """A stream of Kafka-style records over a streaming or batch DataFrame.

    Column names default to those of Spark's Kafka source (``key``, ``value``, ``timestamp``,
    ``partition``, ``offset``). Without a ``partition`` column the input is one partition; without
    an ``offset`` column, order inside a micro-batch is timestamp order. Pass ``partition=None`` or
    ``offset=None`` to ignore such a column.

    >>> ks = KStream(df, key="user", timestamp="event_time")
    >>> deduped = ks.deduplicate_by_key(timedelta(seconds=10)).df
    """

    def __init__(
        self,
        df: DataFrame,
        key: str = "key",
        value: str = "value",
        timestamp: str = "timestamp",
        partition: Optional[str] = "partition",
        offset: Optional[str] = "offset",
        on_null_timestamp: str = "fail",
    ) -> None:
        if not isinstance(df, DataFrame):
            raise KStreamsError(f"KStream needs a pyspark DataFrame, got {type(df).__name__}")
        self._df = df
        self._names = dict(
            key=key, value=value, timestamp=timestamp, partition=partition, offset=offset,
            on_null_timestamp=on_null_timestamp,
        )
        self._api = python_api(df.sparkSession)
        with jvm_errors():
            self._jks = self._api.kstream(
                df._jdf, key, value, timestamp, partition, offset, on_null_timestamp
            )

    @property
    def df(self) -> DataFrame:
        """The stream's DataFrame (after the operators applied so far)."""
        return self._df

    def deduplicate_by_key(self, interval: Interval) -> "KStream":
        """Drop a record when one with the same key, on the same input partition, with a timestamp
        at most ``interval`` away was forwarded before (KIP-655 ``deduplicateByKey``).

        >>> KStream(df).deduplicate_by_key(timedelta(seconds=10)).df
        """
        return self._wrap(lambda: self._api.deduplicateByKey(self._jks, _interval(interval)))

    def deduplicate_by_key_value(self, id: ColumnOrName, interval: Interval) -> "KStream":
        """Like :meth:`deduplicate_by_key`, with the dedup key (key, ``id``).

        >>> KStream(df).deduplicate_by_key_value("event_id", "1 minute").df
        """
        jid = _java_column(id)
        return self._wrap(
            lambda: self._api.deduplicateByKeyValue(self._jks, jid, _interval(interval))
        )

    def deduplicate(self, id: ColumnOrName, interval: Interval) -> "KStream":
        """Drop a record when one with the same ``id`` on *any* partition, with a timestamp at most
        ``interval`` away, was forwarded before (one global store).

        >>> KStream(df).deduplicate(F.get_json_object("value", "$.id"), "1 minute").df
        """
        jid = _java_column(id)
        return self._wrap(lambda: self._api.deduplicate(self._jks, jid, _interval(interval)))

    def _wrap(self, call) -> "KStream":
        with jvm_errors():
            jdf = call()
        result = DataFrame(jdf, self._df.sparkSession)
        return KStream(result, **self._names)

    def __repr__(self) -> str:
        return f"KStream({', '.join(f'{k}={v!r}' for k, v in self._names.items())})"


def _interval(interval: Interval) -> str:
    """The interval as text for the JVM parser (one parser for Python and Scala)."""
    if isinstance(interval, timedelta):
        return f"{interval // timedelta(microseconds=1)} microseconds"
    if isinstance(interval, str):
        return interval
    raise KStreamsError(
        f"interval must be a datetime.timedelta or a string like '10 seconds', "
        f"got {type(interval).__name__} {interval!r}"
    )


def _java_column(id: ColumnOrName):
    from pyspark.sql.classic.column import _to_java_column

    if isinstance(id, (str, Column)):
        return _to_java_column(id)
    raise KStreamsError(
        f"id must be a column name or a Column, got {type(id).__name__} {id!r}"
    )
