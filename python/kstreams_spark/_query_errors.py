"""Our message first when Spark stops a query (or a job) because of a kstreams error.

Spark wraps an operator's ``kstreams.KStreamsException`` (or a Python processor's
:class:`KStreamsError`, raised in a Python worker) in its own errors: ``[STREAM_FAILED] Query
[id = ...] terminated with exception: [TRANSFORM_WITH_STATE_USER_FUNCTION_ERROR] ...``, a worker
traceback, a plan dump, the JVM stack; our sentence is somewhere inside. PySpark turns a JVM error
into a Python exception in one function, in a classic session
(``pyspark.errors.exceptions.captured.convert_exception``, which every py4j call goes through)
and over Spark Connect (``convert_exception`` of the Connect client). There is no other hook, so
:func:`install_classic_hook` and :func:`install_connect_hook` wrap those functions: an error whose
cause chain holds one of ours becomes a :class:`KStreamsError` (a :class:`KStreamsQueryError`
where PySpark would have raised a ``StreamingQueryException``, so ``except
StreamingQueryException`` still catches it) whose message is ours, with the exception PySpark
would have raised kept as its ``spark_exception``. Any other error is left exactly as PySpark
makes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pyspark.errors import StreamingQueryException

from kstreams_spark.errors import KStreamsError, KStreamsQueryError

JVM_ERROR_CLASS = "kstreams.KStreamsException"
PYTHON_WORKER_ERROR_CLASS = "org.apache.spark.api.python.PythonException"
# how a Python worker's traceback names a KStreamsError raised in it, on the error's last line
PYTHON_ERROR_LINE = f"{KStreamsError.__module__}.{KStreamsError.__name__}: "


def message_of(class_name: str, message: str | None) -> str | None:
    """Our message if one link of a cause chain is our error, else None: the JVM's
    ``KStreamsException``, or a Python worker's error whose traceback ends in a KStreamsError (the
    worker's own traceback, not an error that quotes it: those say more after it)."""
    if class_name == JVM_ERROR_CLASS:
        return message or ""
    if class_name == PYTHON_WORKER_ERROR_CLASS and message and PYTHON_ERROR_LINE in message:
        # Spark appends the error's SQLSTATE to the worker's traceback
        last = re.sub(r"\s*SQLSTATE: \w+\s*$", "", message.rsplit(PYTHON_ERROR_LINE, 1)[1]).strip()
        # ours only if it ended the worker: not one a user's processor caught and raised another for
        if not any(chained in last for chained in _CHAINED):
            return last
    return None


# what Python writes between a chained exception's traceback and the next one
_CHAINED = (
    "Traceback (most recent call last):",
    "During handling of the above exception",
    "The above exception was the direct cause",
)


def message_in_chain(throwable: Any) -> str | None:
    """Our message in a py4j Java throwable's cause chain (the first link that is ours), or None."""
    seen = 0
    while throwable is not None and seen < 20:
        message = message_of(throwable.getClass().getName(), throwable.getMessage())
        if message is not None:
            return message
        throwable = throwable.getCause()
        seen += 1
    return None


def ours_first(message: str, converted: BaseException) -> BaseException:
    """The exception to raise in place of ``converted`` (what PySpark made of the JVM's error):
    ours, with ``converted`` kept, and its traceback, which PySpark reads from a Python worker's
    text, so a processor's failure still shows the user's own lines."""
    kind = KStreamsQueryError if isinstance(converted, StreamingQueryException) else KStreamsError
    error = kind(message)
    error.spark_exception = converted
    return error.with_traceback(converted.__traceback__)


def install_classic_hook() -> None:
    """Wraps PySpark's conversion of py4j errors (once; idempotent)."""
    from pyspark.errors.exceptions import captured

    _wrap(captured, lambda java_error, *_: message_in_chain(java_error))


def install_connect_hook() -> None:
    """Wraps the Spark Connect client's conversion of a server's error (once; idempotent). The
    client fetches the error's cause chain from the server (``FetchErrorDetails``), each link with
    its class names and message."""
    from pyspark.sql.connect.client import core

    def message(_info: Any, _truncated: str, details: Any = None, *_: Any) -> str | None:
        for link in getattr(details, "errors", None) or []:
            classes = list(link.error_type_hierarchy)
            found = message_of(classes[0] if classes else "", link.message)
            if found is not None:
                return found
        return None

    _wrap(core, message)


def _wrap(module: Any, find: Callable[..., str | None]) -> None:
    original = module.convert_exception
    if getattr(original, "kstreams_hook", False):
        return

    def convert_exception(*args: Any, **kwargs: Any) -> BaseException:
        converted = original(*args, **kwargs)
        try:
            message = find(*args, **kwargs)
        except Exception:  # noqa: BLE001 (reading the chain must never hide Spark's own error)
            return converted
        return converted if message is None else ours_first(message, converted)

    convert_exception.kstreams_hook = True  # type: ignore[attr-defined]
    module.convert_exception = convert_exception
