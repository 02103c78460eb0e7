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

    def deduplicate_by_sequence(self, sequence: ColumnOrName) -> "KStream":
        """Forward a record only if its sequence number (an integer column or expression) is
        greater than the highest forwarded on its input partition; null passes (seed 001).

        >>> KStream(df).deduplicate_by_sequence("seq").df
        """
        jseq = _java_column(sequence, "sequence")
        return self._wrap(lambda: self._api.deduplicateBySequence(self._jks, jseq))

    def group_by_key(self) -> "KGroupedStream":
        """Group records by key, for windowed operators.

        >>> ks.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace("10 s")).distinct()
        """
        return KGroupedStream(self)

    def process(
        self,
        supplier,
        stores=(),
        name: Optional[str] = None,
        wall_clock: bool = False,
        key_type=None,
        value_type=None,
    ) -> "KStream":
        """Run a Python :class:`~kstreams_spark.processor.Processor` (KIP-28) on each input
        partition, in arrival order, with the declared key-value stores (kept in Spark's
        checkpointed state store). The result holds what it forwarded: key and value (the input's
        column types, or ``key_type`` / ``value_type``), ``timestamp``, ``partition``, and
        ``offset`` (None when forwarded from a punctuation).

        ``supplier`` is the processor class or a function returning a new processor; ``name``
        (default: the class name) appears in errors; ``wall_clock=True`` enables wall-clock
        punctuation (Spark processing-time timers: a micro-batch every trigger interval).

        >>> KStream(df).process(Sum, stores=[Stores.key_value("sums")]).df
        """
        from kstreams_spark import processor

        result = processor.process(self, supplier, stores, name, wall_clock, key_type, value_type)
        return KStream(result, **self._names)

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


def _java_column(id: ColumnOrName, what: str = "id"):
    from pyspark.sql.classic.column import _to_java_column

    if isinstance(id, (str, Column)):
        return _to_java_column(id)
    raise KStreamsError(
        f"{what} must be a column name or a Column, got {type(id).__name__} {id!r}"
    )


class TimeWindows:
    """Epoch-aligned tumbling windows ``[start, start + size)``; a record whose window closed
    (``end <= stream time - grace``) is late.

    >>> TimeWindows.of_size_and_grace(timedelta(seconds=10), "2 seconds")
    """

    def __init__(self, size: Interval, grace: Optional[Interval]) -> None:
        self.size, self.grace = size, grace

    @staticmethod
    def of_size_with_no_grace(size: Interval) -> "TimeWindows":
        return TimeWindows(size, None)

    @staticmethod
    def of_size_and_grace(size: Interval, grace: Interval) -> "TimeWindows":
        return TimeWindows(size, grace)

    def __repr__(self) -> str:
        return f"TimeWindows(size={self.size!r}, grace={self.grace!r})"


class SessionWindows:
    """Session windows: records of a key within ``gap`` (inclusive) of each other form one session.

    >>> SessionWindows.of_inactivity_gap_with_no_grace(timedelta(minutes=5))
    """

    def __init__(self, gap: Interval, grace: Optional[Interval]) -> None:
        self.gap, self.grace = gap, grace

    @staticmethod
    def of_inactivity_gap_with_no_grace(gap: Interval) -> "SessionWindows":
        return SessionWindows(gap, None)

    @staticmethod
    def of_inactivity_gap_and_grace(gap: Interval, grace: Interval) -> "SessionWindows":
        return SessionWindows(gap, grace)

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.gap!r}, grace={self.grace!r})"


class KGroupedStream:
    """A :class:`KStream` grouped by key (``KStream.group_by_key()``)."""

    def __init__(self, stream: KStream) -> None:
        self._stream = stream

    def windowed_by(self, windows: Union[TimeWindows, SessionWindows]) -> "WindowedKStream":
        """Window the grouped stream by tumbling or session windows."""
        if not isinstance(windows, (TimeWindows, SessionWindows)):
            raise KStreamsError(
                f"windowed_by takes TimeWindows or SessionWindows, got {type(windows).__name__}"
            )
        return WindowedKStream(self._stream, windows)


class WindowedKStream:
    """A stream grouped by key and window."""

    def __init__(self, stream: KStream, windows: Union[TimeWindows, SessionWindows]) -> None:
        self._stream, self._windows = stream, windows

    def distinct(self) -> KStream:
        """The first record of each (key, window), with a ``window`` column (``start``, ``end``).

        Tumbling: one record per key and window. Session: the record that opens a session, with
        ``window = (t, t)``. Null keys pass with a null window; records of closed windows are
        dropped as late and counted (``late_dropped``).

        >>> ks.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace("10 s")).distinct().df
        """
        s, w = self._stream, self._windows
        grace = None if w.grace is None else _interval(w.grace)
        if isinstance(w, TimeWindows):
            return s._wrap(lambda: s._api.tumblingDistinct(s._jks, _interval(w.size), grace))
        return s._wrap(lambda: s._api.sessionDistinct(s._jks, _interval(w.gap), grace))
