"""``KTable``: a changelog table (an update stream of key, value, timestamp; null value = delete)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession

from kstreams_spark._jvm import JavaObject, door, python_dataframe
from kstreams_spark.errors import KStreamsError
from kstreams_spark.kstream import JOIN_KINDS, KeyValueFunction, KStream, joined_column


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
        """
        return self._join(other, joiner, "join")

    def left_join(self, other: KTable, joiner: Column | KeyValueFunction) -> KTable:
        """:meth:`join`, also emitting ``joiner(this_value, None)`` while ``other`` has no row."""
        return self._join(other, joiner, "leftJoin")

    def outer_join(self, other: KTable, joiner: Column | KeyValueFunction) -> KTable:
        """:meth:`join`, emitting whenever either side has a row (the missing value is null)."""
        return self._join(other, joiner, "outerJoin")

    def _join(self, other: KTable, joiner, method: str) -> KTable:
        if not isinstance(other, KTable):
            what = JOIN_KINDS[method]
            raise KStreamsError(f"a table {what} join takes a KTable, got {type(other).__name__}")
        joined = door(self._spark).function2(joined_column(self._spark, joiner))
        return KTable._from_java(getattr(self._j, method)(other._j, joined), self._spark)

    def __repr__(self) -> str:
        return f"KTable({self._df.columns})"
