"""The query that tests/test_kafka_crash.py kills: a child process with its own Spark session.

``python kafka_crash_job.py BOOTSTRAP TOPIC OUTPUT_TOPIC PARQUET_DIR CHECKPOINT_DIR MAX_OFFSETS``
runs ``deduplicate_by_key("10 seconds")`` on TOPIC into OUTPUT_TOPIC (Kafka sink, at-least-once)
and PARQUET_DIR (file sink, exactly-once), one query per sink with checkpoints under
CHECKPOINT_DIR/{kafka,parquet}, until the input present at start is consumed; exits 0 when done.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kafka_streams import OPERATORS, kafka_source, start_kafka_sink, start_parquet_sink  # noqa: E402
from local_spark import local_spark  # noqa: E402


def main(
    bootstrap: str, topic: str, output_topic: str, parquet: str, checkpoints: str, max_offsets: str
) -> None:
    spark = local_spark("kstreams-spark crash job", **{"spark.ui.showConsoleProgress": "false"})
    op = OPERATORS["dedup_by_key"]
    queries = [
        start_kafka_sink(
            op(kafka_source(spark, bootstrap, topic, int(max_offsets))),
            bootstrap,
            output_topic,
            os.path.join(checkpoints, "kafka"),
        ),
        start_parquet_sink(
            op(kafka_source(spark, bootstrap, topic, int(max_offsets))),
            parquet,
            os.path.join(checkpoints, "parquet"),
        ),
    ]
    print("started", flush=True)
    for q in queries:
        q.awaitTermination()
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
