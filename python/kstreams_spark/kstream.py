"""``KStream``: Kafka-Streams-like operators over a Spark DataFrame.

Every method calls the same method of the Scala ``kstreams.KStream`` (through the handles of
``kstreams_spark._jvm``); nothing here decides which record is forwarded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta  # noqa: F401 (the examples' namespace)
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, DataFrameWriter, Row
from pyspark.sql import functions as F
from pyspark.sql.functions import udf
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.types import BooleanType, DataType

from kstreams_spark._columns import quote
from kstreams_spark._dsl import (
    JOIN_KINDS,
    ColumnOrName,
    Interval,
    KeyValueFunction,
    LateRecords,
    ValueFunction,
    applied,
    interval_text,
    joined_column,
)
from kstreams_spark._jvm import (
    JavaObject,
    door,
    java_column,
    java_dataframe,
    kstreams_class,
    python_dataframe,
)
from kstreams_spark.errors import KStreamsError
from kstreams_spark.grouped import KGroupedStream
from kstreams_spark.windows import JoinWindows

if TYPE_CHECKING:
    from kstreams_spark.ktable import KTable
    from kstreams_spark.processor import Processor, StoreSpec

# The exactly-once Kafka sink's format (Scala's kstreams.internal.sink.ExactlyOnceKafkaProvider)
EXACTLY_ONCE_KAFKA = "kstreams-kafka-eos"
# where that sink keeps its batch markers when rows name their topics (default: the topic option)
MARKER_TOPIC_OPTION = "kstreams.markerTopic"
# KStream's constructor arguments that name its columns, and its null-timestamp policy, in the order
# of the JVM's PythonAPI.columnNames
_NAME_FIELDS = ("key", "value", "timestamp", "partition", "offset", "on_null_timestamp")


class KStream:
    """A stream of Kafka-style records over a streaming or batch DataFrame.

    Column names default to those of Spark's Kafka source (``key``, ``value``, ``timestamp``,
    ``partition``, ``offset``). Without a ``partition`` column the input is one partition; without
    an ``offset`` column, order inside a micro-batch is timestamp order. Pass ``partition=None`` or
    ``offset=None`` to ignore such a column.

    >>> users = df.withColumnRenamed("key", "user").withColumnRenamed("timestamp", "event_time")
    >>> KStream(users, key="user", timestamp="event_time").deduplicate_by_key("10 seconds").df.count()
    4

    Args:
        df: the records: a streaming or batch DataFrame.
        key: name of the key column.
        value: name of the value column.
        timestamp: name of the record timestamp column.
        partition: name of the input partition column; None to ignore such a column (without one the input is
            one partition).
        offset: name of the offset column; None to ignore such a column (without one, order inside a
            micro-batch is timestamp order).
        on_null_timestamp: what to do with a record whose timestamp is null: ``"fail"`` (the default: the
            action or query fails with a :class:`KStreamsError`) or ``"skip"`` (skipped and counted as
            ``null_timestamps_skipped``).

    Raises:
        KStreamsError: if ``df`` is not a pyspark DataFrame, a column argument is not a column's name (or None
            for ``partition`` and ``offset``), or ``on_null_timestamp`` is not a string.
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
        names = dict(key=key, value=value, timestamp=timestamp, partition=partition, offset=offset)
        for what, name in names.items():
            if not (isinstance(name, str) or (name is None and what in ("partition", "offset"))):
                hint = " (select or withColumn the expression first)" if isinstance(name, Column) else ""
                raise KStreamsError(
                    f"{what} must name a column of the DataFrame"
                    f"{' (or be None)' if what in ('partition', 'offset') else ''}, "
                    f"got {type(name).__name__} {name!r}{hint}"
                )
        if not isinstance(on_null_timestamp, str):
            raise KStreamsError(f"on_null_timestamp must be 'fail' or 'skip', got {on_null_timestamp!r}")
        self._df = df
        self._column_names = dict(
            zip(_NAME_FIELDS, (key, value, timestamp, partition, offset, on_null_timestamp), strict=True)
        )
        self._spark = df.sparkSession
        self._j = door(self._spark).kstream(
            java_dataframe(df), key, value, timestamp, partition, offset, on_null_timestamp
        )

    @property
    def _names(self) -> dict[str, str | None]:
        """The stream's column names and null-timestamp policy, as the JVM ``KStream`` holds them:
        read once, when first needed (a user function's inputs, a processor, ``repr``), so that an
        operator costs one call to the JVM, not two (over Spark Connect each is a round trip)."""
        if self._column_names is None:
            self._column_names = dict(zip(_NAME_FIELDS, door(self._spark).columnNames(self._j), strict=True))
        return self._column_names

    @property
    def df(self) -> DataFrame:
        """The stream's DataFrame (after the operators applied so far)."""
        return self._df

    def deduplicate_by_key(self, interval: Interval, late_records: LateRecords = "forward") -> KStream:
        """Drop a record when one with the same key, on the same input partition, with a timestamp
        at most ``interval`` away was forwarded before (KIP-655 ``deduplicateByKey``).

        avocado (5 s) is dropped as a repeat of apple (0 s); blueberry (3 s) is not, because it
        arrives after apricot (20 s), when banana (1 s) is more than 10 s behind the partition's
        stream time and no longer counts (spec section 2):

        >>> KStream(df).deduplicate_by_key(timedelta(seconds=10)).df.select("key", "value").show()
        +---+---------+
        |key|    value|
        +---+---------+
        |  a|    apple|
        |  b|   banana|
        |  a|  apricot|
        |  b|blueberry|
        +---+---------+
        <BLANKLINE>

        A record older than its partition's stream time minus ``interval`` that is no duplicate is
        *late*: forwarded by default (spec section 2), or, with ``late_records``, dropped and
        counted (``"drop"``) or routed to :attr:`side_output` (``"side_output"``). blueberry is
        late:

        >>> late = KStream(df).deduplicate_by_key("10 seconds", late_records="side_output")
        >>> [r.value for r in late.df.collect()], [(r.value, r.kstreams_reason) for r in late.side_output.collect()]
        (['apple', 'banana', 'apricot'], [('blueberry', 'late')])

        Args:
            interval: how far apart (at most) the timestamps of a duplicate and the record forwarded before
                may be: a timedelta or a string such as ``"10 seconds"``.
            late_records: what to do with a late record that is no duplicate: ``"forward"`` (the default),
                ``"drop"`` (dropped and counted) or ``"side_output"`` (routed to :attr:`side_output`).

        Returns:
            The stream of the forwarded records.

        Raises:
            KStreamsError: if an argument is not of an accepted form (e.g. an interval that cannot be read).
        """
        return self._next(self._j.deduplicateByKey(interval_text(interval), self._late(late_records)))

    def deduplicate_by_key_value(
        self, id: ColumnOrName, interval: Interval, late_records: LateRecords = "forward"
    ) -> KStream:
        """Like :meth:`deduplicate_by_key`, with the dedup key (key, ``id``); ``late_records`` as
        there.

        >>> [r.value for r in KStream(df).deduplicate_by_key_value("event_id", "1 minute").df.collect()]
        ['apple', 'banana', 'apricot', 'blueberry']

        Args:
            id: a column or a column's name: with the key, the dedup key.
            interval: as in :meth:`deduplicate_by_key`: a timedelta or a string such as ``"10 seconds"``.
            late_records: as in :meth:`deduplicate_by_key` (default ``"forward"``).

        Returns:
            The stream of the forwarded records; raises as :meth:`deduplicate_by_key`.
        """
        return self._next(
            self._j.deduplicateByKeyValue(
                java_column(id, "id"), interval_text(interval), self._late(late_records)
            )
        )

    def deduplicate(
        self, id: ColumnOrName, interval: Interval, late_records: LateRecords = "forward"
    ) -> KStream:
        """Drop a record when one with the same ``id`` on *any* partition, with a timestamp at most
        ``interval`` away, was forwarded before (one global store). A record is late by its own
        partition's stream time; ``late_records`` as in :meth:`deduplicate_by_key`.

        >>> sorted(r.value for r in KStream(df).deduplicate(F.col("event_id"), "1 minute").df.collect())
        ['apple', 'apricot', 'banana', 'blueberry']

        Args:
            id: a column or a column's name: the dedup key, the same on all partitions.
            interval: how far apart (at most) the timestamps of a duplicate and the record forwarded before
                may be: a timedelta or a string such as ``"10 seconds"``.
            late_records: as in :meth:`deduplicate_by_key` (default ``"forward"``).

        Returns:
            The stream of the records forwarded by the global store; raises as :meth:`deduplicate_by_key`.
        """
        return self._next(
            self._j.deduplicate(java_column(id, "id"), interval_text(interval), self._late(late_records))
        )

    @property
    def side_output(self) -> DataFrame:
        """What the operator that made this stream routed aside: with ``late_records="side_output"``
        the late records, with the result's columns (a windowed distinct's ``window`` null) and
        then ``kstreams_reason`` (``"late"``; ``"window closed"`` for windowed distinct).

        A query that writes it alone runs the operator again, on its own checkpoint, with the
        same results; :attr:`with_side_output` writes both outputs from one query.

        >>> KStream(df).deduplicate_by_key("10 seconds", late_records="drop").side_output
        Traceback (most recent call last):
        ...
        kstreams_spark.errors.KStreamsError: this stream has no side output: ...
        """
        return python_dataframe(self._j.sideOutput(), self._spark)

    @property
    def with_side_output(self) -> DataFrame:
        """:attr:`df` and :attr:`side_output` in one DataFrame (``kstreams_reason`` null for the
        forwarded records), for one query with one run of the operator that writes both, e.g.
        with ``foreachBatch``::

            def write_both(batch, batch_id):
                batch.persist()  # the operator runs once; each write reads the persisted rows
                batch.where("kstreams_reason is null").drop("kstreams_reason").write.mode("append").parquet(out)
                batch.where("kstreams_reason is not null").write.mode("append").parquet(late)
                batch.unpersist()

            result.with_side_output.writeStream.foreachBatch(write_both).start()

        >>> both = KStream(df).deduplicate_by_key("10 seconds", late_records="side_output").with_side_output
        >>> [(r.value, r.kstreams_reason) for r in both.collect()]
        [('apple', None), ('banana', None), ('apricot', None), ('blueberry', 'late')]
        """
        return python_dataframe(self._j.withSideOutput(), self._spark)

    def _late(self, late_records: LateRecords) -> JavaObject:
        """Scala's ``LateRecords`` for ``late_records``, which it checks."""
        if not isinstance(late_records, str):
            raise KStreamsError(
                f"late_records must be 'forward', 'drop' or 'side_output', got {late_records!r}"
            )
        return kstreams_class(self._spark, "LateRecords").parse(late_records)

    def deduplicate_by_sequence(self, sequence: ColumnOrName) -> KStream:
        """Forward a record only if its sequence number (an integer column or expression) is
        greater than the highest forwarded on its input partition; null passes (spec section 4).

        >>> [(r.value, r.seq) for r in KStream(df).deduplicate_by_sequence("seq").df.collect()]
        [('apple', 1), ('banana', 2), ('apricot', 3)]

        Args:
            sequence: the record's sequence number: an integer column, a column's name or an expression; null
                passes.

        Returns:
            The stream of the forwarded records.

        Raises:
            KStreamsError: if ``sequence`` is neither a column's name nor a Column.
        """
        return self._next(self._j.deduplicateBySequence(java_column(sequence, "sequence")))

    def group_by_key(self) -> KGroupedStream:
        """Group records by key, for aggregations and windowed operators.

        >>> ks.group_by_key().count().df.columns
        ['key', 'value', 'timestamp']
        """
        return KGroupedStream(self)

    def group_by(self, key_selector: KeyValueFunction) -> KGroupedStream:
        """Group records by a new key, ``key_selector(key, value)`` (``select_key`` then
        ``group_by_key``).

        >>> by_initial = ks.group_by(lambda k, v: F.substring(v, 1, 1)).count().df
        >>> sorted((r.key, r.value) for r in by_initial.collect())
        [('a', 1), ('a', 2), ('a', 3), ('b', 1), ('b', 2)]

        Args:
            key_selector: a function of the key and value Columns returning the new key Column (called once,
                to build the expression).

        Returns:
            The records grouped by the new key.

        Raises:
            KStreamsError: if ``key_selector`` is neither a Column nor a callable, or the callable raises or
                returns no Column.
        """
        return self.select_key(key_selector).group_by_key()

    # ---- stateless operators: every one keeps the input's timestamp (spec section 5). User
    # functions are Columns, or Python callables given the key/value Columns and returning Columns;
    # they are called once to build a Spark expression, never per record.

    def filter(self, predicate: Column | KeyValueFunction) -> KStream:
        """Keep the records for which ``predicate`` is true (null counts as false).

        >>> [r.value for r in ks.filter(lambda k, v: v.startswith("ap")).df.collect()]
        ['apple', 'apricot']

        Args:
            predicate: the condition: a Column, or a function of the key and value Columns returning one
                (called once, to build the expression); null counts as false.

        Returns:
            The stream of the records kept.

        Raises:
            KStreamsError: if ``predicate`` is neither a Column nor a callable, or the callable raises or
                returns no Column.
        """
        return self._next(self._j.filter(self._column(predicate, "predicate", 2)))

    def filter_not(self, predicate: Column | KeyValueFunction) -> KStream:
        """Keep the records for which ``predicate`` is false or null.

        >>> [r.value for r in ks.filter_not(F.col("key") == "a").df.collect()]
        ['banana', 'blueberry']

        Args:
            predicate: as in :meth:`filter`; a record is kept where it is false or null.

        Returns:
            The stream of the records kept.

        Raises:
            KStreamsError: as :meth:`filter`.
        """
        return self._next(self._j.filterNot(self._column(predicate, "predicate", 2)))

    def map_values(self, mapper: Column | ValueFunction) -> KStream:
        """Replace the value with ``mapper(value)``.

        >>> [r.value for r in ks.map_values(lambda v: F.upper(v)).df.collect()]
        ['APPLE', 'BANANA', 'AVOCADO', 'APRICOT', 'BLUEBERRY']

        Args:
            mapper: the new value: a Column, or a function of the value Column returning one (called once, to
                build the expression).

        Returns:
            The stream with the new values.

        Raises:
            KStreamsError: if ``mapper`` is neither a Column nor a callable, or the callable raises or returns
                no Column.
        """
        jvalue = self._column(mapper, "mapper", 1)
        return self._next(self._j.mapValues(door(self._spark).function1(jvalue)))

    def select_key(self, key_selector: Column | KeyValueFunction) -> KStream:
        """Replace the key with ``key_selector(key, value)``.

        >>> [r.key for r in ks.select_key(lambda k, v: F.substring(v, 1, 2)).df.collect()]
        ['ap', 'ba', 'av', 'ap', 'bl']

        Args:
            key_selector: the new key: a Column, or a function of the key and value Columns returning one
                (called once, to build the expression).

        Returns:
            The stream with the new keys.

        Raises:
            KStreamsError: if ``key_selector`` is neither a Column nor a callable, or the callable raises or
                returns no Column.
        """
        jkey = self._column(key_selector, "key_selector", 2)
        return self._next(self._j.selectKey(door(self._spark).function2(jkey)))

    def map(self, mapper: Callable[[Column, Column], tuple[Column, Column]]) -> KStream:
        """Replace key and value with the pair ``mapper(key, value)``.

        >>> [(r.key, r.value) for r in ks.map(lambda k, v: (v, k)).df.collect()][:2]
        [('apple', 'a'), ('banana', 'b')]

        Args:
            mapper: a function of the key and value Columns returning the new (key, value) pair of Columns
                (called once, to build the expressions).

        Returns:
            The stream with the new keys and values.

        Raises:
            KStreamsError: if ``mapper`` is not callable or does not return a pair of Columns.
        """
        if not callable(mapper):
            raise KStreamsError(f"map's mapper must be a callable, got {type(mapper).__name__}")
        pair = mapper(*self._inputs(2))
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(c, Column) for c in pair)):
            raise KStreamsError(f"map's mapper must return a (key, value) pair of Columns, got {pair!r}")
        jkey, jvalue = (java_column(c, "mapper result") for c in pair)
        return self._next(self._j.map(door(self._spark).pair(jkey, jvalue)))

    def flat_map(self, mapper: Column | KeyValueFunction) -> KStream:
        """Replace each record by the records of ``mapper(key, value)``: an array of structs with
        fields ``key`` and ``value``; each keeps the input's other columns and timestamp.

        >>> pairs = lambda k, v: F.array(
        ...     F.struct(k.alias("key"), v.alias("value")), F.struct(v.alias("key"), k.alias("value")))
        >>> [(r.key, r.value) for r in ks.flat_map(pairs).df.collect()][:2]
        [('a', 'apple'), ('apple', 'a')]

        Args:
            mapper: an array of structs with fields ``key`` and ``value``, one per output record: a Column, or
                a function of the key and value Columns returning one (called once, to build the expression).

        Returns:
            The stream of the output records, each with the input's other columns and timestamp.

        Raises:
            KStreamsError: if ``mapper`` is neither a Column nor a callable, or the callable raises or returns
                no Column.
        """
        jpairs = self._column(mapper, "mapper", 2)
        return self._next(self._j.flatMap(door(self._spark).function2(jpairs)))

    def flat_map_values(self, mapper: Column | ValueFunction) -> KStream:
        """Replace each record by one record per element of the array ``mapper(value)``.

        >>> [r.value for r in ks.flat_map_values(lambda v: F.split(v, "p")).df.collect()][:3]
        ['a', '', 'le']

        Args:
            mapper: an array with one element per output record's value: a Column, or a function of the value
                Column returning one (called once, to build the expression).

        Returns:
            The stream of the output records.

        Raises:
            KStreamsError: if ``mapper`` is neither a Column nor a callable, or the callable raises or returns
                no Column.
        """
        jvalues = self._column(mapper, "mapper", 1)
        return self._next(self._j.flatMapValues(door(self._spark).function1(jvalues)))

    def peek(self, action: Callable[[Row], None]) -> KStream:
        """Call ``action(row)`` on each record as it passes, for side effects such as logging; the
        records are unchanged. Unlike the other operators this runs Python per record (a Python
        UDF), so keep it for debugging.

        >>> ks.peek(lambda row: print(row.key, row.value)).df.count()  # prints on the executors
        5

        Args:
            action: called with each record's Row (all its columns) as it passes, on the executors; what it
                returns is ignored.

        Returns:
            The stream of the same records.

        Raises:
            KStreamsError: if ``action`` is not callable.
        """
        if not callable(action):
            raise KStreamsError(f"peek's action must be callable, got {type(action).__name__}")

        def call(row: Row) -> bool:
            action(row)
            return True

        peeked = udf(call, BooleanType()).asNondeterministic()
        names = [F.col(quote(c)) for c in self._df.columns]
        return self._next(self._j.filter(java_column(peeked(F.struct(*names)), "peek")))

    def split(self) -> BranchedKStream:
        """Split the stream by predicates: a record goes to the first branch whose predicate is
        true, else to the default branch.

        >>> branches = ks.split().branch(F.col("value").startswith("ap"), "ap").default_branch("rest")
        >>> {name: branch.df.count() for name, branch in branches.items()}
        {'ap': 2, 'rest': 3}
        """
        return BranchedKStream(self, [])

    def merge(self, other: KStream) -> KStream:
        """Both streams' records (the DataFrames must have the same columns).

        >>> KStream(df.where("key = 'a'")).merge(KStream(df.where("key = 'b'"))).df.count()
        5

        Args:
            other: the stream whose records are added; its DataFrame must have the same columns.

        Returns:
            The stream of both streams' records.

        Raises:
            KStreamsError: if ``other`` is not a :class:`KStream`.
        """
        if not isinstance(other, KStream):
            raise KStreamsError(f"merge takes a KStream, got {type(other).__name__}")
        return self._next(self._j.merge(other._j))

    def to(
        self, topic: str, exactly_once: bool = False, **options: str
    ) -> DataStreamWriter | DataFrameWriter:
        """A writer of the records to the Kafka topic ``topic``: ``key`` and ``value`` as strings
        or bytes (other types as JSON) and a header ``kstreams.timestamp`` with the record's
        timestamp in epoch milliseconds (Spark's Kafka sink cannot set the record timestamp).
        ``options`` go to the writer (e.g. ``kafka.bootstrap.servers``); call ``start()``.

        Spark's Kafka sink is at-least-once: a micro-batch cut short by a crash is written again.
        With ``exactly_once=True`` (streaming only) each micro-batch is written in Kafka
        transactions and a replayed one is not written twice, so a consumer with
        ``isolation.level=read_committed`` reads every record once (the manual, "Exactly once to
        Kafka").

        Example (needs a Kafka broker)::

            ks.to("out", **{"kafka.bootstrap.servers": "host:9092"}).option("checkpointLocation", d).start()
            ks.to("out", exactly_once=True, **{"kafka.bootstrap.servers": "host:9092"}).option(...)

        Args:
            topic: the name of the Kafka topic written to.
            exactly_once: True to write each micro-batch in Kafka transactions, a replayed one not twice
                (streaming only); False (the default): Spark's at-least-once Kafka sink.
            **options: options of the writer, e.g. ``kafka.bootstrap.servers``.

        Returns:
            A writer of the records, not started: a DataStreamWriter for a streaming DataFrame, a
            DataFrameWriter for a batch one.

        Raises:
            KStreamsError: if ``topic`` is not a str, ``exactly_once`` is not a bool, or ``exactly_once`` is
                True for a batch DataFrame.
        """
        if not isinstance(exactly_once, bool):
            raise KStreamsError(f"exactly_once must be True or False, got {exactly_once!r}")
        if not isinstance(topic, str):
            raise KStreamsError(
                f"topic must be a Kafka topic's name (a str), got {topic!r} ({type(topic).__name__})"
            )
        records = python_dataframe(self._j.toKafkaRecords(topic), self._spark)
        if exactly_once:
            if not records.isStreaming:
                raise KStreamsError(
                    "exactly_once is for streaming queries; a batch DataFrame is written by one job: "
                    "use to(topic)"
                )
            return records.writeStream.format(EXACTLY_ONCE_KAFKA).option("topic", topic).options(**options)
        writer = records.writeStream if records.isStreaming else records.write
        return writer.format("kafka").options(**options)

    def to_table(self) -> KTable:
        """The stream read as a table: the latest value per key, a null value deletes; updates
        that change nothing are dropped and counted as ``idempotent-updates-dropped`` (KIP-557).

        >>> ks.to_table().df.orderBy("timestamp").select("key", "value").show()
        +---+---------+
        |key|    value|
        +---+---------+
        |  a|    apple|
        |  b|   banana|
        |  b|blueberry|
        |  a|  avocado|
        |  a|  apricot|
        +---+---------+
        <BLANKLINE>
        """
        from kstreams_spark.ktable import KTable

        return KTable._from_java(self._j.toTable(), self._spark)

    def join(self, other: KStream, joiner: Column | KeyValueFunction, windows: JoinWindows) -> KStream:
        """Windowed inner join: records with equal keys and ``|t1 - t2| <= time difference`` give
        ``joiner(this_value, other_value)`` at ``max(t1, t2)``; the result has ``key``, ``value``,
        ``timestamp``. Time is kept per task, partition ``p`` of both sides (spec section 5):
        blueberry (b@3) comes after apricot (a@20) on both sides, when each side's store keeps
        only records after 20 s minus the retention (2 s), so it is not joined (as in Kafka).

        >>> ids = KStream(df.withColumn("value", F.col("event_id")))
        >>> joined = ks.join(ids, lambda fruit, id: F.concat(fruit, F.lit("+"), id),
        ...                  JoinWindows.of_time_difference_with_no_grace("1 second"))
        >>> sorted(r.value for r in joined.df.collect())
        ['apple+e1', 'apricot+e3', 'avocado+e1', 'banana+e2']

        Args:
            other: the stream joined with this one.
            joiner: the result value: a Column, or a function of this stream's value and the other stream's
                value Columns returning one.
            windows: how far apart the timestamps of joined records may be, and the grace for late records.

        Returns:
            The joined records (``key``, ``value``, ``timestamp``).

        Raises:
            KStreamsError: if ``other`` is not a :class:`KStream`, ``windows`` is not a :class:`JoinWindows`,
                or ``joiner`` is neither a Column nor a callable, or the callable raises or returns no Column.
        """
        return self._stream_join(other, joiner, windows, "join")

    def left_join(self, other: KStream, joiner: Column | KeyValueFunction, windows: JoinWindows) -> KStream:
        """:meth:`join`, plus each record of this stream that never matched, with a null other
        value, once its window has closed (at its own timestamp).

        Args:
            other: as in :meth:`join`.
            joiner: as in :meth:`join`.
            windows: as in :meth:`join`.

        Returns:
            The joined records, and this stream's unmatched records with a null other value.

        Raises:
            KStreamsError: as :meth:`join`.
        """
        return self._stream_join(other, joiner, windows, "leftJoin")

    def outer_join(self, other: KStream, joiner: Column | KeyValueFunction, windows: JoinWindows) -> KStream:
        """:meth:`join`, plus the unmatched records of both streams once their windows closed.

        Args:
            other: as in :meth:`join`.
            joiner: as in :meth:`join`.
            windows: as in :meth:`join`.

        Returns:
            The joined records, and both streams' unmatched records.

        Raises:
            KStreamsError: as :meth:`join`.
        """
        return self._stream_join(other, joiner, windows, "outerJoin")

    def _stream_join(self, other: KStream, joiner, windows: JoinWindows, method: str) -> KStream:
        what = JOIN_KINDS[method]
        if not isinstance(other, KStream):
            raise KStreamsError(f"{what} join takes a KStream, got {type(other).__name__}")
        if not isinstance(windows, JoinWindows):
            raise KStreamsError(f"{what} join takes JoinWindows, got {type(windows).__name__}")
        joined = door(self._spark).function2(joined_column(self._spark, joiner))
        return self._next(getattr(self._j, method)(other._j, joined, windows._to_java(self._spark)))

    def _column(self, function, what: str, arity: int):
        """``function`` (a Column, or a callable given the key/value Columns) as a Java Column."""
        return applied(function, what, *self._inputs(arity))

    def _inputs(self, arity: int) -> tuple:
        """The Columns a user function receives: (key, value), or (value,)."""
        key, value = F.col(quote(self._names["key"])), F.col(quote(self._names["value"]))
        return (key, value) if arity == 2 else (value,)

    def _next(self, jks: JavaObject) -> KStream:
        return KStream._from_java(jks, self._spark)

    @staticmethod
    def _from_java(jks: JavaObject, spark) -> KStream:
        """The Python face of the JVM ``KStream`` ``jks`` (one handle per object)."""
        stream = KStream.__new__(KStream)
        stream._df = python_dataframe(jks.df(), spark)
        stream._column_names = None  # read by _names when needed
        stream._spark = spark
        stream._j = jks
        return stream

    def process(
        self,
        supplier: type[Processor] | Callable[[], Processor],
        stores: Iterable[StoreSpec] = (),
        name: str | None = None,
        wall_clock: bool = False,
        key_type: DataType | None = None,
        value_type: DataType | None = None,
    ) -> KStream:
        """Run a Python :class:`~kstreams_spark.processor.Processor` (KIP-28) on each input
        partition, in arrival order, with the declared key-value stores (kept in Spark's
        checkpointed state store). The result holds what it forwarded: key and value (the input's
        column types, or ``key_type`` / ``value_type``), ``timestamp``, ``partition``, and
        ``offset`` (None when forwarded from a punctuation).

        ``supplier`` is the processor class or a function returning a new processor; ``name``
        (default: the class name) appears in errors; ``wall_clock=True`` enables wall-clock
        punctuation (Spark processing-time timers: a micro-batch every trigger interval).

        >>> class Upper(Processor):
        ...     def init(self, context):
        ...         self.context = context
        ...     def process(self, record):
        ...         self.context.forward(record.key, record.value.upper())
        >>> [r.value for r in KStream(df).process(Upper).df.orderBy("offset").collect()]
        ['APPLE', 'BANANA', 'AVOCADO', 'APRICOT', 'BLUEBERRY']

        Args:
            supplier: the processor class, or a function returning a new processor.
            stores: the key-value stores the processor uses, each declared with :meth:`Stores.key_value` under
                a name of its own.
            name: the processor's name in errors; None: the class name.
            wall_clock: True enables wall-clock punctuation (Spark processing-time timers); streaming only.
            key_type: the Spark type of the result's key column; None: the input key column's type.
            value_type: the Spark type of the result's value column; None: the input value column's type.

        Returns:
            The records the processor forwarded: key, value, ``timestamp``, ``partition`` and ``offset`` (None
            when forwarded from a punctuation).

        Raises:
            KStreamsError: if ``supplier`` is neither a processor class nor a function returning a processor
                (an instance is refused), ``stores`` is not a list of distinct store declarations, ``name`` is
                not a str, ``key_type`` or ``value_type`` is not a pyspark DataType, or ``wall_clock`` is True
                for a batch DataFrame.
        """
        from kstreams_spark import _processor_plan

        result = _processor_plan.process(self, supplier, stores, name, wall_clock, key_type, value_type)
        return KStream(result, **self._names)

    def __repr__(self) -> str:
        return f"KStream({', '.join(f'{k}={v!r}' for k, v in self._names.items())})"


class BranchedKStream:
    """``KStream.split()``: branches in order; a record goes to the first whose predicate holds.

    >>> by_letter = ks.split().branch(F.col("value").startswith("ap"), "ap").branch(
    ...     F.col("value").startswith("b"), "b").default_branch("other")
    >>> {name: [r.value for r in branch.df.collect()] for name, branch in by_letter.items()}
    {'ap': ['apple', 'apricot'], 'b': ['banana', 'blueberry'], 'other': ['avocado']}
    """

    def __init__(self, stream: KStream, branches: list) -> None:
        self._stream, self._branches = stream, branches

    def branch(self, predicate: Column | KeyValueFunction, name: str) -> BranchedKStream:
        """Add a branch ``name`` for the records ``predicate`` is true for (null counts as false).

        Args:
            predicate: the branch's condition: a Column, or a function of the key and value Columns returning
                one (called once, to build the expression); null counts as false.
            name: the branch's name, its key in the dict the branches end in.

        Returns:
            The branches so far, this one last.
        """
        return BranchedKStream(self._stream, self._branches + [(predicate, name)])

    def default_branch(self, name: str) -> dict[str, KStream]:
        """The branches as a dict of name to :class:`KStream`, plus ``name`` for the rest.

        Args:
            name: the name of the branch of the records no predicate took.

        Returns:
            The branches by name, ``name`` last.

        Raises:
            KStreamsError: if a branch's predicate is neither a Column nor a callable, or the callable raises
                or returns no Column.
        """
        return self._build(lambda j: j.defaultBranch(name), [name])

    def no_default_branch(self) -> dict[str, KStream]:
        """The branches; records no predicate took are dropped (as in Kafka Streams)."""
        return self._build(lambda j: j.noDefaultBranch(), [])

    def _build(self, finish, default: list[str]) -> dict[str, KStream]:
        s = self._stream
        jbranched = s._j.split()
        for predicate, name in self._branches:
            jbranched = jbranched.branch(s._column(predicate, "predicate", 2), name)
        jbranches = door(s._spark).branches(finish(jbranched))
        return {name: s._next(jbranches[name]) for name in [n for _, n in self._branches] + default}
