"""The kafka_sink regime (warm): the dedup's output to the noop sink, to Kafka at-least-once and
exactly once, every topic read back."""

from __future__ import annotations

import time

from bench.broker import start_broker
from bench.candidates import ROCKSDB, only
from bench.data import default_input
from bench.expected import modelled_forwarded
from bench.report import CANDIDATE, Column, every_round, finish, number, regime_table
from bench.rounds import warm_session


def topic_records(bootstrap, topic, committed):
    """How many records a consumer reads from `topic` up to its end: with `committed`, as
    `isolation.level=read_committed` (aborted transactions left out), else every record."""
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    try:
        partitions = list(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        tps = [TopicPartition(topic, p, 0) for p in partitions]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions
        }
        consumer.assign(tps)
        count, deadline = 0, time.time() + 300
        while time.time() < deadline:
            # an end offset may be a transaction marker, which no consumer receives: compare positions
            if all(
                tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in consumer.position(tps)
            ):
                return count
            count += sum(1 for m in consumer.consume(10_000, 0.5) if not m.error())
        raise RuntimeError(f"reading {topic} timed out at {count} records")
    finally:
        consumer.close()


def regime_kafka_sink(args):
    """What writing deduplicate_by_key's output to Kafka costs: the noop sink, Spark's Kafka sink
    (at-least-once) and kstreams' exactly-once Kafka sink, rows/s as the default regime."""
    from kstreams_spark import KStream

    broker = None
    written = {}  # candidate -> the topic of its latest run, checked after the run
    topic_numbers = iter(range(1_000_000))  # a new topic per run

    def to_kafka(name, exactly_once):
        def op(df):
            topic = broker.create_topic(f"{name}-{next(topic_numbers)}", partitions=args.topic_partitions)
            written[name] = topic
            options = {"kafka.bootstrap.servers": broker.bootstrap}
            return (
                KStream(df).deduplicate_by_key(args.interval).to(topic, exactly_once=exactly_once, **options)
            )

        return op

    chosen = only(
        {
            "kstreams_noop_sink": (ROCKSDB, lambda df: KStream(df).deduplicate_by_key(args.interval).df, {}),
            "kstreams_kafka_sink": (ROCKSDB, to_kafka("kstreams_kafka_sink", False), {}),
            "kstreams_exactly_once_kafka_sink": (
                ROCKSDB,
                to_kafka("kstreams_exactly_once_kafka_sink", True),
                {},
            ),
        },
        args,
    )
    with warm_session(args, "kafka-sink") as session:
        broker = start_broker(session.workdir)
        try:
            source, small = default_input(session.spark, session.workdir, args)
            # what every candidate must forward: KIP-655's rule by tests/reference.py, not the operator
            expected = modelled_forwarded(session.spark, source, args.interval)["kstreams"]
            session.warm_up(chosen, small)

            def check(name, r):
                """The topic the run wrote (the noop sink: the rows it got) holds exactly what the
                rule forwards."""
                if name in written:
                    exactly_once = "exactly_once" in name
                    r["topic_records"] = topic_records(broker.bootstrap, written.pop(name), exactly_once)
                    got = r["topic_records"]
                else:
                    got = r["forwarded"]
                if got != expected:
                    raise SystemExit(f"{name} wrote {got:,} records, KIP-655's rule forwards {expected:,}")

            results = session.rounds(
                chosen,
                source,
                "rows_per_s",
                lambda r: f"{r['rows_per_s']:,.0f} rows/s",
                check=check,
            )
        finally:
            broker.stop()
    at_least_once = next(
        (r for r in results if r["name"] == "kstreams_kafka_sink" and "error" not in r), None
    )
    table = regime_table(
        results,
        [CANDIDATE],
        [
            number("rows/s (median)", "rows_per_s"),
            Column(
                "÷ Spark's Kafka sink (at-least-once), rows/s",
                lambda r: f"{r['rows_per_s'] / at_least_once['rows_per_s']:.2f}x" if at_least_once else "",
            ),
            every_round("every round, rows/s", "rows_per_s", thousands=True),
            Column(
                "records in the topic",
                lambda r: f"{r['topic_records']:,}" if "topic_records" in r else f"({expected:,} forwarded)",
            ),
            number("seconds", "seconds", 1),
        ],
    )
    method = (
        f"The default regime's data ({args.rows:,} rows, {args.keys:,} keys, 1 in {args.dup_every} an adjacent "
        f"duplicate, {args.files} files = micro-batches, interval {args.interval}) through "
        "`deduplicate_by_key`, written three ways: the noop sink (the operator alone), "
        "`to(topic)` (Spark's Kafka sink, at-least-once) and `to(topic, exactly_once=True)` (one Kafka "
        'transaction per task and micro-batch, the manual, "Exactly once to Kafka"). Both Kafka sinks run with '
        "the Kafka client's producer defaults (idempotent, `acks=all`, `linger.ms=0` in kafka-clients 3.9.2), "
        f"into a new {args.topic_partitions}-partition topic per run on a one-node broker on the same machine "
        "(tests/kafka_broker.py; it shares the 2 cores with Spark). After every run the topic is read back: "
        "all of it for the at-least-once sink, `isolation.level=read_committed` for the exactly-once one; "
        f"each held exactly the {expected:,} records KIP-655's rule forwards (`tests/reference.py`), as did the noop sink. rows/s = input "
        f"rows / wall time of the query, the median of {args.repeat} rounds (order rotating). RocksDB "
        "state store with the session's settings, as the default regime."
    )
    finish("kafka_sink", "Writing to Kafka: at-least-once against exactly-once", table, method, results, args)
