import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
# Python processors run in Python workers: use this interpreter (it has pandas and pyarrow). The
# The manual's run from the wheel (test_packaging) leaves it unset, so that what runs there is
# configure_spark's own choice of the local workers' Python, as for a user outside a venv.
if "KSTREAMS_TEST_WORKERS_PYTHON_UNSET" not in os.environ:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from local_spark import SHORT_LIVED_JVM_OPTIONS, local_spark  # noqa: E402

# Every process a test starts runs its JVM with these (local_spark.py says why); a user's own
# SPARK_SUBMIT_OPTS is left as it is.
os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_LIVED_JVM_OPTIONS)


@pytest.fixture(scope="session")
def spark():
    """One real local Spark session with the RocksDB state store, shared by the tests.

    Its checkpoints go through Hadoop's ``FileSystem`` API instead of ``FileContext``, only to save
    time: on a local disk without Hadoop's native library each ``FileContext`` rename starts a
    ``readlink`` process, thousands per module. For the same reason files get their permissions
    through java.nio (``kstreams.NioLocalFileSystem`` from the Scala test classes), not a ``chmod``
    process each (10-13% of a test module's time). The operators and the checkpoint's contents are
    the same; the crash tests (crash_job.py, test_cluster.py) keep Spark's default, as users run it.

    Its queries run on Spark's interpreted evaluation, not generated code (``TestSpeed.interpreted``
    in the Scala suite says why and which suites keep generated code): four modules (test_dsl,
    test_late_records, test_bad_input, test_state) took 333-344 CPU-seconds instead of 379-409.
    Every process a test starts (the crash job, the CLI, the cluster, the Connect server) runs
    generated code, as users do, and the crash test compares its killed runs row for row with an
    uninterrupted one in this session.
    """
    session = local_spark(
        "kstreams-spark-tests",
        long_lived=True,
        **{
            "spark.sql.streaming.stateStore.rocksdb.compactOnCommit": "false",
            "spark.sql.streaming.checkpointFileManagerClass": (
                "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
            ),
            "spark.hadoop.fs.file.impl": "kstreams.NioLocalFileSystem",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN",
            "spark.sql.codegen.wholeStage": "false",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """A real single-node Kafka broker (KRaft) on 127.0.0.1 from `make kafka-broker`'s jars; in a
    pytest run that another one starts (test_packaging's run of the manual's blocks), that run's broker,
    named by KSTREAMS_TEST_KAFKA_BOOTSTRAP."""
    from kafka_broker import KafkaBroker

    if os.environ.get("KSTREAMS_TEST_KAFKA_BOOTSTRAP"):
        yield KafkaBroker.attach(os.environ["KSTREAMS_TEST_KAFKA_BOOTSTRAP"])
        return
    broker = KafkaBroker(str(tmp_path_factory.mktemp("kafka-broker"))).start()
    yield broker
    broker.stop()
