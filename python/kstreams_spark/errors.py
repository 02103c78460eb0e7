"""Errors raised by kstreams_spark."""


class KStreamsError(ValueError):
    """Bad input or bad usage; the message says what to change.

    >>> raise KStreamsError("no key column 'k'")
    Traceback (most recent call last):
    ...
    kstreams_spark.errors.KStreamsError: no key column 'k'
    """
