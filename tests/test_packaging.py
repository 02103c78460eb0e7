"""The wheel a user installs: built from this tree as `pip wheel` builds it, then read as an archive.
It carries the jar, the generated Connect messages, the PEP 561 marker and the licence; its
metadata names the licence, and its extras accept ranges (a user's own numpy or pandas) where the
tests run pins."""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    # a copy of what the build reads, so setuptools' build/ and egg-info stay out of the tree
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(os.path.join(ROOT, name), source)
    shutil.copytree(
        os.path.join(ROOT, "python", "kstreams_spark"),
        source / "python" / "kstreams_spark",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            ".",
        ],
        capture_output=True,
        text=True,
        cwd=source,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (name,) = os.listdir(out)
    with zipfile.ZipFile(out / name) as archive:
        yield archive


def metadata(archive: zipfile.ZipFile) -> email.message.Message:
    (path,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    return email.message_from_bytes(archive.read(path))


def test_the_wheel_carries_jar_messages_marker_and_licence(wheel):
    names = set(wheel.namelist())
    assert "kstreams_spark/jars/kstreams-spark_2.13-0.1.0.jar" in names
    assert "kstreams_spark/kstreams_connect_pb2.py" in names
    assert "kstreams_spark/py.typed" in names
    (licence,) = [n for n in names if n.endswith(".dist-info/LICENSE")]
    assert wheel.read(licence).decode().lstrip().startswith("Apache License")


def test_metadata_names_licence_and_classifiers(wheel):
    meta = metadata(wheel)
    assert meta["License"] == "Apache-2.0"
    classifiers = meta.get_all("Classifier")
    assert "License :: OSI Approved :: Apache Software License" in classifiers
    assert "Typing :: Typed" in classifiers
    assert meta["Requires-Python"] == ">=3.10"


def test_extras_accept_ranges(wheel):
    requires = metadata(wheel).get_all("Requires-Dist")
    processor = sorted(r.split(";")[0] for r in requires if 'extra == "processor"' in r)
    assert processor == ["numpy>=1.23.2", "pandas<3,>=2.2.0", "protobuf>=6.31.1", "pyarrow>=18.0.0"]
    assert "pyspark==4.3.0" in requires
