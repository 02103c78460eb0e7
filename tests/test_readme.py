"""The manual's code blocks run as they are (README.md and the guide's pages, docs/guide/): each
```python block of a section, in order, in one namespace (their asserts state the results)."""

import glob
import os
import re
import sys
import textwrap
import time

import pytest
from pyspark.errors import AnalysisException

ROOT = os.path.join(os.path.dirname(__file__), "..")
README = os.path.join(ROOT, "README.md")


def manual_pages() -> list[str]:
    """README, then the guide's pages in the site's order (docs/build_site.py's GUIDES)."""
    sys.path.insert(0, os.path.join(ROOT, "docs"))
    try:
        from build_site import GUIDES
    finally:
        sys.path.pop(0)
    return [README, *(os.path.join(ROOT, path) for path in GUIDES)]


# the DSL's pages, in the site's order (their blocks share `records` and `rows`)
DSL_PAGES = ("dsl.md", "aggregations.md", "tables.md", "joins.md")


def dsl_blocks():
    """The ```python blocks of the DSL's pages, in the site's order."""
    pages = [open(os.path.join(ROOT, "docs", "guide", page)).read() for page in DSL_PAGES]
    return [block for text in pages for block in re.findall(r"```python\n(.*?)```", text, re.S)]


def test_readme_dsl_examples_run(spark):
    blocks = dsl_blocks()
    assert len(blocks) == 6
    namespace = {}
    for index, block in enumerate(blocks):
        exec(compile(block, f"the DSL's pages, example {index}", "exec"), namespace)


def python_blocks() -> list[tuple[str, str, str]]:
    """(page, heading, code) of every ```python block of the manual (README, then the guide's pages
    in the site's order); a heading's section ends at the next heading of any level (a line
    starting with ``#`` inside a code block is not one)."""
    blocks = []
    for path in manual_pages():
        page, title, code, fence = os.path.basename(path), None, None, False
        for line in open(path).read().splitlines():
            stripped = line.lstrip()
            if stripped.startswith(("```", "~~~")):
                if not fence and stripped.lower().startswith(("```py", "~~~py")):
                    code, indent = [], len(line) - len(stripped)
                elif fence and code is not None:
                    # a block in a list item is indented with it
                    blocks.append((page, title, textwrap.dedent("\n".join(code) + "\n")))
                    code = None
                fence = not fence
            elif fence:
                if code is not None:
                    code.append(line[indent:] if line[:indent].strip() == "" else line)
            elif re.match(r"^#{1,6} ", line):
                title = line.lstrip("#").strip()
    return blocks


def section_blocks(*titles: str) -> list[tuple[str, str]]:
    """(title, code) of each ```python block under the manual's headings ``titles``, in order."""
    return [(title, code) for _, title, code in python_blocks() if title in titles]


# Who runs each ```python block of the manual: the tests below by heading, the DSL test by page,
# test_connect.py the Spark Connect page's, test_real_time.py the real-time page's
# the headings whose blocks run in one namespace against the test broker, in the manual's order
BROKER_EXAMPLES = (
    "Deduplication",
    "Windowed distinct",
    "Metrics",
    "Late records",
    "Kafka",
    "Exactly once to Kafka",
    "Processor API",
)
RUN_BY_HEADING = {
    *BROKER_EXAMPLES,
    "A first example",
    "Operating a query",
    "Running on a cluster",
    "Real-time mode",
}
RUN_BY_PAGE = {*DSL_PAGES, "connect.md"}


def test_every_python_block_of_the_manual_is_run_by_a_test():
    """A block under a heading no test reads would be a claim nothing checks."""
    unread = [(p, t) for p, t, _ in python_blocks() if t not in RUN_BY_HEADING and p not in RUN_BY_PAGE]
    assert unread == []


def test_the_cluster_page_s_session_runs(spark):
    """ "Running on a cluster": the driver's session line, here with a local master (the standalone
    cluster of tests/test_cluster.py runs examples/cluster_app.py, which builds its session the
    same way); on this test's session ``getOrCreate`` returns that session."""
    ((title, code),) = section_blocks("Running on a cluster")
    namespace = {}
    exec("from pyspark.sql import SparkSession\nfrom kstreams_spark import configure_spark\n", namespace)
    exec(compile(code.replace("spark://HOST:7077", "local[1]"), f"the manual, {title}", "exec"), namespace)
    assert namespace["spark"] is spark


def test_the_cluster_connect_server_command_sets_what_configure_spark_sets():
    """The manual's Connect page starts a server on a cluster with ``--conf`` lines by hand: they
    must be the settings ``configure_spark`` gives a classic session (and the local
    ``connect-server`` its server), no fewer, no others than the plugin's."""
    from kstreams_spark._connect import PLUGIN_CLASS
    from kstreams_spark.session import DEFAULT_SETTINGS, REQUIRED_SETTINGS

    page = open(os.path.join(ROOT, "docs", "guide", "connect.md")).read()
    (command,) = [
        block for block in re.findall(r"```sh\n(.*?)```", page, re.S) if "start-connect-server" in block
    ]
    confs = dict(line.split("=", 1) for line in re.findall(r"--conf (\S+)", command))
    plugin = "spark.connect.extensions.relation.classes"
    assert confs.pop(plugin) == PLUGIN_CLASS
    assert confs == {**REQUIRED_SETTINGS, **DEFAULT_SETTINGS}


def test_readme_python_kafka_and_processor_examples_run(spark, kafka, tmp_path):
    """The manual's "Deduplication", "Windowed distinct", "Metrics", "Late records", "Kafka", "Exactly once
    to Kafka" and "Processor API" blocks, as
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
    blocks = section_blocks(*BROKER_EXAMPLES)
    assert [title for title, _ in blocks] == [
        "Deduplication",
        "Deduplication",
        "Windowed distinct",
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
            exec(compile(code, f"the manual, {title}", "exec"), namespace)
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


def test_readme_first_example_runs(spark):
    """README's "A first example", as written (its assert states the spec's result)."""
    ((title, code),) = section_blocks("A first example")
    exec(compile(code, f"README.md, {title}", "exec"), {})


def test_readme_is_the_landing_page():
    """README holds what the library is, the two commands, a first example and the contents; the
    rest lives in the guide's pages, each linked from it (issue 40)."""
    text = open(README).read()
    assert re.findall(r"^## (.*)$", text, re.M) == ["Two commands", "A first example", "The manual"]
    linked = set(re.findall(r"\]\((docs/guide/[a-z-]+\.md)", text))
    assert linked == {os.path.relpath(p, ROOT) for p in manual_pages()[1:]}


def test_every_guide_page_is_in_the_site():
    """A page added to docs/guide/ is in the site's navigation (and so its blocks run here)."""
    listed = {os.path.normpath(p) for p in manual_pages()}
    pages = {os.path.normpath(p) for p in glob.glob(os.path.join(ROOT, "docs", "guide", "*.md"))}
    assert pages <= listed, sorted(pages - listed)


def test_readme_operating_examples_run(spark):
    """The manual's "Operating a query" blocks, as written, in order, in one namespace (their asserts
    state the results)."""
    blocks = section_blocks("Operating a query")
    assert len(blocks) == 2
    namespace = {"spark": spark}
    for title, code in blocks:
        exec(compile(code, f"the manual, {title}", "exec"), namespace)


def test_the_spec_in_docs_is_the_contract():
    """README links docs/SEMANTICS.md, a copy of the contract that ships with the repository; where
    the contract's own folder is next to the repository (../shared/spec), the two are the same."""
    copy = os.path.join(os.path.dirname(README), "docs", "SEMANTICS.md")
    assert "[`docs/SEMANTICS.md`](docs/SEMANTICS.md)" in open(README).read()
    original = os.path.join(os.path.dirname(README), "..", "shared", "spec", "SEMANTICS.md")
    if not os.path.exists(original):
        pytest.skip("no ../shared/spec next to this clone")
    assert open(copy).read() == open(original).read()
