"""The DSL on a real Kafka topic: an aggregation written back with `KStream.to(topic)`, whose
records carry the KIP-258 result timestamp in the `kstreams.timestamp` header."""

from kafka_broker import produce, read_topic
from kafka_streams import kafka_source
from kstreams_spark import KStream


def test_count_to_kafka_topic_with_result_timestamps(spark, kafka, tmp_path):
    source, sink = kafka.create_topic("dsl-in", partitions=2), kafka.create_topic("dsl-counts", partitions=1)
    # key "1": values at 5, 3, 10 (ms) -> counts 1@5, 2@5, 3@10; key "2" on the other partition
    produce(
        kafka.bootstrap, source, [(0, "1", "a", 5), (0, "1", "b", 3), (0, "1", "c", 10), (1, "2", "x", 7)]
    )
    df = kafka_source(spark, kafka.bootstrap, source, max_offsets=100)
    counts = KStream(df.withColumn("key", df.key.cast("string"))).group_by_key().count().to_stream()
    query = (
        counts.to(sink, **{"kafka.bootstrap.servers": kafka.bootstrap})
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    out = read_topic(kafka.bootstrap, sink)
    epoch_ms = lambda ms: str(ms).encode()  # noqa: E731 (the records were produced at epoch + ms)
    assert sorted((r.key, r.value, dict(r.headers)["kstreams.timestamp"]) for r in out) == sorted(
        [
            (b"1", b"1", epoch_ms(5)),
            (b"1", b"2", epoch_ms(5)),
            (b"1", b"3", epoch_ms(10)),
            (b"2", b"1", epoch_ms(7)),
        ]
    )
