"""``KTable``: a changelog table (an update stream of key, value, timestamp; null value = delete)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession

from kstreams_spark._jvm import jvm_errors, python_api
from kstreams_spark.errors import KStreamsError
from kstreams_spark.kstream import KeyValueFunction, KStream, joined_column


class KTable:
    """A table as Kafka Streams forwards it: ``df`` holds one row per change (key, value,
    timestamp; a null value deletes the key; windowed aggregations add ``window``). The
    ``timestamp`` column keeps the input's watermark, so event-time operators can follow.

    >>> counts = KStream(df).group_by_key().count()
    >>> counts.df.writeStream.format("console").start()
    """

    def __init__(self, jtable, spark: SparkSession) -> None:
        self._jtable, self._spark = jtable, spark
        self._df = DataFrame(jtable.df(), spark)

    @property
    def df(self) -> DataFrame:
        """The table's update stream."""
        return self._df

    def to_stream(self) -> KStream:
        """The update stream as a :class:`KStream`."""
        with jvm_errors():
            return KStream._from_jvm(python_api(self._spark).tableStream(self._jtable), self._spark)

    def join(self, other: KTable, joiner: Column | KeyValueFunction) -> KTable:
        """Inner join on the key: on every change of either side where both have a row, emits
        ``joiner(this_value, other_value)`` at the later of the two rows' timestamps; a delete emits
        a tombstone at the later of the delete and the other row.

        >>> left.to_table().join(right.to_table(), lambda l, r: F.concat(l, F.lit("+"), r))
        """
        return self._join(other, joiner, "inner")

    def left_join(self, other: KTable, joiner: Column | KeyValueFunction) -> KTable:
        """:meth:`join`, also emitting ``joiner(this_value, None)`` while ``other`` has no row."""
        return self._join(other, joiner, "left")

    def outer_join(self, other: KTable, joiner: Column | KeyValueFunction) -> KTable:
        """:meth:`join`, emitting whenever either side has a row (the missing value is null)."""
        return self._join(other, joiner, "outer")

    def _join(self, other: KTable, joiner, kind: str) -> KTable:
        if not isinstance(other, KTable):
            raise KStreamsError(f"a table {kind} join takes a KTable, got {type(other).__name__}")
        api = python_api(self._spark)
        jjoined = joined_column(api, joiner)
        with jvm_errors():
            return KTable(api.tableJoin(self._jtable, other._jtable, jjoined, kind), self._spark)

    def __repr__(self) -> str:
        return f"KTable({self._df.columns})"
