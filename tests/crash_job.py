"""The child process that tests/test_crash.py kills: ``python crash_job.py SETUP_JSON``.

Starts the crash harness's queries (tests/crash.py ``start_queries``) with the marker, in a Spark
session of its own, and waits until they have consumed their input; exits 0 when done.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from crash import await_queries, start_queries  # noqa: E402
from local_spark import local_spark  # noqa: E402


def main(setup_path: str) -> None:
    setup = json.load(open(setup_path))
    spark = local_spark(
        "kstreams-spark crash job",
        **{
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.streaming.stateStore.rocksdb.compactOnCommit": "false",
        },
    )
    queries = start_queries(spark, setup, setup["marker"])
    print("started", flush=True)
    await_queries(spark, setup, setup["marker"], queries)
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
