"""A query's kstreams state in its checkpoint, without running the query: read it, or move it to
another number of state partitions (the manual, "Operating a query").

The Scala API is ``kstreams.CheckpointState``; these functions call it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from kstreams_spark._jvm import door, is_connect, java_session, python_dataframe
from kstreams_spark.errors import KStreamsError


def checkpoint_operators(spark: SparkSession, checkpoint: str) -> list[str]:
    """The kstreams operators ``checkpoint`` records, in plan order (operator 1 first), as the
    descriptors a restart is checked against (spec section 8); empty if it records none.

    >>> checkpoint_operators(spark, "/no/such/checkpoint")
    []

    A classic session reads the checkpoint where the driver runs; a Spark Connect session, where
    the server runs.

    Args:
        spark: a classic or a Spark Connect session.
        checkpoint: the query's checkpoint location.

    Returns:
        The operators' descriptors, in plan order; empty if the checkpoint records none.
    """
    return list(door(spark).checkpointOperators(_jvm_session(spark), checkpoint))


def read_state(spark: SparkSession, checkpoint: str, operator: int = 1) -> DataFrame:
    """The state of operator number ``operator`` (from 1, as :func:`checkpoint_operators` lists
    them) as of the checkpoint's last committed micro-batch: one row per entry that decides the
    next records.

    * ``deduplicate_by_key``, ``deduplicate_by_key_value`` (spec section 2): per (input partition,
      dedup key) ``partition``, the key columns (``key``, and ``id`` for
      ``deduplicate_by_key_value``), ``timestamp`` and ``offset`` of the entry, ``live_until``
      (``timestamp`` + interval: the largest stream time at which it lives) and the partition's
      ``stream_time``. A record with that key in that partition and a timestamp within the
      interval of ``timestamp`` is dropped as a duplicate while the entry lives; any other record
      is forwarded.
    * ``deduplicate`` (spec section 2, one store over all partitions): per live id its ``group``
      (of the store's 64 id groups), the ``id``, ``timestamp``, ``partition`` and ``offset`` of the
      entry, ``live_until`` and ``live_for_partitions``: the partitions whose stream time is at most
      ``live_until``. A record with that id from one of them and a timestamp within the interval of
      ``timestamp`` is dropped as a duplicate; any other record is forwarded.
    * ``windowed_distinct``, ``session_distinct`` (spec section 3): per open window
      ``partition``, the key, ``window_start``, ``window_end``, ``open_until`` (the largest stream
      time at which it still takes records) and ``stream_time``; a record of that key and window is
      a duplicate while it is open.
    * ``to_table`` (spec section 6): per key its current ``value`` and ``timestamp``; an update
      with an equal value and a timestamp not older is dropped as idempotent (KIP-557).

    A checkpoint last run by a release before this function existed shows ``key_bytes`` or
    ``value_bytes`` (encoded) until its query runs once more.

    Raises :class:`KStreamsError` for a path that is not a kstreams checkpoint, an operator number
    it does not record, another kind of operator, or one with no committed state yet. A classic
    session reads the checkpoint where the driver runs; a Spark Connect session, where the server runs.

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> df.write.parquet(f"{root}/in")
    >>> query = (
    ...     KStream(spark.readStream.schema(df.schema).parquet(f"{root}/in"))
    ...     .deduplicate_by_key("10 seconds")
    ...     .df.writeStream.format("noop")
    ...     .option("checkpointLocation", f"{root}/checkpoint")
    ...     .trigger(availableNow=True)
    ...     .start()
    ... )
    >>> query.awaitTermination()
    >>> checkpoint_operators(spark, f"{root}/checkpoint")
    ['deduplicate_by_key(partition=partition, interval=PT10S, key=key)']
    >>> for row in read_state(spark, f"{root}/checkpoint").collect():  # a@20 alone is live at 20
    ...     print(row.partition, row.key, row.timestamp, row.offset, row.live_until, row.stream_time)
    0 a 2026-01-01 00:00:20 3 2026-01-01 00:00:30 2026-01-01 00:00:20

    Args:
        spark: a classic or a Spark Connect session.
        checkpoint: the query's checkpoint location.
        operator: the operator's number, from 1 (the default), as :func:`checkpoint_operators` lists them.

    Returns:
        The operator's state: one row per entry that decides the next records.

    Raises:
        KStreamsError: for a path that is not a kstreams checkpoint, an operator number it does not record (or
            not an int), another kind of operator, or one with no committed state yet.
    """
    if isinstance(operator, bool) or not isinstance(operator, int):
        raise KStreamsError(f"operator must be an operator number (1, 2, ...), got {operator!r}")
    return python_dataframe(door(spark).readState(_jvm_session(spark), checkpoint, operator), spark)


def repartition_state(
    spark: SparkSession, checkpoint: str, partitions: int, file_sinks: Sequence[str] = ()
) -> int:
    """Moves the state of the stopped query of ``checkpoint`` to ``partitions`` state partitions
    (Spark's offline state repartitioner, Spark 4.3); returns the number it had. The query's next
    run uses the new number whatever its session's ``spark.sql.shuffle.partitions`` says, and gives
    the results of the query that never stopped: each operator's groups keep their entries, stream
    times and timers (spec section 8).

    A query that writes to a file sink (Parquet, JSON...): name its output path in ``file_sinks``.
    The move adds a micro-batch to the checkpoint, and the file sink's log must get an (empty) entry
    for it, or the output cannot be read nor the log compacted.

    Raises :class:`KStreamsError`, before anything is written, for a path that is not a kstreams
    checkpoint, a query running on it in this driver, a micro-batch planned but not committed (a
    query running elsewhere, or stopped by a failure: run it until it commits, stop it, then
    move), no committed micro-batch, the number it already has, or state not kept in RocksDB. A
    classic session moves the checkpoint where the driver runs (and checks for queries running in
    this driver); a Spark Connect session, where the server runs (and checks the server's).

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> df.write.parquet(f"{root}/in")
    >>> stream = KStream(spark.readStream.schema(df.schema).parquet(f"{root}/in"))
    >>> writer = stream.deduplicate_by_key("10 seconds").df.writeStream.format("noop")
    >>> writer.option("checkpointLocation", f"{root}/checkpoint").trigger(availableNow=True).start(
    ... ).awaitTermination()  # in a session with spark.sql.shuffle.partitions=2
    >>> repartition_state(spark, f"{root}/checkpoint", partitions=3)
    2
    >>> [(row.key, row.offset) for row in read_state(spark, f"{root}/checkpoint").collect()]
    [('a', 3)]

    Args:
        spark: a classic or a Spark Connect session.
        checkpoint: the checkpoint location of the stopped query.
        partitions: the new number of state partitions.
        file_sinks: the output paths of the query's file sinks (Parquet, JSON and the like), whose logs get an
            entry for the micro-batch the move adds; empty by default.

    Returns:
        The number of state partitions the state had.

    Raises:
        KStreamsError: before anything is written: for a path that is not a kstreams checkpoint, a query
            running on it in this driver, a micro-batch planned but not committed, no committed micro-batch,
            the number it already has, state not kept in RocksDB, ``partitions`` not an int, or ``file_sinks`` a
            single string.
    """
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        raise KStreamsError(
            f"partitions must be a number of state partitions (1, 2, ...), got {partitions!r}"
        )
    if isinstance(file_sinks, str):
        raise KStreamsError(f"file_sinks is a list of output paths, got the string {file_sinks!r}")
    sinks = json.dumps([str(path) for path in file_sinks])
    return int(door(spark).repartitionState(_jvm_session(spark), checkpoint, partitions, sinks))


def _jvm_session(spark: SparkSession):
    """The JVM session of a classic ``spark``; None over Spark Connect, where the server works in
    the client's session there (PythonAPI's checkpoint calls)."""
    return None if is_connect(spark) else java_session(spark)
