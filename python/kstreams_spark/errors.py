"""Errors raised by kstreams_spark."""

from pyspark.errors import StreamingQueryException


class KStreamsError(ValueError):
    """Bad input or bad usage; the message says what to change.

    Raised where the library is called, and by a Spark action or a query that an operator's check
    stops (a null timestamp, a checkpoint of another operator, a processor's failure): then its
    message is the library's, first, and ``spark_exception`` is the error PySpark would have
    raised (Spark's wrapping, the JVM stack, a Python worker's traceback).

    >>> raise KStreamsError("no key column 'k'")
    Traceback (most recent call last):
    ...
    kstreams_spark.errors.KStreamsError: no key column 'k'

    >>> null_timestamp = df.withColumn("timestamp", F.lit(None).cast("timestamp"))
    >>> KStream(null_timestamp).deduplicate_by_key("10 seconds").df.collect()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kstreams_spark.errors.KStreamsError: null timestamp in column 'timestamp' at partition 0, offset ...
    """

    spark_exception: BaseException | None = None


class KStreamsQueryError(KStreamsError, StreamingQueryException):
    """A streaming query stopped by the library's check: what ``awaitTermination()`` and
    ``processAllAvailable()`` raise in place of Spark's ``StreamingQueryException`` (which it also
    is, so ``except StreamingQueryException`` still catches it). Its message is the library's;
    ``spark_exception`` keeps Spark's (``[STREAM_FAILED] Query [id = ...] terminated with
    exception: ...``).

    >>> from pyspark.errors import StreamingQueryException
    >>> issubclass(KStreamsQueryError, KStreamsError), issubclass(KStreamsQueryError, StreamingQueryException)
    (True, True)
    """

    def __init__(self, message: str) -> None:
        KStreamsError.__init__(self, message)
        StreamingQueryException.__init__(self, message)

    def __str__(self) -> str:
        return str(self.args[0])

    # PySpark's error API answers for the query's failure (Spark's STREAM_FAILED), message ours
    def getMessage(self) -> str:  # noqa: N802 (PySpark's name)
        return str(self)

    def getCondition(self) -> str | None:  # noqa: N802
        return _spark(self, "getCondition")

    def getSqlState(self) -> str | None:  # noqa: N802
        return _spark(self, "getSqlState")

    def getMessageParameters(self) -> dict[str, str] | None:  # noqa: N802
        return _spark(self, "getMessageParameters")


def _spark(error: KStreamsError, method: str):
    """What ``error.spark_exception`` answers to ``method`` (None without one)."""
    spark = error.spark_exception
    return getattr(spark, method)() if spark is not None and hasattr(spark, method) else None
