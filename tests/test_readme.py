"""The README's DSL examples run as they are: each ```python block of the DSL section, in order,
in one namespace (their asserts state the results)."""

import os
import re
import textwrap
import time

import pytest
from pyspark.errors import AnalysisException

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def dsl_blocks():
    text = open(README).read()
    section = text.split("## The DSL", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_dsl_examples_run(spark):
    blocks = dsl_blocks()
    assert len(blocks) == 6
    namespace = {}
    for index, block in enumerate(blocks):
        exec(compile(block, f"README.md, DSL example {index}", "exec"), namespace)


def section_blocks(*titles: str) -> list[tuple[str, str]]:
    """(title, code) of each ```python block under the README headings ``titles``, in README order;
    a heading's section ends at the next heading of any level."""
    text = open(README).read()
    blocks = []
    for part in re.split(r"\n(?=#{2,3} )", text):
        title = part.split("\n", 1)[0].lstrip("# ").strip()
        if title in titles:
            # a block in a list item is indented with it
            blocks += [
                (title, textwrap.dedent(code)) for code in re.findall(r"```python\n(.*?)```", part, re.S)
            ]
    return blocks


def test_readme_python_kafka_and_processor_examples_run(spark, kafka, tmp_path):
    """README's "Python", "Windowed distinct…", "Metrics", "Kafka" and "Processor API" blocks, as
    written, in order, in one namespace, against the test broker (``broker:9092`` is that broker;
    ``events`` and ``events-deduped`` topics of this test); then what they computed is checked."""
    from kafka_broker import produce, read_committed, read_topic

    source = kafka.create_topic("readme-events", partitions=2)
    sink = kafka.create_topic("readme-events-deduped", partitions=1)
    eos_sink = kafka.create_topic("readme-events-deduped-eos", partitions=1)
    value = lambda id_, seq: f'{{"id": "{id_}", "event_id": "e{id_}", "seq": {seq}}}'  # noqa: E731
    # partition 0: a, its replay (a duplicate by key), b; partition 1: a with the same id
    produce(
        kafka.bootstrap,
        source,
        [(0, "a", value(1, 1), 1000), (0, "a", value(1, 1), 2000), (0, "b", value(2, 2), 3000)]
        + [(1, "a", value(1, 1), 4000)],
    )
    blocks = section_blocks(
        "Python",
        "Windowed distinct and sequence numbers",
        "Metrics",
        "Late records",
        "Kafka",
        "Exactly once to Kafka",
        "Processor API",
    )
    assert [title for title, _ in blocks] == [
        "Python",
        "Windowed distinct and sequence numbers",
        "Metrics",
        "Late records",
        "Kafka",
        "Exactly once to Kafka",
        "Processor API",
        "Processor API",
    ]
    namespace = {}
    try:
        for title, code in blocks:
            code = code.replace("broker:9092", kafka.bootstrap).replace('"events', '"readme-events')
            # the Kafka example's checkpoint (a relative path is the JVM's, not this test's, cwd)
            for relative in (
                "ckpt/",
                "scaled/",
                "checkpoints/",
                "deduped/",
                "late/",
                "late-ckpt/",
                "ckpt-eos/",
            ):
                code = code.replace(f'"{relative}"', repr(str(tmp_path / relative)))
            exec(compile(code, f"README.md, {title}", "exec"), namespace)
            if title == "Metrics":
                metrics = namespace["operator_metrics"](namespace["query"].recentProgress)
                assert metrics == {"kstreams_deduplicate_by_key": {"forwarded": 3, "duplicates_dropped": 1}}
            if title == "Late records":  # none is late here: the forwarded ones, and the counter
                deduped = spark.read.parquet(str(tmp_path / "deduped"))
                assert sorted((r.key, r.value) for r in deduped.collect()) == sorted(
                    (k.encode(), value(*v).encode()) for k, v in [("a", (1, 1)), ("b", (2, 2)), ("a", (1, 1))]
                )
                late_metrics = namespace["operator_metrics"](namespace["query"].recentProgress)
                assert late_metrics["kstreams_deduplicate_by_key"]["late_side_output"] == 0
        # the Kafka example's query runs on: wait for its three records
        out = []
        for _ in range(120):
            out = read_topic(kafka.bootstrap, sink)
            if len(out) >= 3:
                break
            time.sleep(0.5)
        assert sorted((r.key, r.value) for r in out) == [
            (b"a", value(1, 1).encode()),
            (b"a", value(1, 1).encode()),
            (b"b", value(2, 2).encode()),
        ]
        # the exactly-once example's topic, read committed: the same three records, once
        eos = []
        for _ in range(120):
            eos = read_committed(kafka.bootstrap, eos_sink)
            if len(eos) >= 3:
                break
            time.sleep(0.5)
        assert sorted((r.key, r.value) for r in eos) == sorted((r.key, r.value) for r in out)
        # the topology's counts per key and partition (p0: a, a, b; p1: a), times 100
        scaled = []
        for _ in range(240):
            try:  # written per micro-batch (batch_id=N), maybe not yet
                scaled = sorted(r.value for r in spark.read.parquet(str(tmp_path / "scaled")).collect())
            except AnalysisException:
                pass
            if len(scaled) >= 4:
                break
            time.sleep(0.5)
        assert scaled == [100, 100, 100, 200]
        for query in namespace["queries"]:
            query.stop()
        # the processor example forwards what deduplicate_by_key does
        query = namespace["deduped"].writeStream.format("memory").queryName("readme_processor")
        query = query.trigger(availableNow=True).start()
        query.awaitTermination()
        rows = spark.sql("select key, value from readme_processor").collect()
        assert sorted((bytes(r.key), bytes(r.value)) for r in rows) == sorted((r.key, r.value) for r in out)
    finally:
        for active in spark.streams.active:
            active.stop()


def test_readme_operating_examples_run(spark):
    """README's "Operating a query" blocks, as written, in order, in one namespace (their asserts
    state the results)."""
    blocks = section_blocks("Operating a query")
    assert len(blocks) == 2
    namespace = {"spark": spark}
    for title, code in blocks:
        exec(compile(code, f"README.md, {title}", "exec"), namespace)


def test_the_spec_in_docs_is_the_contract():
    """README links docs/SEMANTICS.md, a copy of the contract that ships with the repository; where
    the contract's own folder is next to the repository (../shared/spec), the two are the same."""
    copy = os.path.join(os.path.dirname(README), "docs", "SEMANTICS.md")
    assert "[`docs/SEMANTICS.md`](docs/SEMANTICS.md)" in open(README).read()
    original = os.path.join(os.path.dirname(README), "..", "shared", "spec", "SEMANTICS.md")
    if not os.path.exists(original):
        pytest.skip("no ../shared/spec next to this clone")
    assert open(copy).read() == open(original).read()
