"""The console script, as a user runs it: a separate process with its own Spark session."""

import json
import os
import subprocess
import sys

import pytest
from kstreams_spark import KStreamsError
from streams import Rec, with_offsets

SCRIPT = os.path.join(os.path.dirname(sys.executable), "kstreams-spark")


def test_help_lists_the_options():
    out = subprocess.run([SCRIPT, "demo", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for option in ("--input", "--key", "--timestamp", "--interval", "--output", "--checkpoint"):
        assert option in out.stdout


def test_demo_on_input_files(tmp_path):
    """--input with JSON files: string timestamps are cast, the summary counts what was dropped."""
    folder = tmp_path / "in"
    folder.mkdir()
    records = with_offsets([Rec("a", 1), Rec("a", 2), Rec("b", 3), Rec("a", 30)])
    with open(folder / "part-0.json", "w") as f:
        for r in records:
            f.write(
                json.dumps({"user": r.key, "event_time": r.timestamp().isoformat(), "offset": r.offset})
                + "\n"
            )
    out = subprocess.run(
        [
            SCRIPT,
            "demo",
            "--input",
            str(folder),
            "--key",
            "user",
            "--timestamp",
            "event_time",
            "--interval",
            "10s",
            "--output",
            str(tmp_path / "out"),
            "--master",
            "local[1]",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "records in                         4" in out.stdout
    assert "forwarded                          3" in out.stdout
    assert "dropped as duplicates              1" in out.stdout
    assert os.path.isdir(tmp_path / "out")


def test_demo_reports_a_bad_column_clearly(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "part-0.json").write_text('{"k": "a", "timestamp": "2026-01-01T00:00:00Z"}\n')
    out = subprocess.run(
        [SCRIPT, "demo", "--input", str(folder), "--output", str(tmp_path / "out"), "--master", "local[1]"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2
    assert "error: no key column 'key' in the DataFrame; available columns: k, timestamp" in out.stderr


def run_cli(*args, cwd=None, timeout=300):
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def test_interval_check_agrees_with_the_jvm_parser(spark):
    """The CLI reads --interval before Spark starts (kstreams_spark._intervals); it must accept and
    refuse exactly what the library's parser (kstreams.Intervals, the oracle here) does."""
    from kstreams_spark._intervals import interval_problem
    from kstreams_spark._jvm import door

    texts = [
        "10 seconds", "10s", "10 s", "500 ms", "1 minute 30 s", "1m30s", "2 hours", "1.5 s", "0.5 ms",
        "0.0005 ms", "1 day", "2 weeks", "interval 3 minutes", "  7 MINUTES ", "10", "seconds", "10 parsecs",
        "-5 s", "1 s 2", "10 s, 2 ms", "PT10S", "pt1m", "P1D", "P1DT2H", "PT1.5S", "PT0.0000001S", "PT",
        "P", "PT-5S", "P1W", "", "99999999999999 days", "1,5 s", "1e3 ms", "10 µs",
    ]  # fmt: skip
    # months and years: refused by both, in the same words
    calendar = ["1 month", "2 years", "1 mon", "3 mo", "P1M", "P1Y2M", "p1y", "P1MT2H"]
    for text in texts + calendar:
        try:
            jvm_accepts = isinstance(door(spark).intervalMicros(text), int)
        except KStreamsError as e:  # the JVM's refusal (a KStreamsException); any other error fails
            jvm_accepts = False
            if text in calendar:
                assert str(e) == interval_problem(text), (text, str(e))
                assert "months and years have no fixed length" in str(e), text
        assert (interval_problem(text) is None) == jvm_accepts, (text, interval_problem(text))


@pytest.mark.parametrize(
    "text, problem",
    [
        ("get_json_object(cast(value as string), '$.id')", None),
        ("VALUE", None),  # Spark resolves names case-insensitively by default
        ("transform(array(partition), x -> x + offset)", None),  # x is the lambda's, not a column
        ("key[0]", None),
        ("valu", "no column 'valu' (the columns are key, value, partition)"),
        # inside a lambda Spark's parser reads every name as a lambda variable: the analyzer decides
        ("transform(array(partition), x -> y)", None),
        (
            "concat(key,",
            "does not parse: [PARSE_SYNTAX_ERROR] Syntax error at or near end of input. (line 1, pos 11)",
        ),
    ],
)
def test_expression_text_check(text, problem, monkeypatch):
    """What the CLI says of an --id expression before Spark starts (ExpressionText, in a JVM of its
    own). expression_problem also answers None when no JVM could tell, so each case checks that
    its one JVM ran the check: exit 0 and nothing printed, or exit 1 and the problem printed."""
    from kstreams_spark._jvm import expression_problem

    runs = []
    run = subprocess.run

    def recorded(*args, **kwargs):
        runs.append(run(*args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(subprocess, "run", recorded)
    said = expression_problem(text, ["key", "value", "partition"])
    (jvm,) = runs
    assert jvm.args[-4:] == [text, "key", "value", "partition"]
    assert "kstreams.internal.plan.ExpressionText" in jvm.args
    assert (jvm.returncode, jvm.stdout) == ((0, "") if problem is None else (1, problem + "\n")), jvm.stderr
    assert said == problem


@pytest.mark.parametrize(
    "text, problem",
    [
        ("concat(key, ')')", None),
        ('`a(b` + f("x\\"(")', None),
        ("concat(key, 'x'", "1 '(' never closed"),
        ("f(a))", "unbalanced ')' at character 5"),
        ("concat(key, 'x)", "the quote ' is never closed"),
    ],
)
def test_unbalanced_expressions_are_found_at_once(text, problem):
    from kstreams_spark.cli._checks import unbalanced

    assert unbalanced(text) == problem


def test_mistakes_get_one_line_before_spark_starts(tmp_path):
    """Each mistake: exit 2 and one line naming it, with the broker given one second. How long
    each takes: benchmarks/cli_mistakes.py."""
    empty = tmp_path / "empty"
    empty.mkdir()
    json_input = tmp_path / "json"
    json_input.mkdir()
    (json_input / "part-0.json").write_text('{"key": "a", "timestamp": "2026-01-01T00:00:00Z"}\n')
    dedup = ["dedup", "--topic", "t", "--output-topic", "o", "--checkpoint", str(tmp_path / "ck")]
    cases = [
        (["demo", "--interval", "10 parsecs"], "demo: error: --interval: cannot read interval '10 parsecs'"),
        (["demo", "--input", str(tmp_path / "nope")], f"--input {tmp_path / 'nope'}: no such folder"),
        (["demo", "--input", str(empty)], f"--input {empty} has no input files (JSON lines or Parquet)"),
        (["demo", "--input", str(json_input), "--format", "parquet"], "is not a Parquet file"),
        (["demo", "--rows", "0"], "--rows must be at least 1, got 0"),
        (
            [*dedup, "--bootstrap-servers", "127.0.0.1:1", "--broker-timeout", "1"],
            "dedup: error: no Kafka broker reachable at 127.0.0.1:1 within 1 s",
        ),
        ([*dedup, "--bootstrap-servers", "broker"], "--bootstrap-servers takes host:port[,host:port...]"),
        (
            [*dedup, "--bootstrap-servers", "127.0.0.1:1", "--interval", "-1 s"],
            "interval must not be negative",
        ),
        (
            [
                *dedup,
                "--bootstrap-servers",
                "127.0.0.1:1",
                "--by",
                "sequence",
                "--id",
                "s",
                "--late-records",
                "drop",
            ],
            "--late-records is for --by key, key-value and id (sequence dedup has no late records)",
        ),
        (
            [*dedup, "--bootstrap-servers", "127.0.0.1:1", "--late-records", "side_output"],
            "--late-records side_output and --late-topic TOPIC go together",
        ),
        (
            [*dedup, "--bootstrap-servers", "127.0.0.1:1", "--id", "concat(key, 'x'"],
            "--id \"concat(key, 'x'\": 1 '(' never closed",
        ),
        # what only Spark's Kafka source and trigger read, checked before Spark starts
        (
            [*dedup, "--bootstrap-servers", "127.0.0.1:1", "--max-offsets-per-trigger", "-5"],
            "--max-offsets-per-trigger must be at least 1, got -5",
        ),
        (
            [*dedup, "--bootstrap-servers", "127.0.0.1:1", "--trigger-interval", "soon"],
            "--trigger-interval: cannot read interval 'soon'",
        ),
        (
            [*dedup, "--bootstrap-servers", "127.0.0.1:1", "--trigger-interval", "1.5 ms"],
            "--trigger-interval: Spark's triggers count whole milliseconds, got '1.5 ms'",
        ),
        (
            [*dedup, "--bootstrap-servers", "127.0.0.1:1", "--starting-offsets", "first"],
            '--starting-offsets takes earliest, latest or JSON such as {"t": {"0": 23, "1": -2}}',
        ),
        (
            [*dedup, "--bootstrap-servers", "127.0.0.1:1", "--starting-offsets", '{"other": {"0": 5}}'],
            "--starting-offsets names topic 'other', but the query reads --topic 't'",
        ),
        (
            [*dedup, "--bootstrap-servers", "127.0.0.1:1", "--starting-offsets", '{"t": {"0": -3}}'],
            "--starting-offsets: partition '0' of 't' has offset -3; partitions are numbers, offsets at least -2",
        ),
        (["connect-server", "--port", "-1"], "connect-server: error: --port must be from 1 to 65535, got -1"),
        (["connect-server", "--port", "70000"], "--port must be from 1 to 65535, got 70000"),
        # argparse's own mistakes, without its usage text
        (
            ["demo", "--format", "csv"],
            "kstreams-spark demo: error: argument --format: invalid choice: 'csv' (choose from",
        ),
        (
            ["demo", "--rows", "many"],
            "kstreams-spark demo: error: argument --rows: invalid int value: 'many'",
        ),
        (["dedup", "--topic", "t"], "kstreams-spark dedup: error: the following arguments are required:"),
        (["dedupe"], "kstreams-spark: error: argument command: invalid choice: 'dedupe'"),
    ]
    for args, expected in cases:
        out = run_cli(*args, timeout=60)
        assert out.returncode == 2, (args, out.stderr[-2000:])
        assert expected in out.stderr and out.stderr.count("\n") == 1, (args, out.stderr)


def test_an_expression_mistake_found_by_spark_is_one_line_before_the_session(tmp_path):
    """--id mistakes only Spark's parser finds: exit 2 and one line, before Spark starts (nothing
    is written under --checkpoint) and before the broker check (nothing listens on its port). The
    line is the one ExpressionText's JVM prints, word for word: were that JVM not to start, the
    CLI would go on to the broker check and fail with another line. How long it takes:
    benchmarks/cli_mistakes.py."""
    for expression, expected in [
        (
            "valu",
            "--id 'valu': no column 'valu' (the columns are key, value, topic, partition, offset, "
            "timestamp, timestampType, headers)",
        ),
        (
            "key +* 2",
            "--id 'key +* 2': does not parse: [PARSE_SYNTAX_ERROR] Syntax error at or near '2': "
            "extra input '2'. (line 1, pos 7)",
        ),
    ]:
        out = run_cli(
            *("dedup", "--topic", "t", "--output-topic", "o", "--checkpoint", str(tmp_path / "ck")),
            *("--bootstrap-servers", "127.0.0.1:1", "--by", "id", "--id", expression),
            timeout=120,
        )
        assert out.returncode == 2, out.stderr[-2000:]
        assert out.stderr == f"kstreams-spark dedup: error: {expected}\n"
        assert not (tmp_path / "ck").exists()


def test_bare_command_prints_help_and_writes_nothing(tmp_path):
    out = run_cli(cwd=tmp_path, timeout=60)
    assert out.returncode == 2
    assert "usage: kstreams-spark" in out.stderr and "demo" in out.stderr
    assert os.listdir(tmp_path) == []


def test_null_timestamps_fail_with_the_flag_named_or_are_skipped(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    rows = [
        {"key": "a", "timestamp": "2026-01-01T00:00:01Z", "offset": 0},
        {"key": "b", "timestamp": None, "offset": 1},
        {"key": "a", "timestamp": "2026-01-01T00:00:02Z", "offset": 2},
    ]
    (folder / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    demo = ["demo", "--input", str(folder), "--master", "local[1]"]
    failed = run_cli(*demo, "--output", str(tmp_path / "out1"))
    assert failed.returncode == 1
    (line,) = failed.stderr.strip().splitlines()[-1:]
    assert "null timestamp" in line and "pass --on-null-timestamp skip" in line, failed.stderr[-3000:]
    assert "(--verbose for the stack)" in line and "\tat " not in failed.stderr
    skipped = run_cli(*demo, "--output", str(tmp_path / "out2"), "--on-null-timestamp", "skip")
    assert skipped.returncode == 0, skipped.stderr[-3000:]
    assert "forwarded                          1" in skipped.stdout
    assert "'null_timestamps_skipped': 1" in skipped.stdout


def test_demo_compares_with_spark_on_the_generated_stream(tmp_path):
    """The demo's generated stream through deduplicate_by_key and through Spark's
    dropDuplicatesWithinWatermark: the table's counts against the generator's own truth
    (regenerated here with the demo's parameters: every event a unique key, the replays and the
    late events it made). 48,000 rows in 8 files: each file spans 30 s of event time, so a record
    three files late is behind Spark's watermark for late events (the previous micro-batch's,
    interval 10 s) and Spark drops it; KIP-655 forwards it (no live duplicate)."""
    import re

    from kstreams_spark.demo_data import generate

    truth = generate(str(tmp_path / "truth"), rows=48_000, partitions=4, files=8)
    assert truth.late > 0 and truth.replayed > 0
    out = run_cli(
        "demo", "--rows", "48000", "--output", str(tmp_path / "out" / "dedup"), "--master", "local[2]"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    table = {}
    for line in out.stdout.splitlines():
        m = re.fullmatch(
            r"  (forwarded|replays caught|duplicates let through|events lost|late events lost)\s+([\d,]+)\s+([\d,]+)",
            line,
        )
        if m:
            table[m.group(1)] = (int(m.group(2).replace(",", "")), int(m.group(3).replace(",", "")))
    events, late = truth.unique_events, truth.late
    assert table == {
        "forwarded": (events, events - late),
        "replays caught": (truth.replayed, truth.replayed),
        "duplicates let through": (0, 0),
        "events lost": (0, late),
        "late events lost": (0, late),
    }, out.stdout
    with open(tmp_path / "out" / "comparison.png", "rb") as picture:
        assert picture.read(8) == b"\x89PNG\r\n\x1a\n"


def test_connect_server_refuses_a_port_in_use_before_starting():
    """Something already listens on the port: one line, exit 2, no "ready" (the server would
    fail only after its start-up, and the one listening would answer in its place)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = run_cli("connect-server", "--port", str(port), timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    assert out.stderr == (
        f"kstreams-spark connect-server: error: --port {port}: cannot listen on 127.0.0.1:{port}: something "
        "already listens there (another Connect server?); stop it or choose another --port\n"
    )
