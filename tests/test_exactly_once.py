"""``KStream.to(topic, exactly_once=True)`` on a real broker (the manual, "Exactly once to Kafka"): a
micro-batch that Spark runs again after a restart (its commit-log entry missing, as after a crash
between the sink's write and Spark's commit) is not written twice, where Spark's Kafka sink writes
it again. (The kill -9 test, tests/test_crash.py, runs the same sink under kills.)"""

import glob
import os

import pytest
from kafka_broker import produce, read_committed
from kafka_streams import (
    BASE_MS,
    PARTITIONS,
    as_inputs,
    at_least_once_records,
    expected_dedup_by_key,
    kafka_source,
)
from kstreams_spark import KStream, KStreamsError, KStreamsQueryError, operator_metrics
from pyspark.errors import StreamingQueryException
from streams import Rec, batch_df, with_offsets


def forget_from(checkpoint: str, batch: int) -> None:
    """Makes ``batch`` the last planned and uncommitted micro-batch, as a crash between its sink's
    write and Spark's commit leaves it: a restart runs it again."""
    for kind, first in (("commits", batch), ("offsets", batch + 1)):
        for path in glob.glob(os.path.join(checkpoint, kind, "[0-9]*")):
            if int(os.path.basename(path)) >= first:
                os.remove(path)
                crc = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.crc")
                if os.path.exists(crc):
                    os.remove(crc)


def dedup_to_kafka(spark, kafka, topic: str, out: str, checkpoint: str, exactly_once: bool):
    """deduplicate_by_key from ``topic`` to ``out`` (60 offsets per micro-batch, availableNow),
    run to its end: the query and the error that stopped it, if any."""
    query = (
        KStream(kafka_source(spark, kafka.bootstrap, topic, 60))
        .deduplicate_by_key("10 seconds")
        # acks=all is what the exactly-once sink sets itself: a setting it can honour is accepted
        .to(
            out,
            exactly_once=exactly_once,
            **{"kafka.bootstrap.servers": kafka.bootstrap, "kafka.acks": "all"},
        )
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    except StreamingQueryException as e:
        return query, e
    return query, None


@pytest.mark.parametrize("exactly_once", [True, False])
def test_a_replayed_micro_batch_is_written_once(spark, kafka, tmp_path, exactly_once):
    topic = kafka.create_topic(f"eos-in-{exactly_once}", PARTITIONS)
    out = kafka.create_topic(f"eos-out-{exactly_once}", PARTITIONS)
    # the stream ends with new keys, so that its last micro-batch forwards records
    tail = [(p, f"new-{p}", f'{{"id": "new-{p}"}}', BASE_MS + 60_000) for p in range(PARTITIONS)]
    produce(kafka.bootstrap, topic, at_least_once_records(30, seed=11) + tail)
    records = as_inputs(read_committed(kafka.bootstrap, topic))
    expected = sorted((r.key, r.value) for r in expected_dedup_by_key(records))
    checkpoint = str(tmp_path / "ck")

    def run():
        query, error = dedup_to_kafka(spark, kafka, topic, out, checkpoint, exactly_once)
        assert error is None, error
        return query

    first = run()
    assert len(first.recentProgress) >= 3
    written = lambda: sorted((r.key, r.value) for r in as_inputs(read_committed(kafka.bootstrap, out)))  # noqa: E731
    assert written() == expected
    # the last micro-batch with records (a batch without any may follow: the watermark moved)
    replayed = [p["batchId"] for p in first.recentProgress if p["numInputRows"]][-1]
    forget_from(checkpoint, replayed)
    second = run()
    assert [p["batchId"] for p in second.recentProgress if p["numInputRows"]] == [replayed]
    last_batch_rows = operator_metrics(second.recentProgress)["kstreams_deduplicate_by_key"]["forwarded"]
    assert last_batch_rows > 0
    if exactly_once:
        assert written() == expected  # the replayed batch's transactions were committed: skipped
    else:  # Spark's sink writes the replayed micro-batch again (this test can fail)
        assert len(written()) == len(expected) + last_batch_rows


def test_a_fenced_producer_loses_no_batch_and_writes_none_twice(spark, kafka, tmp_path):
    """Each task's producer is kept for the next micro-batch; when another producer of its
    transactional id starts (a zombie's successor elsewhere), the kept one is fenced: its next
    micro-batch must fail without writing, and the restarted query must write that batch once."""
    from confluent_kafka import Producer

    topic = kafka.create_topic("fence-in", PARTITIONS)
    out = kafka.create_topic("fence-out", PARTITIONS)
    produce(kafka.bootstrap, topic, at_least_once_records(20, seed=5))
    checkpoint = str(tmp_path / "ck")

    def run():
        return dedup_to_kafka(spark, kafka, topic, out, checkpoint, exactly_once=True)

    first, error = run()
    assert error is None, error
    # more input, and a new producer of every task's transactional id: it fences the kept ones
    tail = [(p, f"new-{p}", f'{{"id": "new-{p}"}}', BASE_MS + 60_000) for p in range(PARTITIONS)]
    produce(kafka.bootstrap, topic, tail)
    fencers = []
    for task in range(int(spark.conf.get("spark.sql.shuffle.partitions"))):
        fencer = Producer(
            {"bootstrap.servers": kafka.bootstrap, "transactional.id": f"kstreams-{first.id}-{task}"}
        )
        fencer.init_transactions(30)
        fencers.append(fencer)
    _, fenced = run()
    assert fenced is not None and "fenced" in str(fenced).lower(), fenced  # it wrote nothing
    fencers.clear()
    del fencer  # librdkafka's producers close when the last reference goes
    _, error = run()  # new producers: they fence the one above, read the markers and write the batch
    assert error is None, error
    records = as_inputs(read_committed(kafka.bootstrap, topic))
    expected = sorted((r.key, r.value) for r in expected_dedup_by_key(records))
    assert sorted((r.key, r.value) for r in as_inputs(read_committed(kafka.bootstrap, out))) == expected


def test_exactly_once_is_for_streaming_queries(spark):
    ks = KStream(batch_df(spark, with_offsets([Rec("a", 1)])))
    with pytest.raises(KStreamsError, match="exactly_once is for streaming queries"):
        ks.to("t", exactly_once=True)
    with pytest.raises(KStreamsError, match="exactly_once must be True or False, got 'yes'"):
        ks.to("t", exactly_once="yes")


@pytest.mark.parametrize(
    "option, value, why",
    [
        ("kafka.acks", "0", "Kafka transactions need every in-sync replica's ack"),
        (
            "kafka.transactional.id",
            "mine",
            "the sink names its transactions itself, kstreams-<query id>-<partition>",
        ),
        ("kafka.enable.idempotence", "false", "Kafka transactions need the idempotent producer"),
        (
            "kafka.key.serializer",
            "x.Y",
            "the sink writes the key column's bytes (string or binary) as they are",
        ),
        (
            "kafka.value.serializer",
            "x.Y",
            "the sink writes the value column's bytes (string or binary) as they are",
        ),
    ],
)
def test_exactly_once_refuses_a_producer_setting_it_cannot_honour(spark, tmp_path, option, value, why):
    """The sink sets these itself: a user's other value would be silently replaced or ignored, so
    the query stops at its first micro-batch naming the option, before any broker is reached (this
    one is never listening)."""
    failed = _stops_with(spark, tmp_path, "out", {"kafka.bootstrap.servers": "127.0.0.1:9", option: value})
    assert str(failed).startswith(
        f"the kstreams-kafka-eos sink cannot honour the option {option}={value}: {why}"
    )


def _rate_stream(spark):
    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 1)
        .load()
        .selectExpr("CAST(value AS STRING) AS key", "CAST(value AS STRING) AS value", "timestamp")
        .selectExpr("*", "0 AS partition", "CAST(0 AS BIGINT) AS offset")
    )


def _stops_with(spark, tmp_path, topic, options) -> KStreamsQueryError:
    query = KStream(_rate_stream(spark)).to(topic, exactly_once=True, **options)
    query = query.option("checkpointLocation", str(tmp_path / "ck")).start()
    try:
        with pytest.raises(KStreamsQueryError) as failed:
            query.awaitTermination(90)
    finally:
        query.stop()
    return failed.value


def test_exactly_once_names_an_empty_bootstrap_servers(spark, tmp_path):
    failed = _stops_with(spark, tmp_path, "out", {"kafka.bootstrap.servers": " "})
    assert str(failed) == (
        "the kstreams-kafka-eos sink's option kafka.bootstrap.servers is empty: give the host:port of "
        "at least one broker, e.g. localhost:9092"
    )


def test_exactly_once_names_the_broker_it_cannot_reach(spark, tmp_path):
    """Before its first micro-batch, in the admin call's wait (here 1.5 s): not a task's 60-second
    timeout in initTransactions that names no broker."""
    options = {"kafka.bootstrap.servers": "127.0.0.1:9", "kafka.default.api.timeout.ms": "1500"}
    failed = _stops_with(spark, tmp_path, "out", options)
    assert str(failed) == (
        "the kstreams-kafka-eos sink reached no broker at kafka.bootstrap.servers=127.0.0.1:9 in 1500 ms "
        "(asking for the output topic 'out'): check the address and that the brokers are up (the wait "
        "is kafka.default.api.timeout.ms)"
    )


def test_exactly_once_names_a_missing_output_or_marker_topic(spark, kafka, tmp_path):
    """The marker is committed in partition 0 of the output topic, or of kstreams.markerTopic: a
    topic the broker does not know would make each task retry its commit until it times out."""
    options = {"kafka.bootstrap.servers": kafka.bootstrap}
    failed = _stops_with(spark, tmp_path / "a", "no-such-output", options)
    assert str(failed) == (
        f"the output topic 'no-such-output' does not exist on the brokers at {kafka.bootstrap}; the "
        "kstreams-kafka-eos sink commits each micro-batch's marker in its partition 0 (a consumer-group "
        "offset, in the same transaction as the records), so it must exist before the query starts: "
        "create it"
    )
    out = kafka.create_topic("eos-marker-check-out", partitions=1)
    routed = _rate_stream(spark).selectExpr(f"'{out}' AS topic", "key", "value")
    query = (
        routed.writeStream.format("kstreams-kafka-eos")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("kstreams.markerTopic", "no-such-markers")
        .option("checkpointLocation", str(tmp_path / "b"))
        .start()
    )
    try:
        with pytest.raises(KStreamsQueryError) as routed_failed:
            query.awaitTermination(90)
    finally:
        query.stop()
    assert str(routed_failed.value) == (
        f"the marker topic 'no-such-markers' does not exist on the brokers at {kafka.bootstrap}; the "
        "kstreams-kafka-eos sink commits each micro-batch's marker in its partition 0 (a consumer-group "
        "offset, in the same transaction as the records), so it must exist before the query starts: "
        "create it, or name an existing topic in kstreams.markerTopic"
    )


def test_exactly_once_names_a_wait_that_is_not_a_number(spark, tmp_path):
    options = {"kafka.bootstrap.servers": "127.0.0.1:9", "kafka.default.api.timeout.ms": "soon"}
    assert str(_stops_with(spark, tmp_path, "out", options)) == (
        "the kstreams-kafka-eos sink's option kafka.default.api.timeout.ms must be a positive number of "
        "milliseconds (at most 2147483647), got 'soon'"
    )
