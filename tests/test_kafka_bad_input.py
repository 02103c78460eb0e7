"""Bad input on a real topic: null keys, null values (tombstones), timestamps far in the past and
far in the future, and a value the id expression cannot parse. Nothing crashes, nothing is
silently lost: every record is forwarded, dropped and counted by the spec's rules, or the query
stops with an error that names the bad value."""

import json

import pytest
from kafka_broker import produce, read_topic
from kafka_streams import BASE_MS, as_inputs, kafka_source, parquet_rows, rows_of, start_parquet_sink
from kstreams_spark import KStream, operator_metrics
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F
from reference import dedup_reference

FAR_PAST_MS = 1  # 1970-01-01T00:00:00.001Z
FAR_FUTURE_MS = 7_258_118_400_000  # 2200-01-01T00:00:00Z


def value(id_):
    return json.dumps({"id": id_})


# (partition, key, value, timestamp ms), sent in this order
BAD = [
    (0, "a", value("1"), BASE_MS),
    (0, None, value("2"), BASE_MS + 1000),  # null key: forwarded, nothing stored
    (0, "a", None, BASE_MS + 2000),  # null value, a duplicate key within 10 s
    (0, "b", value("3"), FAR_PAST_MS),  # far past: late, forwarded, never stored
    (0, "c", "not json at all", BASE_MS + 3000),  # poison for the id expression
    (0, "d", value("x"), BASE_MS + 4000),  # an id that is not a number
    (1, "a", value("1"), BASE_MS),
    (1, "a", value("1"), BASE_MS + 5000),  # duplicate
    (1, "e", value("4"), FAR_FUTURE_MS),  # far future: every later record on partition 1 is late
    (1, "a", value("1"), BASE_MS + 6000),  # late: forwarded, not stored
    (1, "a", value("1"), BASE_MS + 7000),  # late again: forwarded
    (0, "a", value("1"), BASE_MS + 8000),  # partition 0 is unaffected: a duplicate
    (0, None, None, BASE_MS + 9000),  # null key and value
]


@pytest.fixture(scope="module")
def bad_topic(kafka):
    topic = kafka.create_topic("bad-in", 2)
    produce(kafka.bootstrap, topic, BAD)
    records = as_inputs(read_topic(kafka.bootstrap, topic))
    assert len(records) == len(BAD)  # the broker keeps all of them, timestamps as sent
    assert sorted(r.t for r in records) == sorted(t for *_, t in BAD)
    return topic, records


def json_id():
    return F.get_json_object(F.col("value").cast("string"), "$.id")


def run(spark, kafka, topic, op, root):
    # 3 records per micro-batch: the far-future record's watermark acts on later micro-batches
    query = start_parquet_sink(
        op(kafka_source(spark, kafka.bootstrap, topic, 3)), str(root / "out"), str(root / "ck")
    )
    query.awaitTermination()
    return query


@pytest.mark.parametrize("operator", ["by_key", "by_key_value"])
def test_bad_records_follow_the_spec(spark, kafka, bad_topic, tmp_path, operator):
    topic, records = bad_topic
    if operator == "by_key":
        op = lambda df: KStream(df).deduplicate_by_key("10 seconds").df  # noqa: E731
        expected = dedup_reference(records, 10_000)
    else:  # an unparsable value gives a null id: the record passes, as rule 1 says
        op = lambda df: KStream(df).deduplicate_by_key_value(json_id(), "10 seconds").df  # noqa: E731
        expected = dedup_reference(
            records,
            10_000,
            key=lambda r: (
                None
                if r.key is None or r.value is None or not r.value.startswith("{")
                else (r.key, json.loads(r.value)["id"])
            ),
        )
    query = run(spark, kafka, topic, op, tmp_path)
    got = parquet_rows(spark, str(tmp_path / "out"))
    # Exactly the spec's records: the far-future record on partition 1 moves the query's watermark
    # (global, across partitions) to 2200, but partition 0 still delivers, so the sweep does not
    # take its entry for "a", live by partition 0's own stream time (spec section 8; README,
    # "Eviction and the watermark"): its duplicate at offset 6 is dropped
    assert got == sorted(rows_of(expected))
    (counts,) = operator_metrics(query.recentProgress).values()
    assert counts["forwarded"] + counts["duplicates_dropped"] == len(records)
    assert counts["forwarded"] == len(got)


def test_an_id_that_cannot_be_cast_stops_the_query_naming_the_value(spark, kafka, bad_topic, tmp_path):
    topic, _ = bad_topic
    op = lambda df: KStream(df).deduplicate(json_id().cast("long"), "10 seconds").df  # noqa: E731
    with pytest.raises(StreamingQueryException, match=r"CAST_INVALID_INPUT.*'x'"):
        run(spark, kafka, topic, op, tmp_path)
    # the micro-batch with the bad record is not committed: a restart reads it again
    committed = sorted(p.name for p in (tmp_path / "ck" / "commits").iterdir() if p.name.isdigit())
    planned = sorted(p.name for p in (tmp_path / "ck" / "offsets").iterdir() if p.name.isdigit())
    assert len(planned) == len(committed) + 1
