"""``kstreams-spark dedup`` on a real broker, as a user runs it: a separate process."""

import json
import os
import subprocess
import sys
import time

from kafka_broker import produce, read_committed, read_topic
from kafka_streams import BASE_MS, PARTITIONS, as_inputs, at_least_once_records
from reference import dedup_reference

SCRIPT = os.path.join(os.path.dirname(sys.executable), "kstreams-spark")


def test_dedup_a_topic_into_another(kafka, tmp_path):
    topic = kafka.create_topic("cli-in", PARTITIONS)
    out_topic = kafka.create_topic("cli-out", PARTITIONS)
    produce(kafka.bootstrap, topic, at_least_once_records(50, seed=3))
    records = as_inputs(read_topic(kafka.bootstrap, topic))
    expected = dedup_reference(records, 10_000, key=lambda r: (r.key, json.loads(r.value)["id"]))
    assert len(expected) == 4 * 50  # one per event: every repeat is the producer's

    out = subprocess.run(
        [
            SCRIPT,
            "dedup",
            "--bootstrap-servers",
            kafka.bootstrap,
            "--topic",
            topic,
            "--output-topic",
            out_topic,
            "--checkpoint",
            str(tmp_path / "ck"),
            "--by",
            "key-value",
            "--id",
            "get_json_object(cast(value as string), '$.id')",
            "--interval",
            "10s",
            "--available-now",
            "--max-offsets-per-trigger",
            "120",
            "--shuffle-partitions",
            "2",
            "--master",
            "local[2]",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"deduplicating {topic} -> {out_topic} by key-value within 10s" in out.stdout
    assert "  batch   1:" in out.stdout  # progress, one line per micro-batch
    assert f"records in              {len(records):>12,}" in out.stdout
    assert f"forwarded               {len(expected):>12,}" in out.stdout
    assert f"duplicates dropped      {len(records) - len(expected):>12,}" in out.stdout

    written = read_topic(kafka.bootstrap, out_topic)
    as_pairs = lambda rs: sorted((r.key, r.value) for r in rs)  # noqa: E731
    assert as_pairs(as_inputs(written)) == as_pairs(expected)


def test_late_records_go_to_their_own_topic(kafka, tmp_path):
    """--late-records side_output: one query writes the forwarded records to --output-topic and
    the late ones to --late-topic, each with a kstreams_reason header; with --exactly-once, in
    Kafka transactions (read back as a read_committed consumer)."""
    from reference import dedup_reference_with_late

    topic = kafka.create_topic("cli-late-in", PARTITIONS)
    out_topic = kafka.create_topic("cli-late-out", PARTITIONS)
    late_topic = kafka.create_topic("cli-late-late", PARTITIONS)
    # the at-least-once stream, then per partition 3 new events a minute behind its stream time
    late = [
        (p, f"user-{i}", json.dumps({"id": f"late-{p}-{i}"}), BASE_MS - 60_000 + i)
        for p in range(4)
        for i in range(3)
    ]
    produce(kafka.bootstrap, topic, at_least_once_records(30, seed=5) + late)
    records = as_inputs(read_topic(kafka.bootstrap, topic))
    forwarded, late_ones = dedup_reference_with_late(
        records, 10_000, key=lambda r: (r.key, json.loads(r.value)["id"])
    )
    assert len(late_ones) == 12

    out = subprocess.run(
        [
            SCRIPT,
            "dedup",
            "--bootstrap-servers",
            kafka.bootstrap,
            "--topic",
            topic,
            "--output-topic",
            out_topic,
        ]
        + ["--checkpoint", str(tmp_path / "ck"), "--by", "key-value"]
        + ["--id", "get_json_object(cast(value as string), '$.id')", "--interval", "10s"]
        + ["--late-records", "side_output", "--late-topic", late_topic, "--exactly-once"]
        + [
            "--available-now",
            "--max-offsets-per-trigger",
            "50",
            "--shuffle-partitions",
            "2",
            "--master",
            "local[2]",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"late records to {late_topic}, exactly once" in out.stdout
    assert f"  {'late side output':<23} {12:>12,}" in out.stdout
    as_pairs = lambda rs: sorted((r.key, r.value) for r in rs)  # noqa: E731
    on_time = [r for r in forwarded if r not in late_ones]
    assert as_pairs(as_inputs(read_committed(kafka.bootstrap, out_topic))) == as_pairs(on_time)
    written_late = read_committed(kafka.bootstrap, late_topic)
    assert as_pairs(as_inputs(written_late)) == as_pairs(late_ones)
    assert all(("kstreams_reason", b"late") in r.headers for r in written_late)


def test_a_bad_id_expression_is_one_line_before_the_session_starts(kafka, tmp_path):
    """--id is read by Spark's parser in its JVM before the session starts: one line, exit 2."""
    for expression, message in [
        (
            "get_json_object(cast(value as string), '$.id'",
            "--id \"get_json_object(cast(value as string), '$.id'\": 1 '(' never closed",
        ),
        (
            "get_json_object(cast(value as string) '$.id')",
            "--id \"get_json_object(cast(value as string) '$.id')\": does not parse: "
            "[PARSE_SYNTAX_ERROR] Syntax error at or near ''$.id''",
        ),
        (
            "get_json_object(cast(valu as string), '$.id')",
            "--id \"get_json_object(cast(valu as string), '$.id')\": no column 'valu' (the columns are "
            "key, value, topic, partition, offset, timestamp, timestampType, headers)",
        ),
    ]:
        started = time.monotonic()
        out = subprocess.run(
            [SCRIPT, "dedup", "--bootstrap-servers", kafka.bootstrap, "--topic", "t", "--output-topic", "o"]
            + ["--checkpoint", str(tmp_path / "ck"), "--by", "id", "--id", expression],
            capture_output=True,
            text=True,
            timeout=120,
        )
        elapsed = time.monotonic() - started
        assert out.returncode == 2, out.stderr
        errors = [line for line in out.stderr.splitlines() if "error" in line.lower()]
        assert errors == [f"kstreams-spark dedup: error: {errors[0].split('error: ', 1)[1]}"], out.stderr
        assert message in errors[0], out.stderr
        print(f"{expression!r}: {elapsed:.1f} s")
        assert not (tmp_path / "ck").exists()


def test_an_id_type_mistake_found_by_the_analyzer_is_one_line(kafka, tmp_path):
    """An --id that parses but does not type-check (Kafka's value is binary) is found by Spark's
    analyzer once the session is up: exit 2 and one line, no query started; with --verbose the
    same line after Spark's own log."""
    expression = "get_json_object(value, '$.id')"
    command = [SCRIPT, "dedup", "--bootstrap-servers", kafka.bootstrap, "--topic", "t", "--output-topic"]
    command += ["o", "--checkpoint", str(tmp_path / "ck"), "--by", "id", "--id", expression]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr.count("\n") == 1, out.stderr[-3000:]
    assert out.stderr.startswith(
        f"kstreams-spark dedup: error: the id expression {expression} does not resolve on this DataFrame "
        "(a column of another type than the expression needs: cast it (Kafka's value and key are "
        "binary: cast(value as string))); available columns: key, value, topic, partition,"
    ), out.stderr
    assert "Spark said: [DATATYPE_MISMATCH" in out.stderr and '"BINARY"' in out.stderr, out.stderr
    assert "SQLSTATE" not in out.stderr, out.stderr
    assert not (tmp_path / "ck").exists()
    verbose = subprocess.run([SCRIPT, "--verbose", *command[1:]], capture_output=True, text=True, timeout=300)
    assert verbose.returncode == 2, verbose.stderr[-3000:]
    assert verbose.stderr.count("\n") > 1, verbose.stderr  # Spark's start-up log is kept
    assert verbose.stderr.splitlines()[-1] == out.stderr.strip(), verbose.stderr[-3000:]


def test_dedup_arguments_are_checked_before_anything_starts(tmp_path):
    out = subprocess.run(
        [
            SCRIPT,
            "dedup",
            "--bootstrap-servers",
            "127.0.0.1:1",
            "--topic",
            "t",
            "--output-topic",
            "o",
            "--checkpoint",
            str(tmp_path / "ck"),
            "--by",
            "sequence",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "error: --by sequence needs --id EXPR (the sequence number)" in out.stderr
    out = subprocess.run(
        [SCRIPT, "dedup", "--topic", "t", "--output-topic", "o", "--checkpoint", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "the following arguments are required: --bootstrap-servers" in out.stderr
