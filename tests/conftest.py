import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
# Python processors run in Python workers: use this interpreter (it has pandas and pyarrow).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from local_spark import local_spark  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    """One real local Spark session with the RocksDB state store, shared by the tests."""
    session = local_spark(
        "kstreams-spark-tests", **{"spark.sql.streaming.stateStore.rocksdb.compactOnCommit": "false"}
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """A real single-node Kafka broker (KRaft) on 127.0.0.1 from `make kafka-broker`'s jars."""
    from kafka_broker import KafkaBroker

    broker = KafkaBroker(str(tmp_path_factory.mktemp("kafka-broker"))).start()
    yield broker
    broker.stop()
