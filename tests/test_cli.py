"""The console script, as a user runs it: a separate process with its own Spark session."""

import json
import os
import subprocess
import sys

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
