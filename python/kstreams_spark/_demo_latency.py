"""``kstreams-spark demo --bootstrap-servers HOST:PORT``: the latency of one dedup query in both
trigger modes (SEMANTICS.md section 8), side by side, on the user's broker.

Per mode, on fresh topics: the query ``KStream(df).deduplicate_by_key(interval)`` from Spark's
Kafka source to its Kafka sink, and a probe in the same driver JVM (``kstreams.internal.demo.
LatencyProbe``) that sends an at-least-once stream at a steady rate, reads the output topic, and
checks that each key came out exactly once, as its original record (the manual, "Real-time mode").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import uuid

# A real-time query holds a task slot per input partition and per state partition at once
PARTITIONS = 2
REAL_TIME_BATCH = "5 seconds"  # Spark's minimum: a batch boundary (a pause) every 5 s
WARM_UP_S = 3.0
TIMEOUT_S = 120.0

MODES = (
    ("real-time", f"trigger(realTime={REAL_TIME_BATCH!r})"),
    ("micro-batch", 'trigger(processingTime="0 seconds")'),
)


def run_latency_demo(spark, args: argparse.Namespace) -> int:
    """Runs both modes on ``spark`` (a session with at least ``2 * PARTITIONS`` task slots) and prints
    their latency; 0 when both outputs check, 1 otherwise."""
    from kstreams_spark import KStream
    from kstreams_spark._jvm import latency_probe

    probe = latency_probe(spark)
    work = os.path.join(os.path.abspath(os.path.dirname(args.output)), "latency")
    shutil.rmtree(work, ignore_errors=True)
    run_id = uuid.uuid4().hex[:8]
    print(
        f"latency, Kafka -> kstreams deduplicate_by_key({args.interval!r}) -> Kafka on {args.bootstrap_servers}: "
        f"{args.rate:,} records/s for {args.seconds:g} s on {PARTITIONS} partitions, a quarter of them "
        "sent twice (a producer retry 10-500 ms later); each mode on topics of its own, deleted after"
    )
    results = {}
    for mode, trigger in MODES:
        in_topic, out_topic = f"kstreams-demo-{run_id}-{mode}-in", f"kstreams-demo-{run_id}-{mode}-out"
        probe.createTopics(args.bootstrap_servers, in_topic, PARTITIONS, out_topic)
        source = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", args.bootstrap_servers)
            .option("subscribe", in_topic)
            .option("startingOffsets", "earliest")
            .load()
        )
        deduped = KStream(source).deduplicate_by_key(args.interval).df.select("key", "value")
        writer = (
            deduped.writeStream.format("kafka")
            .option("kafka.bootstrap.servers", args.bootstrap_servers)
            .option("topic", out_topic)
            .option("checkpointLocation", os.path.join(work, mode))
        )
        if mode == "real-time":
            writer = writer.outputMode("update").trigger(realTime=REAL_TIME_BATCH)
        else:
            writer = writer.trigger(processingTime="0 seconds")
        print(f"  {mode}: {trigger} ...", flush=True)
        query = writer.start()
        try:
            outcome = probe.run(
                args.bootstrap_servers,
                in_topic,
                out_topic,
                PARTITIONS,
                args.rate,
                float(args.seconds),
                WARM_UP_S,
                TIMEOUT_S,
            )
        except Exception as e:  # the probe's timeout: said below unless the query failed
            outcome = e
        failed = None if query.isActive else query.exception()
        query.stop()
        if failed is not None:  # the query's own error, not the probe's timeout or missing keys
            raise failed
        if isinstance(outcome, Exception):
            raise outcome
        results[mode] = json.loads(outcome)
        probe.deleteTopics(args.bootstrap_servers, [in_topic, out_topic])
    _print(results)
    bad = [mode for mode, r in results.items() if _problem(r)]
    for mode in bad:
        print(f"  {mode}: {_problem(results[mode])}")
    return 1 if bad else 0


def _problem(r: dict) -> str | None:
    """What is wrong with one mode's output, or None: each key once, as its original record."""
    wrong = [
        f"{r[name]:,} {what}"
        for name, what in (
            ("missing", "keys never came out"),
            ("repeated", "keys came out more than once"),
            ("retriesOut", "keys came out as the retry, not the original"),
        )
        if r[name]
    ]
    return "; ".join(wrong) or None


def _print(results: dict) -> None:
    def ms(v) -> str:
        return "-" if v is None else f"{v:,.0f}"

    print()
    print(f"  {'':<12} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8}  output checked")
    for mode, r in results.items():
        verdict = "each key once, the original" if not _problem(r) else "WRONG"
        print(
            f"  {mode:<12} {ms(r['p50Ms']):>8} {ms(r['p90Ms']):>8} {ms(r['p99Ms']):>8} {ms(r['maxMs']):>8}  "
            f"{r['sent']:,} keys ({r['retries']:,} sent twice): {verdict}"
        )
    print(
        "\n  latency = the output record's arrival in a consumer - its original's send, one clock; the\n"
        "  probe shares this machine's cores with the query. A real-time batch lasts "
        f"{REAL_TIME_BATCH} here\n"
        "  (Spark's minimum): records arriving at a batch boundary wait for the next batch, and a\n"
        "  fresh job catches up in its first seconds at the full rate: those are the p90 and p99.\n"
        "  Measured with a producer and consumer of their own: make bench-latency."
    )
