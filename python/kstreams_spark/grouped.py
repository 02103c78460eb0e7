"""Grouped streams: ``KGroupedStream`` (``KStream.group_by_key()``) and the windowed streams it
makes, ``TimeWindowedKStream`` and ``SessionWindowedKStream`` (as in Scala and Kafka Streams)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from kstreams_spark._dsl import KeyValueFunction, LateRecords, applied
from kstreams_spark._jvm import JavaObject, door, java_column
from kstreams_spark.errors import KStreamsError
from kstreams_spark.windows import SessionWindows, TimeWindows

if TYPE_CHECKING:
    from kstreams_spark.kstream import KStream
    from kstreams_spark.ktable import KTable


class KGroupedStream:
    """A :class:`KStream` grouped by key (``KStream.group_by_key()``)."""

    def __init__(self, stream: KStream) -> None:
        self._stream = stream
        self._j = stream._j.groupByKey()

    def windowed_by(
        self, windows: TimeWindows | SessionWindows
    ) -> TimeWindowedKStream | SessionWindowedKStream:
        """Window the grouped stream by tumbling windows (a :class:`TimeWindowedKStream`) or session
        windows (a :class:`SessionWindowedKStream`).

        >>> type(ks.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace("10 seconds"))).__name__
        'TimeWindowedKStream'

        Args:
            windows: :class:`TimeWindows` for tumbling windows, :class:`SessionWindows` for session windows.

        Returns:
            A :class:`TimeWindowedKStream` for TimeWindows, a :class:`SessionWindowedKStream` for
            SessionWindows.

        Raises:
            KStreamsError: if ``windows`` is neither TimeWindows nor SessionWindows.
        """
        if isinstance(windows, TimeWindows):
            return TimeWindowedKStream(self, windows)
        if isinstance(windows, SessionWindows):
            return SessionWindowedKStream(self, windows)
        raise KStreamsError(f"windowed_by takes TimeWindows or SessionWindows, got {type(windows).__name__}")

    def count(self) -> KTable:
        """The number of records per key, as a table (null keys and values are skipped and
        counted); the timestamp is the largest folded in.

        >>> ks.group_by_key().count().df.orderBy("timestamp").show()
        +---+-----+-------------------+
        |key|value|          timestamp|
        +---+-----+-------------------+
        |  a|    1|2026-01-01 00:00:00|
        |  b|    1|2026-01-01 00:00:01|
        |  b|    2|2026-01-01 00:00:03|
        |  a|    2|2026-01-01 00:00:05|
        |  a|    3|2026-01-01 00:00:20|
        +---+-----+-------------------+
        <BLANKLINE>
        """
        return table(self._j.count(), self._stream)

    def reduce(self, adder: Column | KeyValueFunction) -> KTable:
        """Combine each key's values with ``adder(aggregate, value)``; the first value starts.

        >>> joined = ks.group_by_key().reduce(lambda agg, v: F.concat(agg, F.lit("+"), v)).df
        >>> [r.value for r in joined.where("key = 'a'").orderBy("timestamp").collect()]
        ['apple', 'apple+avocado', 'apple+avocado+apricot']

        Args:
            adder: the new aggregate: a Column, or a function of the aggregate and value Columns returning one
                (called once, to build the expression).

        Returns:
            The table of each key's aggregate.

        Raises:
            KStreamsError: if ``adder`` is neither a Column nor a callable, or the callable raises or returns
                no Column.
        """
        return table(self._j.reduce(fold(self._stream, adder, "adder")), self._stream)

    def aggregate(self, initializer: Column, adder: Column | KeyValueFunction) -> KTable:
        """Fold each key's values into ``adder(aggregate, value)`` starting at the constant
        ``initializer``, whose type the aggregate keeps.

        >>> letters = ks.group_by_key().aggregate(F.lit(0), lambda agg, v: agg + F.length(v)).df
        >>> [r.value for r in letters.where("key = 'b'").orderBy("timestamp").collect()]
        [6, 15]

        Args:
            initializer: the constant aggregate of a key before its first value; its type is the aggregate's.
            adder: as in :meth:`reduce`.

        Returns:
            The table of each key's aggregate.

        Raises:
            KStreamsError: as :meth:`reduce`.
        """
        jinit = java_column(initializer, "initializer")
        return table(self._j.aggregate(jinit, fold(self._stream, adder, "adder")), self._stream)


class WindowedKStream:
    """A stream grouped by key and window: what :class:`TimeWindowedKStream` and
    :class:`SessionWindowedKStream` share (``distinct``, ``count``, ``reduce``)."""

    def __init__(self, grouped: KGroupedStream, windows: TimeWindows | SessionWindows) -> None:
        self._stream = grouped._stream
        self._j = grouped._j.windowedBy(windows._to_java(grouped._stream._spark))

    def distinct(self, late_records: LateRecords = "drop") -> KStream:
        """The first record of each (key, window), with a ``window`` column (``start``, ``end``).

        Tumbling: one record per key and window. Session: the record that opens a session, with
        ``window = (t, t)``. Null keys pass with a null window; records of closed windows are
        dropped as late and counted (``late_dropped``), or with ``late_records="side_output"``
        routed to :attr:`KStream.side_output` (``window`` null, ``kstreams_reason``
        ``"window closed"``). A closed window's result is final: ``"forward"`` is refused.

        >>> windows = SessionWindows.of_inactivity_gap_with_no_grace("10 seconds")
        >>> firsts = ks.group_by_key().windowed_by(windows).distinct().df
        >>> [(r.value, r.window.start.second) for r in firsts.collect()]
        [('apple', 0), ('banana', 1), ('apricot', 20)]

        Args:
            late_records: what to do with a record of a closed window: ``"drop"`` (the default: dropped and
                counted as ``late_dropped``) or ``"side_output"`` (routed to :attr:`KStream.side_output`).

        Returns:
            The stream of the first record of each (key, window), with a ``window`` column.

        Raises:
            KStreamsError: if ``late_records`` is ``"forward"`` (a closed window's result was emitted already)
                or not an accepted value.
        """
        return self._stream._next(self._j.distinct(self._stream._late(late_records)))

    def count(self, late_records: LateRecords = "drop") -> KTable:
        """Records per (key, window), with a ``window`` column.

        Tumbling windows: the timestamp is the largest in the window. Session windows: ``window``
        is (first, last record's time); when a record merges sessions, each merged-away session
        gets a tombstone (null value).

        A window closes when the stream time of the record's own input partition (the largest
        timestamp of that partition so far, this record included; spec section 5) reaches
        ``end + grace`` (a session: when its end is more than ``gap + grace`` behind it), in a
        batch DataFrame as in a stream; a partition behind another loses nothing. How long a
        quiet partition is waited for: ``spark.kstreams.partitionIdleTimeout`` (the manual, "Stream
        time per partition"). A record of a closed window is dropped and counted
        (``late_dropped``, the default), or with ``late_records="side_output"`` routed unchanged to
        :attr:`KTable.side_output` (``kstreams_reason`` ``"window closed"``, counted as
        ``late_side_output``). A closed window's result was emitted already: ``"forward"`` is
        refused.

        Blueberry (b@3) comes after apricot (a@20) moved partition 0 to 20 s, so its window
        [0, 10 s) is closed:

        >>> windows = TimeWindows.of_size_with_no_grace("10 seconds")
        >>> counts = ks.group_by_key().windowed_by(windows).count().df
        >>> sorted((r.key, r.window.start.second, r.value) for r in counts.collect())
        [('a', 0, 1), ('a', 0, 2), ('a', 20, 1), ('b', 0, 1)]

        Streaming, blueberry in a second micro-batch, routed to the side output:

        >>> source = tmp + "/late-counts"
        >>> df.where("offset < 4").coalesce(1).write.parquet(source)
        >>> df.where("offset = 4").coalesce(1).write.mode("append").parquet(source)
        >>> stream = spark.readStream.schema(df.schema).option("maxFilesPerTrigger", 1).parquet(source)
        >>> counts = KStream(stream).group_by_key().windowed_by(windows).count(late_records="side_output")
        >>> query = (counts.with_side_output.writeStream.format("memory").queryName("late_counts")
        ...     .option("checkpointLocation", source + "-checkpoint").trigger(availableNow=True).start())
        >>> query.awaitTermination()
        >>> out = spark.table("late_counts")
        >>> sorted((r.key, r.window.start.second, r.value) for r in out.where("kstreams_reason is null").collect())
        [('a', 0, 1), ('a', 0, 2), ('a', 20, 1), ('b', 0, 1)]
        >>> [(r.kstreams_reason, r.kstreams_late_record.value) for r in out.where("kstreams_reason is not null").collect()]
        [('window closed', 'blueberry')]

        Args:
            late_records: what to do with a record of a closed window: ``"drop"`` (the default: dropped and
                counted as ``late_dropped``) or ``"side_output"`` (routed unchanged to
                :attr:`KTable.side_output`).

        Returns:
            The table of the number of records per (key, window), with a ``window`` column.

        Raises:
            KStreamsError: if ``late_records`` is ``"forward"`` (a closed window's result was emitted already)
                or not an accepted value.
        """
        return table(self._j.count(self._stream._late(late_records)), self._stream)

    def reduce(self, adder: Column | KeyValueFunction, late_records: LateRecords = "drop") -> KTable:
        """:meth:`KGroupedStream.reduce` per window (merging sessions also uses ``adder``);
        ``late_records`` as in :meth:`count`.

        >>> windows = TimeWindows.of_size_with_no_grace("10 seconds")
        >>> joined = ks.group_by_key().windowed_by(windows).reduce(
        ...     lambda agg, v: F.concat(agg, F.lit("+"), v), late_records="side_output")
        >>> [r.value for r in joined.df.where("key = 'a'").orderBy("timestamp").collect()]
        ['apple', 'apple+avocado', 'apricot']
        >>> [r.value for r in joined.side_output.collect()]  # b@3 after partition 0 reached 20 s
        ['blueberry']

        Args:
            adder: the new aggregate: a Column, or a function of the aggregate and value Columns returning one
                (called once, to build the expression); merging sessions also uses it.
            late_records: as in :meth:`count` (default ``"drop"``).

        Returns:
            The table of each (key, window)'s aggregate, with a ``window`` column.

        Raises:
            KStreamsError: if ``late_records`` is ``"forward"`` (a closed window's result was emitted already)
                or not an accepted value, or ``adder`` is neither a Column nor a callable, or the callable
                raises or returns no Column.
        """
        jlate = self._stream._late(late_records)
        return table(self._j.reduce(fold(self._stream, adder, "adder"), jlate), self._stream)


class TimeWindowedKStream(WindowedKStream):
    """A stream grouped by key and tumbling window (Scala's ``TimeWindowedKStream``)."""

    def aggregate(
        self, initializer: Column, adder: Column | KeyValueFunction, late_records: LateRecords = "drop"
    ) -> KTable:
        """:meth:`KGroupedStream.aggregate` per window; ``late_records`` as in :meth:`count`.

        >>> tumbling = ks.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace("10 seconds"))
        >>> lengths = tumbling.aggregate(F.lit(0), lambda agg, v: agg + F.length(v)).df
        >>> [(r.window.start.second, r.value) for r in lengths.where("key = 'a'").orderBy("timestamp").collect()]
        [(0, 5), (0, 12), (20, 7)]

        Args:
            initializer: the constant aggregate of a window before its first value; its type is the
                aggregate's.
            adder: as in :meth:`reduce`.
            late_records: as in :meth:`count` (default ``"drop"``).

        Returns:
            The table of each (key, window)'s aggregate, with a ``window`` column.

        Raises:
            KStreamsError: as :meth:`reduce`.
        """
        jinit = java_column(initializer, "initializer")
        jlate = self._stream._late(late_records)
        return table(self._j.aggregate(jinit, fold(self._stream, adder, "adder"), jlate), self._stream)


class SessionWindowedKStream(WindowedKStream):
    """A stream grouped by key and session window (Scala's ``SessionWindowedKStream``)."""

    def aggregate(
        self,
        initializer: Column,
        adder: Column | KeyValueFunction,
        merger: Column | KeyValueFunction | None = None,
        late_records: LateRecords = "drop",
    ) -> KTable:
        """:meth:`KGroupedStream.aggregate` per session; ``merger(aggregate1, aggregate2)`` combines
        the aggregates of two sessions a record merges. ``late_records`` as in :meth:`count`.

        >>> sessions = ks.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace("5 minutes"))
        >>> sizes = sessions.aggregate(F.lit(0), lambda agg, v: agg + 1, lambda a, b: a + b, late_records="drop").df
        >>> [r.value for r in sizes.where("key = 'a'").orderBy("timestamp").collect()]
        [1, None, 2, None, 3]

        Args:
            initializer: the constant aggregate of a session before its first value; its type is the
                aggregate's.
            adder: the new aggregate: a Column, or a function of the aggregate and value Columns returning one
                (called once, to build the expression).
            merger: combines the aggregates of two sessions a record merges: a Column, or a function of the
                two aggregates' Columns returning one; required (None is refused).
            late_records: as in :meth:`count` (default ``"drop"``).

        Returns:
            The table of each (key, session)'s aggregate, with a ``window`` column.

        Raises:
            KStreamsError: if ``merger`` is None, ``late_records`` is ``"forward"`` (a closed window's result
                was emitted already) or not an accepted value, or ``adder`` or ``merger`` is neither a Column
                nor a callable, or the callable raises or returns no Column.
        """
        if merger is None:
            raise KStreamsError(
                "aggregate over SessionWindows needs a merger(aggregate1, aggregate2) that combines the "
                "aggregates of two sessions a record merges"
            )
        jinit = java_column(initializer, "initializer")
        jadder = fold(self._stream, adder, "adder")
        jlate = self._stream._late(late_records)
        return table(
            self._j.aggregate(jinit, jadder, fold(self._stream, merger, "merger"), jlate), self._stream
        )


def fold(stream: KStream, function: Column | KeyValueFunction, what: str) -> JavaObject:
    """An adder or merger as the Scala function the aggregation takes: ``function`` applied once
    to the columns of the running aggregate and of the value (this module's helper).

    Args:
        stream: the stream being aggregated (its session's JVM).
        function: the user's adder or merger, a Column or a function of two Columns.
        what: its name in an error ("adder", "merger").
    """
    api = door(stream._spark)
    result = applied(function, what, F.col(api.aggregateInputName()), F.col(api.valueInputName()))
    return api.function2(result)


def table(jtable: JavaObject, stream: KStream) -> KTable:
    """The KTable of a JVM KTable that an aggregation of ``stream`` returned (this module's helper).

    Args:
        jtable: the JVM's KTable.
        stream: the aggregated stream (its session).
    """
    from kstreams_spark.ktable import KTable

    return KTable._from_java(jtable, stream._spark)
