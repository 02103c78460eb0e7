"""``KStream``: Kafka-Streams-like operators over a Spark DataFrame.

Every method delegates to the Scala core through ``kstreams.PythonAPI``; nothing here decides which
record is forwarded.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, DataFrameWriter, Row
from pyspark.sql import functions as F
from pyspark.sql.functions import udf
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.types import BooleanType

from kstreams_spark._jvm import jvm_errors, python_api
from kstreams_spark.errors import KStreamsError

if TYPE_CHECKING:
    from kstreams_spark.ktable import KTable

Interval = timedelta | str
ColumnOrName = Column | str
ValueFunction = Callable[[Column], Column]
KeyValueFunction = Callable[[Column, Column], Column]


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
        partition: str | None = "partition",
        offset: str | None = "offset",
        on_null_timestamp: str = "fail",
    ) -> None:
        if not isinstance(df, DataFrame):
            raise KStreamsError(f"KStream needs a pyspark DataFrame, got {type(df).__name__}")
        self._df = df
        self._names = dict(
            key=key,
            value=value,
            timestamp=timestamp,
            partition=partition,
            offset=offset,
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

    def deduplicate_by_key(self, interval: Interval) -> KStream:
        """Drop a record when one with the same key, on the same input partition, with a timestamp
        at most ``interval`` away was forwarded before (KIP-655 ``deduplicateByKey``).

        >>> KStream(df).deduplicate_by_key(timedelta(seconds=10)).df
        """
        return self._wrap(lambda: self._api.deduplicateByKey(self._jks, _interval(interval)))

    def deduplicate_by_key_value(self, id: ColumnOrName, interval: Interval) -> KStream:
        """Like :meth:`deduplicate_by_key`, with the dedup key (key, ``id``).

        >>> KStream(df).deduplicate_by_key_value("event_id", "1 minute").df
        """
        jid = _java_column(id)
        return self._wrap(lambda: self._api.deduplicateByKeyValue(self._jks, jid, _interval(interval)))

    def deduplicate(self, id: ColumnOrName, interval: Interval) -> KStream:
        """Drop a record when one with the same ``id`` on *any* partition, with a timestamp at most
        ``interval`` away, was forwarded before (one global store).

        >>> KStream(df).deduplicate(F.get_json_object("value", "$.id"), "1 minute").df
        """
        jid = _java_column(id)
        return self._wrap(lambda: self._api.deduplicate(self._jks, jid, _interval(interval)))

    def deduplicate_by_sequence(self, sequence: ColumnOrName) -> KStream:
        """Forward a record only if its sequence number (an integer column or expression) is
        greater than the highest forwarded on its input partition; null passes (spec section 4).

        >>> KStream(df).deduplicate_by_sequence("seq").df
        """
        jseq = _java_column(sequence, "sequence")
        return self._wrap(lambda: self._api.deduplicateBySequence(self._jks, jseq))

    def group_by_key(self) -> KGroupedStream:
        """Group records by key, for aggregations and windowed operators.

        >>> ks.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace("10 s")).distinct()
        >>> ks.group_by_key().count().df   # key, value (the count), timestamp
        """
        return KGroupedStream(self)

    def group_by(self, key_selector: KeyValueFunction) -> KGroupedStream:
        """Group records by a new key, ``key_selector(key, value)`` (``select_key`` then
        ``group_by_key``).

        >>> ks.group_by(lambda k, v: F.get_json_object(v, "$.user")).count()
        """
        return self.select_key(key_selector).group_by_key()

    # ---- stateless operators: every one keeps the input's timestamp (spec section 5). User
    # functions are Columns, or Python callables given the key/value Columns and returning Columns;
    # they are called once to build a Spark expression, never per record.

    def filter(self, predicate: Column | KeyValueFunction) -> KStream:
        """Keep the records for which ``predicate`` is true (null counts as false).

        >>> ks.filter(lambda k, v: v.startswith("a"))
        """
        jpredicate = self._column(predicate, "predicate", 2)
        return self._wrap_jvm(lambda: self._api.filter(self._jks, jpredicate))

    def filter_not(self, predicate: Column | KeyValueFunction) -> KStream:
        """Keep the records for which ``predicate`` is false or null.

        >>> ks.filter_not(F.col("value").isNull())
        """
        jpredicate = self._column(predicate, "predicate", 2)
        return self._wrap_jvm(lambda: self._api.filterNot(self._jks, jpredicate))

    def map_values(self, mapper: Column | ValueFunction) -> KStream:
        """Replace the value with ``mapper(value)``.

        >>> ks.map_values(lambda v: F.upper(v))
        """
        jvalue = self._column(mapper, "mapper", 1)
        return self._wrap_jvm(lambda: self._api.mapValues(self._jks, jvalue))

    def select_key(self, key_selector: Column | KeyValueFunction) -> KStream:
        """Replace the key with ``key_selector(key, value)``.

        >>> ks.select_key(lambda k, v: F.get_json_object(v, "$.user"))
        """
        jkey = self._column(key_selector, "key_selector", 2)
        return self._wrap_jvm(lambda: self._api.selectKey(self._jks, jkey))

    def map(self, mapper: Callable[[Column, Column], tuple[Column, Column]]) -> KStream:
        """Replace key and value with the pair ``mapper(key, value)``.

        >>> ks.map(lambda k, v: (v, k))
        """
        if not callable(mapper):
            raise KStreamsError(f"map's mapper must be a callable, got {type(mapper).__name__}")
        pair = mapper(*self._inputs(2))
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(c, Column) for c in pair)):
            raise KStreamsError(f"map's mapper must return a (key, value) pair of Columns, got {pair!r}")
        jkey, jvalue = (_java_column(c, "mapper result") for c in pair)
        return self._wrap_jvm(lambda: self._api.map(self._jks, jkey, jvalue))

    def flat_map(self, mapper: Column | KeyValueFunction) -> KStream:
        """Replace each record by the records of ``mapper(key, value)``: an array of structs with
        fields ``key`` and ``value``; each keeps the input's other columns and timestamp.

        >>> ks.flat_map(lambda k, v: F.array(F.struct(k.alias("key"), v.alias("value"))))
        """
        jpairs = self._column(mapper, "mapper", 2)
        return self._wrap_jvm(lambda: self._api.flatMap(self._jks, jpairs))

    def flat_map_values(self, mapper: Column | ValueFunction) -> KStream:
        """Replace each record by one record per element of the array ``mapper(value)``.

        >>> ks.flat_map_values(lambda v: F.split(v, " "))
        """
        jvalues = self._column(mapper, "mapper", 1)
        return self._wrap_jvm(lambda: self._api.flatMapValues(self._jks, jvalues))

    def peek(self, action: Callable[[Row], None]) -> KStream:
        """Call ``action(row)`` on each record as it passes, for side effects such as logging; the
        records are unchanged. Unlike the other operators this runs Python per record (a Python
        UDF), so keep it for debugging.

        >>> ks.peek(lambda row: print(row.key, row.value))
        """
        if not callable(action):
            raise KStreamsError(f"peek's action must be callable, got {type(action).__name__}")

        def call(row: Row) -> bool:
            action(row)
            return True

        peeked = udf(call, BooleanType()).asNondeterministic()
        names = [F.col(_quote(c)) for c in self._df.columns]
        jcall = _java_column(peeked(F.struct(*names)), "peek")
        return self._wrap_jvm(lambda: self._api.filter(self._jks, jcall))

    def split(self) -> BranchedKStream:
        """Split the stream by predicates: a record goes to the first branch whose predicate is
        true, else to the default branch.

        >>> branches = ks.split().branch(F.col("v") > 0, "pos").default_branch("rest")
        >>> branches["pos"].df
        """
        return BranchedKStream(self, [])

    def merge(self, other: KStream) -> KStream:
        """Both streams' records (the DataFrames must have the same columns).

        >>> KStream(a).merge(KStream(b))
        """
        if not isinstance(other, KStream):
            raise KStreamsError(f"merge takes a KStream, got {type(other).__name__}")
        return self._wrap_jvm(lambda: self._api.merge(self._jks, other._jks))

    def to(self, topic: str, **options: str) -> DataStreamWriter | DataFrameWriter:
        """A writer of the records to the Kafka topic ``topic``: ``key`` and ``value`` as strings
        or bytes (other types as JSON) and a header ``kstreams.timestamp`` with the record's
        timestamp in epoch milliseconds (Spark's Kafka sink cannot set the record timestamp).
        ``options`` go to the writer (e.g. ``kafka.bootstrap.servers``); call ``start()``.

        >>> ks.to("out", **{"kafka.bootstrap.servers": "host:9092"}).option("checkpointLocation", d).start()
        """
        with jvm_errors():
            records = DataFrame(self._api.kafkaRecords(self._jks, topic), self._df.sparkSession)
        writer = records.writeStream if records.isStreaming else records.write
        return writer.format("kafka").options(**options)

    def to_table(self) -> KTable:
        """The stream read as a table: the latest value per key, a null value deletes; updates
        that change nothing are dropped and counted as ``idempotent-updates-dropped`` (KIP-557).

        >>> ks.to_table().df   # the table's update stream: key, value, timestamp
        """
        from kstreams_spark.ktable import KTable

        with jvm_errors():
            return KTable(self._api.toTable(self._jks), self._df.sparkSession)

    def join(self, other: KStream, joiner: Column | KeyValueFunction, windows: JoinWindows) -> KStream:
        """Windowed inner join: records with equal keys and ``|t1 - t2| <= time difference`` give
        ``joiner(this_value, other_value)`` at ``max(t1, t2)``; the result has ``key``, ``value``,
        ``timestamp``.

        >>> left.join(right, lambda l, r: F.concat(l, F.lit("+"), r),
        ...           JoinWindows.of_time_difference_with_no_grace("100 milliseconds"))
        """
        return self._stream_join(other, joiner, windows, "inner")

    def left_join(self, other: KStream, joiner: Column | KeyValueFunction, windows: JoinWindows) -> KStream:
        """:meth:`join`, plus each record of this stream that never matched, with a null other
        value, once its window has closed (at its own timestamp)."""
        return self._stream_join(other, joiner, windows, "left")

    def outer_join(self, other: KStream, joiner: Column | KeyValueFunction, windows: JoinWindows) -> KStream:
        """:meth:`join`, plus the unmatched records of both streams once their windows closed."""
        return self._stream_join(other, joiner, windows, "outer")

    def _stream_join(self, other: KStream, joiner, windows: JoinWindows, kind: str) -> KStream:
        if not isinstance(other, KStream):
            raise KStreamsError(f"{kind} join takes a KStream, got {type(other).__name__}")
        if not isinstance(windows, JoinWindows):
            raise KStreamsError(f"{kind} join takes JoinWindows, got {type(windows).__name__}")
        jjoined = joined_column(self._api, joiner)
        grace = None if windows.grace is None else _interval(windows.grace)
        return self._wrap_jvm(
            lambda: self._api.streamJoin(
                self._jks, other._jks, jjoined, kind, _interval(windows.time_difference), grace
            )
        )

    def _column(self, function, what: str, arity: int):
        """``function`` (a Column, or a callable given the key/value Columns) as a Java Column."""
        return _applied(function, what, *self._inputs(arity))

    def _inputs(self, arity: int) -> tuple:
        """The Columns a user function receives: (key, value), or (value,)."""
        key, value = F.col(_quote(self._names["key"])), F.col(_quote(self._names["value"]))
        return (key, value) if arity == 2 else (value,)

    def _wrap_jvm(self, call) -> KStream:
        with jvm_errors():
            jks = call()
        return KStream._from_jvm(jks, self._df.sparkSession)

    @staticmethod
    def _from_jvm(jks, spark) -> KStream:
        api = python_api(spark)
        key, value, timestamp, partition, offset, on_null = api.columnNames(jks)
        stream = KStream.__new__(KStream)
        stream._df = DataFrame(jks.df(), spark)
        stream._names = dict(
            key=key,
            value=value,
            timestamp=timestamp,
            partition=partition,
            offset=offset,
            on_null_timestamp=on_null,
        )
        stream._api = api
        stream._jks = jks
        return stream

    def process(
        self,
        supplier,
        stores=(),
        name: str | None = None,
        wall_clock: bool = False,
        key_type=None,
        value_type=None,
    ) -> KStream:
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

    def _wrap(self, call) -> KStream:
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


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _applied(function, what: str, *inputs: Column):
    """A user function as a Java Column: a Column as it is, or a callable applied once to the
    ``inputs`` Columns (building an expression, never running per record)."""
    if isinstance(function, Column):
        return _java_column(function, what)
    if not callable(function):
        raise KStreamsError(f"{what} must be a Column or a callable, got {type(function).__name__}")
    return _java_column(function(*inputs), f"{what} result")


def joined_column(api, joiner: Column | KeyValueFunction):
    """The joiner applied to the left and right value Columns, as a Java Column."""
    return _applied(joiner, "joiner", F.col(api.leftValueName()), F.col(api.rightValueName()))


def _java_column(id: ColumnOrName, what: str = "id"):
    from pyspark.sql.classic.column import _to_java_column

    if isinstance(id, (str, Column)):
        return _to_java_column(id)
    raise KStreamsError(f"{what} must be a column name or a Column, got {type(id).__name__} {id!r}")


class TimeWindows:
    """Epoch-aligned tumbling windows ``[start, start + size)``; a record whose window closed
    (``end <= stream time - grace``) is late.

    >>> TimeWindows.of_size_and_grace(timedelta(seconds=10), "2 seconds")
    """

    def __init__(self, size: Interval, grace: Interval | None) -> None:
        self.size, self.grace = size, grace

    @staticmethod
    def of_size_with_no_grace(size: Interval) -> TimeWindows:
        return TimeWindows(size, None)

    @staticmethod
    def of_size_and_grace(size: Interval, grace: Interval) -> TimeWindows:
        return TimeWindows(size, grace)

    def __repr__(self) -> str:
        return f"TimeWindows(size={self.size!r}, grace={self.grace!r})"


class SessionWindows:
    """Session windows: records of a key within ``gap`` (inclusive) of each other form one session.

    >>> SessionWindows.of_inactivity_gap_with_no_grace(timedelta(minutes=5))
    """

    def __init__(self, gap: Interval, grace: Interval | None) -> None:
        self.gap, self.grace = gap, grace

    @staticmethod
    def of_inactivity_gap_with_no_grace(gap: Interval) -> SessionWindows:
        return SessionWindows(gap, None)

    @staticmethod
    def of_inactivity_gap_and_grace(gap: Interval, grace: Interval) -> SessionWindows:
        return SessionWindows(gap, grace)

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.gap!r}, grace={self.grace!r})"


class KGroupedStream:
    """A :class:`KStream` grouped by key (``KStream.group_by_key()``)."""

    def __init__(self, stream: KStream) -> None:
        self._stream = stream

    def windowed_by(self, windows: TimeWindows | SessionWindows) -> WindowedKStream:
        """Window the grouped stream by tumbling or session windows."""
        if not isinstance(windows, (TimeWindows, SessionWindows)):
            raise KStreamsError(
                f"windowed_by takes TimeWindows or SessionWindows, got {type(windows).__name__}"
            )
        return WindowedKStream(self._stream, windows)

    def count(self) -> KTable:
        """The number of records per key, as a table (null keys and values are skipped and
        counted); the timestamp is the largest folded in.

        >>> ks.group_by_key().count().df   # key, value (long), timestamp
        """
        return _aggregate(self._stream, "count", None)

    def reduce(self, adder: Column | KeyValueFunction) -> KTable:
        """Combine each key's values with ``adder(aggregate, value)``; the first value starts.

        >>> ks.group_by_key().reduce(lambda agg, v: agg + v)
        """
        return _aggregate(self._stream, "reduce", None, adder=adder)

    def aggregate(self, initializer: Column, adder: Column | KeyValueFunction) -> KTable:
        """Fold each key's values into ``adder(aggregate, value)`` starting at the constant
        ``initializer``, whose type the aggregate keeps.

        >>> ks.group_by_key().aggregate(F.lit(""), lambda agg, v: F.concat(agg, v))
        """
        return _aggregate(self._stream, "aggregate", None, initializer=initializer, adder=adder)


class WindowedKStream:
    """A stream grouped by key and window."""

    def __init__(self, stream: KStream, windows: TimeWindows | SessionWindows) -> None:
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

    def count(self) -> KTable:
        """Records per (key, window), with a ``window`` column.

        Tumbling windows: the timestamp is the largest in the window; a window closes when the
        query's watermark reaches ``end + grace`` and records of closed windows are dropped and
        counted (``late_dropped``). Session windows: ``window`` is (first, last record's time);
        when a record merges sessions, each merged-away session gets a tombstone (null value).

        >>> ks.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace("10 seconds")).count()
        """
        return _aggregate(self._stream, "count", self._windows)

    def reduce(self, adder: Column | KeyValueFunction) -> KTable:
        """:meth:`KGroupedStream.reduce` per window (merging sessions also uses ``adder``)."""
        return _aggregate(self._stream, "reduce", self._windows, adder=adder)

    def aggregate(
        self,
        initializer: Column,
        adder: Column | KeyValueFunction,
        merger: Column | KeyValueFunction | None = None,
    ) -> KTable:
        """:meth:`KGroupedStream.aggregate` per window. Session windows need
        ``merger(aggregate1, aggregate2)`` to combine two sessions' aggregates.

        >>> ks.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace("5 minutes")) \
        ...     .aggregate(F.lit(0), lambda agg, v: agg + 1, lambda a, b: a + b)
        """
        return _aggregate(
            self._stream, "aggregate", self._windows, initializer=initializer, adder=adder, merger=merger
        )


def _aggregate(stream: KStream, kind: str, windows, initializer=None, adder=None, merger=None) -> KTable:
    from kstreams_spark.ktable import KTable

    api = stream._api
    if windows is None:
        window_kind, size = None, None
    elif isinstance(windows, TimeWindows):
        window_kind, size = "tumbling", _interval(windows.size)
    else:
        window_kind, size = "session", _interval(windows.gap)
    grace = None if windows is None or windows.grace is None else _interval(windows.grace)

    def fold(function, what: str):
        return _applied(function, what, F.col(api.aggregateInputName()), F.col(api.valueInputName()))

    with jvm_errors():
        if kind == "count":
            jtable = api.count(stream._jks, window_kind, size, grace)
        elif kind == "reduce":
            jtable = api.reduce(stream._jks, fold(adder, "adder"), window_kind, size, grace)
        else:
            jinit = _java_column(initializer, "initializer")
            jmerger = None if merger is None else fold(merger, "merger")
            jtable = api.aggregate(
                stream._jks, jinit, fold(adder, "adder"), jmerger, window_kind, size, grace
            )
    return KTable(jtable, stream._df.sparkSession)


class JoinWindows:
    """The window of a stream-stream join: records join when ``|t1 - t2| <= time_difference``;
    a record's window closes once the watermark passes ``t + time_difference + grace`` (a
    left/outer join then emits it unmatched), and it stays joinable until the watermark reaches
    ``t + 2 * time_difference + grace``, the retention of Kafka Streams' join stores.

    >>> JoinWindows.of_time_difference_with_no_grace(timedelta(milliseconds=100))
    """

    def __init__(self, time_difference: Interval, grace: Interval | None) -> None:
        self.time_difference, self.grace = time_difference, grace

    @staticmethod
    def of_time_difference_with_no_grace(time_difference: Interval) -> JoinWindows:
        return JoinWindows(time_difference, None)

    @staticmethod
    def of_time_difference_and_grace(time_difference: Interval, grace: Interval) -> JoinWindows:
        return JoinWindows(time_difference, grace)

    def __repr__(self) -> str:
        return f"JoinWindows(time_difference={self.time_difference!r}, grace={self.grace!r})"


class BranchedKStream:
    """``KStream.split()``: branches in order; a record goes to the first whose predicate holds.

    >>> ks.split().branch(F.col("v") > 0, "pos").branch(F.col("v") < 0, "neg").default_branch("zero")
    """

    def __init__(self, stream: KStream, branches: list) -> None:
        self._stream, self._branches = stream, branches

    def branch(self, predicate: Column | KeyValueFunction, name: str) -> BranchedKStream:
        """Add a branch ``name`` for the records ``predicate`` is true for (null counts as false)."""
        return BranchedKStream(self._stream, self._branches + [(predicate, name)])

    def default_branch(self, name: str) -> dict:
        """The branches as a dict of name to :class:`KStream`, plus ``name`` for the rest."""
        return self._build(name)

    def no_default_branch(self) -> dict:
        """The branches; records no predicate took are dropped (as in Kafka Streams)."""
        return self._build(None)

    def _build(self, default: str | None) -> dict:
        s = self._stream
        predicates = [s._column(p, "predicate", 2) for p, _ in self._branches]
        names = [n for _, n in self._branches]
        gateway = s._df.sparkSession.sparkContext._gateway
        jpredicates = gateway.new_array(gateway.jvm.org.apache.spark.sql.Column, len(predicates))
        for i, p in enumerate(predicates):
            jpredicates[i] = p
        jnames = gateway.new_array(gateway.jvm.java.lang.String, len(names))
        for i, n in enumerate(names):
            jnames[i] = n
        with jvm_errors():
            jbranches = s._api.split(s._jks, jpredicates, jnames, default)
        return {
            name: KStream._from_jvm(jbranches.get(name), s._df.sparkSession)
            for name in names + ([default] if default else [])
        }
