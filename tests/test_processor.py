"""The Processor API (spec section 7) from Python: processors written in Python, run by Spark's
Python stateful processing, with stores in the RocksDB state store."""

import itertools
import json
import os
import sys
from datetime import timedelta

import pytest
from kstreams_spark import KStream, KStreamsError, Processor, PunctuationType, Stores, Topology
from kstreams_spark._jvm import door
from pyspark import cloudpickle
from pyspark.sql import types as T
from pyspark.sql.utils import StreamingQueryException
from streams import BASE, SCHEMA, Rec, StreamRun, batch_df, forwarded, run_mode, with_offsets
from test_dedup_spec import EXAMPLES, by_key, records_of

# The processors below are defined in this test module, which Python workers cannot import:
# ship them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

BASE_MS = int(BASE.timestamp() * 1000)
# streams.SCHEMA with a numeric value, for processors that sum
NUM_SCHEMA = T.StructType(
    [T.StructField("value", T.LongType()) if f.name == "value" else f for f in SCHEMA.fields]
)


class Tracer(Processor):
    """Forwards ("record@t", n) per record and ("p10@t" / "p20@t", n) per punctuation, t in ms
    after BASE and n a counter kept in a store, so the output order survives sinks and restarts."""

    def init(self, context):
        self.context = context
        self.counter = context.get_state_store("counter")
        context.schedule(timedelta(seconds=10), PunctuationType.STREAM_TIME)
        context.schedule(20_000, PunctuationType.STREAM_TIME, lambda t: self.emit("p20", t))

    def emit(self, kind, t):
        n = (self.counter.get("n") or 0) + 1
        self.counter.put("n", n)
        self.context.forward(f"{kind}@{t - BASE_MS}", n)

    def process(self, record):
        self.emit("record", record.timestamp)

    def punctuate(self, timestamp):
        self.emit("p10", timestamp)


class Sum(Processor):
    """Sums per key in a store, all sums forwarded on each punctuation (spec section 7's example)."""

    def init(self, context):
        self.context = context
        self.sums = context.get_state_store("sums")
        context.schedule(timedelta(seconds=10), PunctuationType.STREAM_TIME)

    def process(self, record):
        self.sums.put(record.key, (self.sums.get(record.key) or 0) + record.value)

    def punctuate(self, timestamp):
        for key, total in sorted(self.sums.all()):
            self.context.forward(key, total, timestamp)


class Exploder(Processor):
    def process(self, record):
        if record.value == 13:
            raise ValueError("unlucky value")


class DedupByKey(Processor):
    """``deduplicate_by_key`` written as a user processor: the rule of spec section 2 over a store
    of key -> (timestamp ms, offset) of the record forwarded."""

    def __init__(self, interval_ms):
        self.interval_ms = interval_ms

    def init(self, context):
        self.context = context
        self.seen = context.get_state_store("seen")

    def process(self, r):
        if r.key is None:  # null key: forward, store nothing
            return self.context.forward(r.key, r.value)
        live_from = self.context.stream_time - self.interval_ms
        entry = self.seen.get(r.key)
        live = entry is not None and entry[0] >= live_from
        if live and abs(entry[0] - r.timestamp) <= self.interval_ms:
            if entry[1] == r.offset:  # the same record delivered again: forward again
                self.context.forward(r.key, r.value)
            return
        if r.timestamp >= live_from:
            self.seen.put(r.key, (r.timestamp, r.offset))
        elif entry is not None:  # late: never stored; a dead entry goes
            self.seen.delete(r.key)
        self.context.forward(r.key, r.value)


def run_nums(spark, tmp_path, batches, op, restart_before=()):
    """Runs ``op`` over micro-batches of numeric records (one file each), restarting from the
    checkpoint before the batches whose index is in ``restart_before``."""
    numbered = iter(with_offsets([r for b in batches for r in b]))
    run = StreamRun(spark, str(tmp_path), op, schema=NUM_SCHEMA)
    for i, b in enumerate(batches):
        if i in restart_before:
            run.run()
        run.add_batch([next(numbered) for _ in b])
    run.run()
    return run


def rows(df):
    return sorted(
        (r["partition"], int(r["timestamp"].timestamp() * 1000) - BASE_MS, r["key"], r["value"])
        for r in df.collect()
    )


CASES = json.load(open(os.path.join(os.path.dirname(__file__), "cases", "processor_cases.json")))["cases"]
PROCESSORS = {  # as tests/cases/processor_cases.json describes them
    "tracer": (Tracer, [Stores.key_value("counter")]),
    "sum": (Sum, [Stores.key_value("sums")]),
}


SUM_CASE = next(c for c in CASES if c["processor"] == "sum")
WORDS = [Rec(k, t, p, value=v) for k, v, t, p in SUM_CASE["records"]]
SUMS_EXPECTED = [tuple(row) for row in SUM_CASE["expected"]]


def case_modes():
    for case in CASES:
        for mode in ["batch", "one_micro_batch", "split_restart"]:
            if mode != "batch" or case["batch"]:
                yield pytest.param(case, mode, id=f"{case['processor']}-{mode}")


@pytest.mark.parametrize("case, mode", list(case_modes()))
def test_shared_processor_cases(spark, tmp_path, case, mode):
    """The processor cases both runtimes run (the Scala one in ProcessorSpec)."""
    processor, stores = PROCESSORS[case["processor"]]
    records = with_offsets([Rec(k, t, p, value=v) for k, v, t, p in case["records"]])
    expected = [tuple(row) for row in case["expected"]]

    def op(df):
        return KStream(df).process(processor, stores=stores).df

    if mode == "batch":
        df = spark.createDataFrame(
            [(r.key, r.value, r.timestamp(), r.partition, r.offset) for r in records], NUM_SCHEMA
        )
        assert rows(op(df)) == expected
        return
    sizes = [len(records)] if mode == "one_micro_batch" else case["split"]
    bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    batches = [records[a:b] for a, b in itertools.pairwise(bounds)]
    restart = set(range(1, len(batches))) if mode == "split_restart" else set()
    assert rows(run_nums(spark, tmp_path, batches, op, restart).output()) == expected


def test_punctuation_forwards_have_no_offset(spark, tmp_path):
    case = next(c for c in CASES if c["processor"] == "tracer")
    records = with_offsets([Rec(k, t, p, value=v) for k, v, t, p in case["records"]])
    op = lambda df: KStream(df).process(Tracer, stores=[Stores.key_value("counter")]).df  # noqa: E731
    out = run_nums(spark, tmp_path, [records], op).output().collect()
    assert {r["key"].split("@")[0] for r in out if r["offset"] is None} == {"p10", "p20"}
    assert all(r["offset"] is not None for r in out if r["key"].startswith("record"))


def test_processor_error_names_processor_partition_and_offset(spark, tmp_path):
    records = [Rec("a", 1, 1, value=1), Rec("a", 2, 1, value=2), Rec("a", 3, 1, value=13)]
    with pytest.raises(StreamingQueryException) as failure:
        run_nums(spark, tmp_path, [records], lambda df: KStream(df).process(Exploder, name="exploder").df)
    assert (
        "processor 'exploder' failed processing the record at partition 1, offset 2: "
        "ValueError: unlucky value"
    ) in str(failure.value)


def test_usage_errors(spark):
    df = batch_df(spark, with_offsets([Rec("a", 1)]))
    with pytest.raises(KStreamsError, match="not an instance"):
        KStream(df).process(Sum())
    with pytest.raises(KStreamsError, match="declared more than once: s"):
        KStream(df).process(Sum, stores=[Stores.key_value("s"), Stores.key_value("s")])
    with pytest.raises(KStreamsError, match="need a streaming DataFrame"):
        KStream(df).process(Sum, wall_clock=True)
    with pytest.raises(KStreamsError, match="no value column 'v'"):
        KStream(df, value="v").process(Sum)
    with pytest.raises(Exception, match="processor 'Sum' asked for store 'sums', which was not declared"):
        KStream(df).process(Sum).df.collect()


def test_missing_or_old_worker_packages_name_the_extra(spark, monkeypatch):
    """pyspark's transformWithState needs pandas and pyarrow: without them (or too old) the error
    says which and names the extra, before any Spark job."""
    import types

    df = batch_df(spark, with_offsets([Rec("a", 1)]))
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(
        KStreamsError, match=r"\(pandas is not installed\): pip install 'kstreams-spark\[processor\]'"
    ):
        KStream(df).process(Sum)
    monkeypatch.undo()
    old_pyarrow = types.ModuleType("pyarrow")
    old_pyarrow.__version__ = "17.0.0"
    monkeypatch.setitem(sys.modules, "pyarrow", old_pyarrow)
    with pytest.raises(KStreamsError, match=r"\(pyarrow is 17.0.0, older than 18.0.0\)"):
        KStream(df).process(Sum)


@pytest.mark.parametrize(
    "options, env, expected",
    [
        ({}, {}, sys.executable),  # no master: local[*]
        ({"spark.master": "local[2]"}, {}, sys.executable),
        ({"spark.master": "spark://host:7077"}, {}, None),  # a cluster's machines have their own
        ({"spark.pyspark.python": "/opt/py"}, {}, "/opt/py"),  # the user's choice, where PySpark reads it
        ({}, {"PYSPARK_PYTHON": "/opt/py"}, "/opt/py"),  # the user's choice stays
    ],
)
def test_configure_spark_gives_local_workers_this_interpreter(monkeypatch, options, env, expected):
    """What PYSPARK_PYTHON says after configure_spark: PySpark's only source for its workers'
    interpreter outside spark-submit. (That they run it: test_packaging runs the README's
    processors without the variable, tests/test_connect.py its server.)"""
    from kstreams_spark import configure_spark
    from pyspark.sql import SparkSession

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    builder = SparkSession.Builder()
    for key, value in options.items():
        builder = builder.config(key, value)
    configure_spark(builder)
    assert os.environ.get("PYSPARK_PYTHON") == expected


def dedup_processor(spark, interval):
    interval_ms = door(spark).intervalMicros(interval) // 1000
    return lambda df: (
        KStream(df)
        .process(lambda: DedupByKey(interval_ms), stores=[Stores.key_value("seen")], name="dedup")
        .df
    )


@pytest.mark.parametrize("example", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_dedup_as_processor_agrees_with_built_in(spark, tmp_path, example):
    name, interval, recs, _ = example
    records = records_of(recs)
    built_in = forwarded(run_mode(spark, tmp_path / "built_in", records, by_key(interval), "batch"))
    user = dedup_processor(spark, interval)
    assert forwarded(run_mode(spark, tmp_path / "user", records, user, "batch")) == built_in


def test_dedup_as_processor_through_a_restart(spark, tmp_path):
    name, interval, recs, expected = EXAMPLES[5]  # k@20, k@25, k@11, k@9
    records = records_of(recs)
    out = run_mode(spark, tmp_path, records, dedup_processor(spark, interval), "split_restart")
    assert forwarded(out) == [(records[i].key, f"v{i}") for i in expected]


class Scale(Processor):
    """Forwards each record with its value times 100 (a second processor in a topology)."""

    def init(self, context):
        self.context = context

    def process(self, record):
        self.context.forward(record.key, record.value * 100)


def sum_topology(source, sums_dir, collected):
    return (
        Topology()
        .add_source("SOURCE", source)
        .add_processor("SUM", Sum, "SOURCE", stores=[Stores.key_value("sums")])
        .add_processor("SCALE", Scale, "SUM")
        .add_sink("SCALED", sums_dir, "SCALE")
        .add_sink("SUMS", lambda df, batch_id: collected.extend(df.collect()), "SUM")
    )


def test_topology_describe_and_start(spark, tmp_path):
    run = StreamRun(spark, str(tmp_path), op=None, schema=NUM_SCHEMA)  # for its input files
    numbered = with_offsets(WORDS)
    run.add_batch(numbered[:3])
    run.add_batch(numbered[3:])
    source = spark.readStream.schema(NUM_SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    collected = []
    topology = sum_topology(source, str(tmp_path / "scaled"), collected)
    assert topology.describe() == "\n".join(
        [
            "Topologies:",
            "   Sub-topology: 0",
            "    Source: SOURCE (DataFrame)",
            "      --> SUM",
            "    Processor: SUM (stores: [sums])",
            "      --> SCALE, SUMS",
            "      <-- SOURCE",
            "    Processor: SCALE (stores: [])",
            "      --> SCALED",
            "      <-- SUM",
            "    Sink: SCALED (target: " + str(tmp_path / "scaled") + ")",
            "      <-- SCALE",
            "    Sink: SUMS (target: <lambda>)",
            "      <-- SUM",
        ]
    )
    queries = topology.start(str(tmp_path / "checkpoint"), trigger={"availableNow": True})
    assert len(queries) == 1
    queries[0].awaitTermination()
    assert rows_of(collected) == SUMS_EXPECTED
    scaled = spark.read.parquet(str(tmp_path / "scaled"))
    assert rows(scaled) == [(p, t, k, v * 100) for p, t, k, v in SUMS_EXPECTED]


TOPOLOGY_CASES = json.load(open(os.path.join(os.path.dirname(__file__), "cases", "processor_cases.json")))[
    "topology_cases"
]


@pytest.mark.parametrize("case", TOPOLOGY_CASES, ids=[c["processor"] for c in TOPOLOGY_CASES])
def test_shared_topology_cases(spark, tmp_path, case):
    """Several sources of one sub-topology, as the Scala Topology runs them (ProcessorSpec)."""
    processor, stores = PROCESSORS[case["processor"]]
    topology = Topology()
    for name, records in case["sources"].items():
        run = StreamRun(spark, str(tmp_path / name), op=None, schema=NUM_SCHEMA)  # for its input files
        run.add_batch(with_offsets([Rec(k, t, p, value=v) for k, v, t, p in records]))
        topology.add_source(name, spark.readStream.schema(NUM_SCHEMA).json(str(tmp_path / name / "in")))
    collected = []
    topology.add_processor("P", processor, *case["sources"], stores=stores)
    topology.add_sink("K", lambda df, batch_id: collected.extend(df.collect()), "P")
    for query in topology.start(str(tmp_path / "checkpoint"), trigger={"availableNow": True}):
        query.awaitTermination()
    assert rows_of(collected) == [tuple(row) for row in case["expected"]]


def rows_of(collected):
    return sorted(
        (r["partition"], int(r["timestamp"].timestamp() * 1000) - BASE_MS, r["key"], r["value"])
        for r in collected
    )


def test_topology_errors(spark, tmp_path):
    """The graph's checks (the Scala TopologyGraph's, shared with the Scala Topology)."""
    with pytest.raises(KStreamsError, match="parent 'NOPE' is not in the topology"):
        Topology().add_processor("P", Sum, "NOPE")
    with pytest.raises(KStreamsError, match="needs Topology\\(kafka_options="):
        Topology().add_source("S", "words")
    source = spark.readStream.schema(NUM_SCHEMA).json(str(tmp_path))
    t = Topology().add_source("S", source).add_processor("P", Sum, "S").add_sink("K", print, "P")
    with pytest.raises(KStreamsError, match="a node named 'P' was already added"):
        t.add_processor("P", Sum, "S")
    with pytest.raises(
        KStreamsError, match="sink 'K2': parent 'S' is a source; a sink's parents must be processors"
    ):
        t.add_sink("K2", print, "S")
    with pytest.raises(KStreamsError, match="'Q': parent 'K' is a sink, which has no output"):
        t.add_processor("Q", Sum, "K")
    with pytest.raises(KStreamsError, match="'Q' needs at least one parent"):
        t.add_processor("Q", Sum)


class WallTicker(Processor):
    """Forwards ("record", processing time) per record and ("tick", processing time) per
    wall-clock punctuation every 2 s."""

    def init(self, context):
        self.context = context
        context.schedule(2000, PunctuationType.WALL_CLOCK_TIME)

    def process(self, record):
        self.context.forward("record", self.context.current_system_time_ms)

    def punctuate(self, timestamp):
        self.context.forward("tick", timestamp)


def batch_times(progress):
    """(start ms, duration ms) of each micro-batch in a query's progress."""
    from datetime import datetime

    return sorted(
        (
            int(datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() * 1000),
            p["durationMs"]["triggerExecution"],
        )
        for p in progress
    )


def test_wall_clock_punctuation_fires_on_processing_time(spark, tmp_path):
    import time

    run = StreamRun(spark, str(tmp_path), op=None, schema=NUM_SCHEMA)  # for its input files
    run.add_batch(with_offsets([Rec("a", 1, value=1)]))
    source = spark.readStream.schema(NUM_SCHEMA).json(str(tmp_path / "in"))
    out = KStream(source).process(WallTicker, wall_clock=True).df
    got = []

    def start():
        return (
            out.writeStream.foreachBatch(
                lambda df, _: got.extend((r["key"], r["value"], r["offset"]) for r in df.collect())
            )
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="1 second")
            .start()
        )

    query, progress = start(), []
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if sum(1 for k, _, _ in got if k == "tick") >= 2:
                break
            if not query.isActive:
                raise query.exception()
            time.sleep(0.5)
        # the progress of the batch that forwarded the last tick is posted after its sink ran
        last_tick = max(v for k, v, _ in got if k == "tick")
        while time.time() < deadline and not any(
            start <= last_tick <= start + took for start, took in batch_times(query.recentProgress)
        ):
            time.sleep(0.2)
        progress += query.recentProgress
    finally:
        query.stop()
    # (a micro-batch replayed after a restart may repeat its rows)
    ticks = sorted({v for k, v, _ in got if k == "tick"})
    registered = sorted({v for k, v, _ in got if k == "record"})
    assert len(registered) == 1 and len(ticks) >= 2, got
    # ticks come at batch (processing) times, one per 2-second slot counted from the batch that
    # registered the schedule (Kafka's alignment; a late tick does not shift the next slot),
    # and they carry no offset
    slots = [(t - registered[0]) // 2000 for t in ticks]
    assert slots[0] >= 1 and all(a < b for a, b in zip(slots, slots[1:], strict=False)), (registered, ticks)
    batches = batch_times(progress)
    assert all(any(start <= t <= start + took for start, took in batches) for t in ticks), (ticks, batches)
    # and each tick comes in the first micro-batch at or after its slot (a longer interval would
    # leave a whole micro-batch after the slot without a tick)
    for i, t in enumerate(ticks):
        due = registered[0] + (slots[i - 1] + 1 if i else 1) * 2000
        missed = [(start, took) for start, took in batches if start >= due + 50 and start + took < t]
        assert not missed, (registered, ticks, due, missed)
    assert all(o is None for k, _, o in got if k == "tick")
