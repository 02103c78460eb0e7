"""Which link of a failed query's cause chain is the library's error (kstreams_spark._query_errors):
the reading of class names and messages, without Spark; the tests that stop real queries are in
test_bad_input.py, test_processor.py, test_exactly_once.py and test_connect.py."""

from kstreams_spark._query_errors import message_of

WORKER = "org.apache.spark.api.python.PythonException"
TRACEBACK = """[PYTHON_EXCEPTION] An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/x/_processor_runtime.py", line 97, in process
    raise KStreamsError(f"processor '{name}' failed {where}: {type(e).__name__}: {e}") from e
"""


def test_the_jvm_error_is_ours_whole():
    assert message_of("kstreams.KStreamsException", "null offset in column 'offset'") == (
        "null offset in column 'offset'"
    )
    assert message_of("org.apache.spark.SparkException", "null offset in column 'offset'") is None


def test_a_worker_traceback_ending_in_ours_gives_its_last_line_without_sqlstate():
    text = (
        TRACEBACK
        + "kstreams_spark.errors.KStreamsError: processor 'p' failed: ValueError: x\n SQLSTATE: 38000"
    )
    assert message_of(WORKER, text) == "processor 'p' failed: ValueError: x"


def test_ours_caught_and_replaced_by_another_error_is_not_ours():
    """A user's code that caught a KStreamsError and raised its own: the worker ended in the
    user's error, which Spark's text then says, not ours."""
    text = (
        TRACEBACK
        + "kstreams_spark.errors.KStreamsError: store 's' is not declared\n\n"
        + "During handling of the above exception, another exception occurred:\n\n"
        + 'Traceback (most recent call last):\n  File "/x/user.py", line 3, in f\n'
        + "RuntimeError: user wrapped it\n SQLSTATE: 38000"
    )
    assert message_of(WORKER, text) is None
    assert (
        message_of("org.apache.spark.SparkException", TRACEBACK + "kstreams_spark.errors.KStreamsError: x")
        is None
    )
