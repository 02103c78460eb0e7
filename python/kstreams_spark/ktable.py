"""``KTable``: a changelog table (an update stream of key, value, timestamp; null value = delete)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession

from kstreams_spark._dsl import JOIN_KINDS, KeyValueFunction, joined_column
from kstreams_spark._jvm import JavaObject, door, python_dataframe
from kstreams_spark.errors import KStreamsError
from kstreams_spark.kstream import KStream


class KTable:
    """A table as Kafka Streams forwards it: ``df`` holds one row per change (key, value,
    timestamp; a null value deletes the key; windowed aggregations add ``window``). The
    ``timestamp`` column keeps the input's watermark, so event-time operators can follow.

    >>> counts = KStream(df).group_by_key().count()
    >>> [(r.value, r.timestamp.second) for r in counts.df.where("key = 'b'").orderBy("timestamp").collect()]
    [(1, 1), (2, 3)]
    """

    def __init__(self, jtable: JavaObject, spark: SparkSession) -> None:
        self._j, self._spark = jtable, spark
        self._df = python_dataframe(jtable.df(), spark)

    @staticmethod
    def _from_java(jtable: JavaObject, spark: SparkSession) -> KTable:
        """The Python face of the JVM ``KTable`` ``jtable`` (one handle per object)."""
        return KTable(jtable, spark)

    @property
    def df(self) -> DataFrame:
        """The table's update stream."""
        return self._df

    @property
    def side_output(self) -> DataFrame:
        """The input records the aggregation that made this table routed aside: with
        ``late_records="side_output"`` on a windowed ``count``, ``reduce`` or ``aggregate``, the
        records of closed windows, unchanged (the input stream's columns), then
        ``kstreams_reason`` (``"window closed"``, as windowed distinct's side output).

        A query that writes it alone runs the aggregation again, on its own checkpoint, with the
        same results; :attr:`with_side_output` writes both outputs from one query.

        >>> windows = TimeWindows.of_size_with_no_grace("10 seconds")
        >>> counts = ks.group_by_key().windowed_by(windows).count(late_records="side_output")
        >>> counts.side_output.columns
        ['key', 'value', 'timestamp', 'partition', 'offset', 'event_id', 'seq', 'kstreams_reason']
        >>> ks.group_by_key().windowed_by(windows).count().side_output
        Traceback (most recent call last):
        ...
        kstreams_spark.errors.KStreamsError: this table has no side output: ...
        """
        return python_dataframe(self._j.sideOutput(), self._spark)

    @property
    def with_side_output(self) -> DataFrame:
        """:attr:`df`'s updates and :attr:`side_output`'s records in one DataFrame, for one query
        with one run of the aggregation that writes both. Columns: :attr:`df`'s (key, ``window``,
        value, timestamp), then ``kstreams_reason``, then ``kstreams_late_record``, a struct
        holding the late input record. An update has both null; a late record has the reason, the
        struct, and null table columns.

        Why a struct: an update and a late record have different columns, often under the same
        names (``value`` is a count here, a string there), so neither fits the other's schema; the
        struct keeps both as they are, and the reason column is :attr:`KStream.with_side_output`'s::

            def write_both(batch, batch_id):
                batch.persist()  # the aggregation runs once; each write reads the persisted rows
                updates = batch.where("kstreams_reason is null")
                updates.drop("kstreams_reason", "kstreams_late_record").write.mode("append").parquet(out)
                late_records = batch.where("kstreams_reason is not null")
                late_records.select("kstreams_late_record.*", "kstreams_reason").write.mode("append").parquet(late)
                batch.unpersist()

            table.with_side_output.writeStream.foreachBatch(write_both).start()

        >>> windows = TimeWindows.of_size_with_no_grace("10 seconds")
        >>> counts = ks.group_by_key().windowed_by(windows).count(late_records="side_output")
        >>> counts.with_side_output.columns
        ['key', 'window', 'value', 'timestamp', 'kstreams_reason', 'kstreams_late_record']
        """
        return python_dataframe(self._j.withSideOutput(), self._spark)

    def to_stream(self) -> KStream:
        """The update stream as a :class:`KStream`."""
        return KStream._from_java(self._j.toStream(), self._spark)

    def join(self, other: KTable, joiner: Column | KeyValueFunction) -> KTable:
        """Inner join on the key: on every change of either side where both have a row, emits
        ``joiner(this_value, other_value)`` at the later of the two rows' timestamps; a delete emits
        a tombstone at the later of the delete and the other row.

        >>> fruits = KStream(df).to_table()
        >>> ids = KStream(df.withColumn("value", F.col("event_id"))).to_table()
        >>> joined = fruits.join(ids, lambda fruit, id: F.concat(fruit, F.lit("+"), id)).df
        >>> [r.value for r in joined.where("key = 'b'").orderBy("timestamp").collect()]
        ['banana+e2', 'blueberry+e2', 'blueberry+e4']

        Args:
            other: the table joined with this one.
            joiner: the result value: a Column, or a function of this table's value and the other table's
                value Columns returning one.

        Returns:
            The table of the joined values.

        Raises:
            KStreamsError: if ``other`` is not a :class:`KTable`, or ``joiner`` is neither a Column nor a
                callable, or the callable raises or returns no Column.
        """
        return self._join(other, joiner, "join")

    def left_join(self, other: KTable, joiner: Column | KeyValueFunction) -> KTable:
        """:meth:`join`, also emitting ``joiner(this_value, None)`` while ``other`` has no row.

        Args:
            other: as in :meth:`join`.
            joiner: as in :meth:`join`; the other value is None while ``other`` has no row.

        Returns:
            The table of the joined values.

        Raises:
            KStreamsError: as :meth:`join`.
        """
        return self._join(other, joiner, "leftJoin")

    def outer_join(self, other: KTable, joiner: Column | KeyValueFunction) -> KTable:
        """:meth:`join`, emitting whenever either side has a row (the missing value is null).

        Args:
            other: as in :meth:`join`.
            joiner: as in :meth:`join`; the value of a side without a row is null.

        Returns:
            The table of the joined values.

        Raises:
            KStreamsError: as :meth:`join`.
        """
        return self._join(other, joiner, "outerJoin")

    def _join(self, other: KTable, joiner, method: str) -> KTable:
        if not isinstance(other, KTable):
            what = JOIN_KINDS[method]
            raise KStreamsError(f"a table {what} join takes a KTable, got {type(other).__name__}")
        joined = door(self._spark).function2(joined_column(self._spark, joiner))
        return KTable._from_java(getattr(self._j, method)(other._j, joined), self._spark)

    def __repr__(self) -> str:
        return f"KTable({self._df.columns})"
