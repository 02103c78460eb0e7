"""The wheel a user installs: built from this tree as `pip wheel` builds it, then read as an archive.
It carries the jar, the generated Connect messages, the PEP 561 marker and the licence; its
metadata names the licence, and its extras accept ranges (a user's own numpy or pandas) where the
tests run pins. Installed in a fresh venv, it runs the manual's code blocks."""

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


def test_the_readme_runs_from_the_wheel_in_a_fresh_venv(wheel, kafka, tmp_path):
    """README's code blocks (tests/test_readme.py, which `make test` runs only here) in a new venv
    that has the wheel installed and no tree of this project on its path, run from a folder outside
    it. The venv reads the other packages (pyspark, pandas, the test tools) from the test venv's
    site-packages, added after its own by a .pth line, which leaves out that venv's editable
    install of kstreams-spark. Its Kafka examples use this run's broker."""
    import site
    import sysconfig

    fresh = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True, timeout=120)
    python = fresh / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    test_site = sysconfig.get_paths()["purelib"]
    assert test_site in site.getsitepackages()
    with open(os.path.join(purelib, "test-venv-packages.pth"), "w") as f:
        f.write(test_site + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel.filename],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    where = subprocess.run(
        [
            python,
            "-c",
            "import kstreams_spark, kstreams_spark._jvm as j; print(kstreams_spark.__file__, j.jar_path())",
        ],
        capture_output=True,
        text=True,
        cwd=outside,
        check=True,
    ).stdout.split()
    assert all(path.startswith(purelib) for path in where), where
    # No PYSPARK_PYTHON: the manual's Python processors must run because configure_spark gives the
    # local workers this venv's interpreter (`python3` on the PATH has no pandas, nor the wheel)
    unset = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["KSTREAMS_TEST_WORKERS_PYTHON_UNSET"] = "1"
    env["KSTREAMS_TEST_KAFKA_BOOTSTRAP"] = kafka.bootstrap  # this run's broker, not one more
    tests = os.path.abspath(os.path.dirname(__file__))
    done = subprocess.run(
        [
            python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            tests,
            os.path.join(tests, "test_readme.py"),
        ],
        capture_output=True,
        text=True,
        cwd=outside,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-3000:]
    # 10 tests; the spec-copy check skips where no ../shared/spec is next to the clone
    summary = done.stdout.splitlines()[-1]
    assert summary.startswith(("10 passed in", "9 passed, 1 skipped in")), done.stdout[-2000:]


def test_a_java_application_built_with_maven_against_the_published_artifact_runs_a_dedup(tmp_path):
    """What ``make publish-local`` put into the local Maven repository (make test's build step does
    it): the jar the Python package ships, with a POM that names Spark and its Kafka connector and
    client as provided. A small Java application outside the repository (tests/jvm_app, copied to a
    temporary folder) builds with Maven against it and runs the spec's first dedup example on local
    Spark through spark-submit: a@t and a@t+11 of a@t, a@t+8, a@t+11 with a 10 s interval."""
    import glob
    import xml.etree.ElementTree as ET

    import pyspark

    (shipped,) = glob.glob(
        os.path.join(ROOT, "python", "kstreams_spark", "jars", "kstreams-spark_2.13-*.jar")
    )
    version = os.path.basename(shipped)[len("kstreams-spark_2.13-") : -len(".jar")]
    published = os.path.expanduser(
        f"~/.m2/repository/io/github/kstreams-spark/kstreams-spark_2.13/{version}/kstreams-spark_2.13-{version}"
    )
    assert os.path.exists(published + ".jar"), "not in the local Maven repository: run make publish-local"
    assert open(published + ".jar", "rb").read() == open(shipped, "rb").read(), (
        "stale: run make publish-local"
    )

    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(published + ".pom").getroot()
    scopes = {
        (d.findtext("m:artifactId", namespaces=ns), d.findtext("m:version", namespaces=ns)): d.findtext(
            "m:scope", namespaces=ns
        )
        for d in pom.iterfind("m:dependencies/m:dependency", ns)
    }
    assert {k: v for k, v in scopes.items() if v != "test"} == {
        ("scala-library", "2.13.18"): None,
        ("kafka-clients", "3.9.2"): "provided",
        ("spark-sql_2.13", "4.3.0"): "provided",
        ("spark-sql-kafka-0-10_2.13", "4.2.0"): "provided",
    }

    app = tmp_path / "app"
    shutil.copytree(os.path.join(ROOT, "tests", "jvm_app"), app)
    spark_home = os.path.dirname(pyspark.__file__)
    spark_jars = os.path.join(spark_home, "jars")
    built = subprocess.run(
        ["mvn", "-q", "-B", "package", f"-Dspark.jars={spark_jars}"],
        capture_output=True,
        text=True,
        cwd=app,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    ran = subprocess.run(
        [
            os.path.join(spark_home, "bin", "spark-submit"),
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            "--class",
            "example.Dedup",
            "--jars",
            published + ".jar",
            str(app / "target" / "kstreams-java-app-1.jar"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "SPARK_HOME": spark_home},
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.splitlines() == ["a v0", "a v2"]
