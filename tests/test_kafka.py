"""End to end on a real Kafka broker: an at-least-once producer writes a 4-partition topic, Spark
reads it with the bundled connector, an operator runs, and both a Kafka output topic and a Parquet
sink hold exactly what the spec gives for the records read back from the input topic."""

import pytest
from kafka_broker import produce, read_topic, topic_sizes
from kafka_streams import (
    OPERATORS,
    PARTITIONS,
    as_inputs,
    at_least_once_records,
    expected_by_sequence,
    expected_dedup_by_key,
    expected_tumbling_distinct,
    kafka_source,
    output_provenance,
    parquet_rows,
    rows_of,
    start_kafka_sink,
    start_parquet_sink,
)
from kstreams_spark import operator_metrics

EXPECTED = {
    "dedup_by_key": expected_dedup_by_key,
    "dedup_by_sequence": expected_by_sequence,
    "tumbling_distinct": lambda records: expected_tumbling_distinct(records, 10_000),
}


@pytest.fixture(scope="module")
def input_topic(kafka):
    """60 events per partition with retried batches and a replayed tail, as the broker stored them."""
    topic = kafka.create_topic("e2e-in", PARTITIONS)
    produce(kafka.bootstrap, topic, at_least_once_records(60, seed=5))
    return topic, as_inputs(read_topic(kafka.bootstrap, topic))


def test_the_input_has_producer_duplicates(input_topic):
    _, records = input_topic
    assert len(records) > 4 * 60
    assert set(topic_sizes(records)) == set(range(PARTITIONS))
    ids = [r.value for r in records]
    assert len(set(ids)) == 4 * 60  # every event is there; the rest are byte-identical repeats


@pytest.mark.parametrize("operator", list(OPERATORS))
def test_topic_to_topic_and_parquet(spark, kafka, input_topic, tmp_path, operator):
    topic, records = input_topic
    expected = EXPECTED[operator](records)
    assert 0 < len(expected) < len(records)
    out_topic = kafka.create_topic(f"e2e-out-{operator.replace('_', '-')}", PARTITIONS)
    op = OPERATORS[operator]
    # two queries, as a user runs them: one per sink, each with its own checkpoint
    to_kafka = start_kafka_sink(
        op(kafka_source(spark, kafka.bootstrap, topic, 150)),
        kafka.bootstrap,
        out_topic,
        str(tmp_path / "ck-kafka"),
    )
    to_parquet = start_parquet_sink(
        op(kafka_source(spark, kafka.bootstrap, topic, 150)),
        str(tmp_path / "out"),
        str(tmp_path / "ck-parquet"),
    )
    to_kafka.awaitTermination()
    to_parquet.awaitTermination()

    assert parquet_rows(spark, str(tmp_path / "out")) == rows_of(expected)
    assert output_provenance(read_topic(kafka.bootstrap, out_topic)) == rows_of(expected)
    batches = [p for p in to_parquet.recentProgress if p["numInputRows"]]
    assert len(batches) >= 2, "the input should span several micro-batches"
    assert sum(p["numInputRows"] for p in batches) == len(records)
    (counts,) = operator_metrics(to_parquet.recentProgress).values()
    assert counts["forwarded"] == len(expected)
    assert counts["duplicates_dropped"] + counts.get("late_dropped", 0) == len(records) - len(expected)
