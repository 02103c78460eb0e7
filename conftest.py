"""The namespace the docstring examples of ``kstreams_spark`` run in (``make test`` runs them with
``pytest --doctest-modules tests python/kstreams_spark``, in the tests' Spark session): a real
local Spark session and a small batch of Kafka-style records, ``df``:

====== === ========= =================== ======== ===
offset key value     timestamp           event_id seq
====== === ========= =================== ======== ===
0      a   apple     2026-01-01 00:00:00 e1       1
1      b   banana    2026-01-01 00:00:01 e2       2
2      a   avocado   2026-01-01 00:00:05 e1       2
3      a   apricot   2026-01-01 00:00:20 e3       3
4      b   blueberry 2026-01-01 00:00:03 e4       1
====== === ========= =================== ======== ===

all on partition 0; ``ks`` is ``KStream(df)``.

At the repository's root (not next to the package) so that it and tests/conftest.py can be
collected in one run; it sets nothing up for other tests.
"""

import datetime as dt
import os
import sys
import tempfile

import pytest
from _pytest.doctest import DoctestItem

# Python processors run in Python workers: use this interpreter.
# Left unset in the README's run from the wheel (tests/test_packaging.py), as tests/conftest.py does
# there, so that that run shows configure_spark choosing the local workers' Python itself.
if "KSTREAMS_TEST_WORKERS_PYTHON_UNSET" not in os.environ:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def _doc_spark():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tests"))
    from local_spark import local_spark

    session = local_spark("kstreams-spark-doctests", long_lived=True)
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _doc_namespace(request):
    if not isinstance(request.node, DoctestItem):  # the other tests get nothing from here
        return
    doctest_namespace, _doc_spark = (
        request.getfixturevalue("doctest_namespace"),
        request.getfixturevalue("_doc_spark"),
    )
    from datetime import timedelta

    import kstreams_spark
    from kstreams_spark import KStream
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    base = dt.datetime(2026, 1, 1)
    rows = [
        ("a", "apple", 0, "e1", 1),
        ("b", "banana", 1, "e2", 2),
        ("a", "avocado", 5, "e1", 2),
        ("a", "apricot", 20, "e3", 3),
        ("b", "blueberry", 3, "e4", 1),
    ]
    df = _doc_spark.createDataFrame(
        [(k, v, base + dt.timedelta(seconds=s), 0, i, e, q) for i, (k, v, s, e, q) in enumerate(rows)],
        "key string, value string, timestamp timestamp, partition int, offset long, event_id string, seq int",
    )
    doctest_namespace.update({name: getattr(kstreams_spark, name) for name in kstreams_spark.__all__})
    doctest_namespace.update(
        spark=_doc_spark,
        SparkSession=SparkSession,
        df=df,
        ks=KStream(df),
        F=F,
        timedelta=timedelta,
        tmp=tempfile.mkdtemp(prefix="kstreams-doctest-"),
    )
