"""The Processor API (spec section 7) from Python: processors written in Python, run by Spark's
Python stateful processing, with stores in the RocksDB state store."""

import itertools
import json
import os
import sys
import traceback
from datetime import timedelta

import pytest
from kstreams_spark import (
    KStream,
    KStreamsError,
    KStreamsQueryError,
    Processor,
    PunctuationType,
    Stores,
    Topology,
)
from pyspark import cloudpickle
from pyspark.sql import functions as F
from pyspark.sql import types as T
from streams import BASE, EXAMPLE_STRIDE, SCHEMA, Rec, StreamRun, batch_df, run_examples, with_offsets
from test_dedup_spec import EXAMPLES, records_of

# The processors below are defined in this test module, which Python workers cannot import:
# ship them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

BASE_MS = int(BASE.timestamp() * 1000)
# streams.SCHEMA with a numeric value, for processors that sum
NUM_SCHEMA = T.StructType(
    [T.StructField("value", T.LongType()) if f.name == "value" else f for f in SCHEMA.fields]
)


def next_count(counter):
    """The store's counter "n" plus one, stored: the order of a processor's forwards."""
    n = (counter.get("n") or 0) + 1
    counter.put("n", n)
    return n


class Tracer(Processor):
    """Forwards ("record@t", n) per record and ("p10@t" / "p20@t", n) per punctuation, t in ms
    after BASE and n a counter kept in a store, so the output order survives sinks and restarts."""

    def init(self, context):
        self.context = context
        self.counter = context.get_state_store("counter")
        context.schedule(timedelta(seconds=10), PunctuationType.STREAM_TIME)
        context.schedule(20_000, PunctuationType.STREAM_TIME, lambda t: self.emit("p20", t))

    def emit(self, kind, t):
        self.context.forward(f"{kind}@{t - BASE_MS}", next_count(self.counter))

    def process(self, record):
        self.emit("record", record.timestamp)

    def punctuate(self, timestamp):
        self.emit("p10", timestamp)


class Echo(Processor):
    """Forwards each record's key with its place in the order the records reached the processor."""

    def init(self, context):
        self.context = context
        self.counter = context.get_state_store("counter")

    def process(self, record):
        self.context.forward(record.key, next_count(self.counter))


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


class ForwardsInClose(Processor):
    def init(self, context):
        self.context = context

    def process(self, record):
        pass

    def close(self):
        self.context.forward("bye", 0)


class SchedulesInProcess(Processor):
    def init(self, context):
        self.context = context

    def process(self, record):
        self.context.schedule(timedelta(seconds=1), PunctuationType.STREAM_TIME)


class SchedulesEvery(Processor):
    def __init__(self, interval):
        self.interval = interval

    def init(self, context):
        context.schedule(self.interval, PunctuationType.STREAM_TIME)

    def process(self, record):
        pass


class SchedulesWallClock(Processor):
    def init(self, context):
        context.schedule(timedelta(seconds=1), PunctuationType.WALL_CLOCK_TIME)

    def process(self, record):
        pass


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
        elif entry is not None and not live:  # late: never stored; a dead entry goes, a live one stays
            self.seen.delete(r.key)
        self.context.forward(r.key, r.value)


class Probe(Processor):
    """The probe of tests/cases/processor_cases.json: what a processor sees, and when it is
    closed. ``close`` writes what it saw into a file of the directory ``closes`` (a store is out of
    reach there, and nothing else outlives the instance)."""

    def __init__(self, closes):
        self.closes = closes
        self.inits = 0
        self.offsets = []
        self.punctuations = []

    def init(self, context):
        self.inits += 1
        self.context = context
        self.kv = context.get_state_store("kv")
        self.seq = context.get_state_store("seq")
        context.schedule(10_000, PunctuationType.STREAM_TIME)

    def emit(self, key, *tail):
        c = self.context
        n = (self.seq.get("n") or 0) + 1
        self.seq.put("n", n)
        topic = "-" if c.topic is None else c.topic
        fields = [n, c.processor_name, topic, c.partition, c.offset, c.timestamp - BASE_MS, *tail]
        c.forward(key, "|".join(map(str, fields)))

    def process(self, record):
        self.offsets.append(record.offset)
        was = self.kv.put_if_absent(record.key, record.value)
        self.emit(
            record.key, "-" if was is None else was, ",".join(f"{k}={v}" for k, v in self.kv.range("b", "d"))
        )

    def punctuate(self, timestamp):
        self.punctuations.append(timestamp - BASE_MS)
        self.emit("punctuate", timestamp - BASE_MS, self.context.stream_time - BASE_MS)

    def close(self):
        import uuid

        with open(os.path.join(self.closes, uuid.uuid4().hex), "w") as f:
            f.write(
                f"p{self.context.partition} inits={self.inits} offsets={self.offsets} "
                f"punctuations={self.punctuations}"
            )


def run_nums(spark, tmp_path, batches, op, restart_before=(), schema=NUM_SCHEMA):
    """Runs ``op`` over micro-batches of numeric records (or of ``schema``; one file each),
    restarting from the checkpoint before the batches whose index is in ``restart_before``."""
    numbered = iter(with_offsets([r for b in batches for r in b]))
    run = StreamRun(spark, str(tmp_path), op, schema=schema)
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


SHARED = json.load(open(os.path.join(os.path.dirname(__file__), "cases", "processor_cases.json")))
CASES = SHARED["cases"]
PROCESSORS = {  # as tests/cases/processor_cases.json describes them
    "tracer": (Tracer, [Stores.key_value("counter")]),
    "sum": (Sum, [Stores.key_value("sums")]),
    "echo": (Echo, [Stores.key_value("counter")]),
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


CONTEXT_CASE = SHARED["context_case"]


@pytest.mark.parametrize("run_name", list(CONTEXT_CASE["runs"]))
def test_shared_context_case(spark, tmp_path, run_name):
    """The context, store and close case both runtimes run (the Scala one in ProcessorSpec)."""
    run_spec = CONTEXT_CASE["runs"][run_name]
    closes = tmp_path / "closes"
    closes.mkdir()

    def op(df):
        with_topic = df.withColumn("topic", F.concat(F.lit("topic-"), F.col("partition").cast("string")))
        stores = [Stores.key_value("kv"), Stores.key_value("seq")]
        return KStream(with_topic).process(lambda: Probe(str(closes)), stores=stores, name="probe").df

    records = [Rec(k, t, p, value=v) for k, v, t, p in CONTEXT_CASE["records"]]
    bounds = list(itertools.accumulate(run_spec["split"], initial=0))
    batches = [records[a:b] for a, b in itertools.pairwise(bounds)]
    run = run_nums(
        spark, tmp_path, batches, op, restart_before=set(run_spec["restart_before"]), schema=SCHEMA
    )
    got = [
        [r["partition"], r["offset"], int(r["timestamp"].timestamp() * 1000) - BASE_MS, r["key"], r["value"]]
        for r in run.output().collect()
    ]
    got.sort(key=lambda r: (r[0], int(r[4].split("|")[0])))  # each partition in forward order
    assert got == CONTEXT_CASE["expected"]
    assert sorted(f.read_text() for f in closes.iterdir()) == sorted(run_spec["closes"])


ERROR_CASES = SHARED["error_cases"]


def error_case_processor(case):
    """The processor of an error case, as tests/cases/processor_cases.json describes it (none
    declares a store), and its interval as this runtime prints it."""
    if case["processor"] == "schedules_every":
        interval = timedelta(microseconds=case["interval_micros"])
        return (lambda: SchedulesEvery(interval)), repr(interval)
    processors = {
        "exploder": Exploder,
        "forwards_in_close": ForwardsInClose,
        "schedules_in_process": SchedulesInProcess,
        "schedules_wall_clock": SchedulesWallClock,
        "sum_without_store": Sum,
    }
    return processors[case["processor"]], None


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c["name"] for c in ERROR_CASES])
def test_shared_processor_error_cases(spark, tmp_path, case):
    """The error cases both runtimes run (the Scala one in ProcessorSpec): the exact message."""
    processor, interval = error_case_processor(case)
    records = [Rec(k, t, p, value=v) for k, v, t, p in case["records"]]
    with pytest.raises(KStreamsQueryError) as failure:
        run_nums(
            spark,
            tmp_path,
            [records],
            lambda df: KStream(df).process(processor, name="bad").df,
        )
    message = case["message"].replace("{exception}", "ValueError").replace("{interval}", str(interval))
    assert str(failure.value) == message + case.get("advice", {}).get("python", "")
    if case["processor"] == "exploder":
        # the user's own line, read from the worker's traceback, is where the traceback ends
        last = traceback.extract_tb(failure.value.__traceback__)[-1]
        assert (os.path.basename(last.filename), last.name, last.line) == (
            "test_processor.py",
            "process",
            'raise ValueError("unlucky value")',
        )


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
    interpreter outside spark-submit. (That they run it: test_packaging runs the manual's
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


class PackedDedupByKey(DedupByKey):
    """``DedupByKey`` with the interval of the spec example its partition holds
    (``streams.run_examples`` puts example i on partitions ``i * EXAMPLE_STRIDE + p``)."""

    def __init__(self, intervals_ms):
        self.intervals_ms = intervals_ms

    def init(self, context):
        super().init(context)
        self.interval_ms = self.intervals_ms[context.partition // EXAMPLE_STRIDE]


# the intervals of test_dedup_spec.EXAMPLES, in ms
INTERVAL_MS = {"10 seconds": 10_000, "0 seconds": 0, "100 ms": 100}


# Every example of spec section 2 in one query per mode (streams.run_examples); "split_restart"
# is one record per micro-batch, with a restart from the checkpoint half-way.
@pytest.mark.parametrize("mode", ["batch", "one_micro_batch", "split_restart"])
def test_dedup_as_processor_forwards_the_spec_examples_rows(spark, tmp_path, mode):
    examples = {name: records_of(recs) for name, _, recs, _ in EXAMPLES}
    want = {name: [(examples[name][i].key, f"v{i}") for i in expected] for name, _, _, expected in EXAMPLES}
    intervals = [INTERVAL_MS[interval] for _, interval, _, _ in EXAMPLES]

    def op(df):
        return (
            KStream(df)
            .process(lambda: PackedDedupByKey(intervals), stores=[Stores.key_value("seen")], name="dedup")
            .df
        )

    rows = run_examples(spark, tmp_path, examples, op, mode)
    assert {name: [(r["key"], r["value"]) for r in out] for name, out in rows.items()} == want


REDELIVERY_CASE = SHARED["redelivery_case"]


@pytest.mark.parametrize("operator", ["processor", "built_in"])
def test_shared_redelivery_case(spark, tmp_path, operator):
    """The redelivery case both runtimes run (the Scala one in ProcessorSpec)."""
    case = REDELIVERY_CASE
    batches = [[Rec(k, t, p, offset=o, value=v) for k, v, t, p, o in batch] for batch in case["batches"]]
    interval_ms = case["interval_ms"]

    def op(df):
        if operator == "built_in":
            return KStream(df).deduplicate_by_key(timedelta(milliseconds=interval_ms)).df
        return KStream(df).process(lambda: DedupByKey(interval_ms), stores=[Stores.key_value("seen")]).df

    run = run_nums(spark, tmp_path, batches, op, restart_before=set(case["restart_before"]), schema=SCHEMA)
    # the two forwards share partition and offset, and the sink's files have no order: as a multiset
    assert sorted(r["value"] for r in run.output().collect()) == sorted(case["expected"])


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


TOPOLOGY_CASES = SHARED["topology_cases"]


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
    # no restart here, so no micro-batch runs twice: the record comes once, first (offset 0, at the
    # processing time of the batch that registered the schedule), then only ticks, each once, in
    # increasing time, without an offset
    assert got[0][0] == "record" and got[0][2] == 0, got
    assert [k for k, _, _ in got] == ["record"] + ["tick"] * (len(got) - 1), got
    registered = got[0][1]
    ticks = [v for k, v, _ in got if k == "tick"]
    assert len(ticks) >= 2 and ticks == sorted(set(ticks)), got
    # ticks come at batch (processing) times, one per 2-second slot counted from the batch that
    # registered the schedule (Kafka's alignment; a late tick does not shift the next slot)
    slots = [(t - registered) // 2000 for t in ticks]
    assert slots[0] >= 1 and all(a < b for a, b in zip(slots, slots[1:], strict=False)), (registered, ticks)
    batches = batch_times(progress)
    assert all(any(start <= t <= start + took for start, took in batches) for t in [registered, *ticks]), (
        registered,
        ticks,
        batches,
    )
    # and each tick comes in the first micro-batch at or after its slot (a longer interval would
    # leave a whole micro-batch after the slot without a tick)
    for i, t in enumerate(ticks):
        due = registered + (slots[i - 1] + 1 if i else 1) * 2000
        missed = [(start, took) for start, took in batches if start >= due + 50 and start + took < t]
        assert not missed, (registered, ticks, due, missed)
    assert [o for k, _, o in got if k == "tick"] == [None] * len(ticks)


class Echo(Processor):
    def init(self, context):
        self.context = context

    def process(self, record):
        self.context.forward(record.key, record.value * 10)


def test_columns_named_with_dots_and_backquotes(spark):
    """The processor plan quotes the stream's own column names (a dot or a backquote is part of a
    name, not a path), on the way in and out."""
    df = batch_df(spark, with_offsets([Rec("a", 1, value="1"), Rec("b", 2, value="2")]))
    df = df.selectExpr(
        "key AS `user.id``x`", "CAST(value AS INT) AS `amount.v`", "timestamp", "partition", "offset"
    )
    out = KStream(df, key="user.id`x", value="amount.v").process(Echo).df
    assert out.columns == ["user.id`x", "amount.v", "timestamp", "partition", "offset"]
    assert sorted((r[0], r[1]) for r in out.collect()) == [("a", 10), ("b", 20)]
