"""Spark Connect: the operators from a remote session (``SparkSession.builder.remote``) on a real
Connect server this module starts from the pinned pyspark (``kstreams-spark connect-server``'s
command) on 127.0.0.1, streaming over JSON files (several micro-batches and a restart from the
checkpoint, ``run_mode``'s ``split_restart``). Each expects the same rows as the classic tests of
the same example (imported from them); bad input gets the classic messages."""

from __future__ import annotations

import datetime as dt
import os
import re
import socket
import subprocess
import sys
import time

import pytest
from kafka_broker import EndOffsets, produce, read_committed, read_topic
from kafka_streams import kafka_source
from kstreams_spark import (
    JoinWindows,
    KStream,
    KStreamsError,
    KStreamsQueryError,
    Processor,
    SessionWindows,
    Stores,
    TimeWindows,
    Topology,
    checkpoint_operators,
    operator_metrics,
    read_state,
    repartition_state,
)
from kstreams_spark._connect_server import PLUGIN_CLASS, server_command, start_server, stop_server
from pyspark import cloudpickle
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F
from pyspark.sql.connect.session import SparkSession as RemoteSparkSession
from streams import SCHEMA as STREAM_SCHEMA
from streams import Rec, StreamRun, each_example, forwarded, run_examples, run_mode, with_offsets
from test_dedup_spec import EXAMPLES, OPERATORS, records_of
from test_dsl import AGG, JOINED, Rows, at, concat_joiner, join_records, sides, table_rows
from test_windowed_and_sequence import CASES, SECONDS, ts, windowed

# the processor below runs in the server's Python workers
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server_port(tmp_path_factory):
    """The port of a Connect server with kstreams for this module, started as a user does:
    ``kstreams-spark connect-server --port N``; stopped as by Ctrl-C or kill (SIGTERM), after which
    the command exits 0 and nothing listens on the port."""
    port = free_port()
    cli = os.path.join(os.path.dirname(sys.executable), "kstreams-spark")
    # without PYSPARK_PYTHON, as for a user: the command names its own interpreter to the server
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    with open(tmp_path_factory.mktemp("connect") / "server.log", "w") as log:
        server = subprocess.Popen(
            [cli, "connect-server", "--port", str(port), "--master", "local[2]"],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
        )
        try:
            assert server.stdout.readline().startswith(
                f"starting a Spark Connect server with kstreams on 127.0.0.1:{port}"
            )
            ready = server.stdout.readline()
            assert ready == f'ready: SparkSession.builder.remote("sc://127.0.0.1:{port}").getOrCreate()\n', (
                ready
            )
            yield port
        finally:
            server.terminate()
            assert server.wait(timeout=60) == 0
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=2).close()


@pytest.fixture(scope="module")
def remote(server_port):
    """A remote session on the server; the process's environment (pyspark marks the process as a
    Connect client) is restored afterwards for the classic tests."""
    saved = dict(os.environ)
    # pyspark.sql.SparkSession.builder refuses a remote session in a process with a classic one
    # (this pytest process has the classic tests' session), so the Connect builder itself, and
    # the variable by which pyspark (F.col, udf) and kstreams_spark know it is a Connect client
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    try:
        session = RemoteSparkSession.builder.remote(f"sc://127.0.0.1:{server_port}").getOrCreate()
        session.conf.set("spark.sql.shuffle.partitions", "2")
        session.conf.set("spark.sql.session.timeZone", "UTC")
        yield session
        session.stop()
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module", autouse=True)
def readme_example(server_port, tmp_path_factory):
    """The manual's "Spark Connect" page: the example as written (on this module's server), in a new Python
    process as a user runs it, with no JVM within reach (no java on the PATH, no JAVA_HOME or
    SPARK_HOME). Started with the module, since its rate source needs ten seconds for ten values:
    it runs while the first tests do, and test_the_readme_example_runs reads what it printed."""
    page = open(os.path.join(os.path.dirname(__file__), "..", "docs", "guide", "connect.md")).read()
    (block,) = re.findall(r"```python\n(.*?)```", page, re.S)
    script = tmp_path_factory.mktemp("readme-example") / "example.py"
    script.write_text(
        block.replace("127.0.0.1:15002", f"127.0.0.1:{server_port}")
        + """
import time
query = deduped.writeStream.format("memory").queryName("readme_out").start()
first = []
for _ in range(240):
    first = spark.sql("select key, value from readme_out where cast(value as int) < 10").collect()
    if len(first) == 10:
        break
    time.sleep(0.5)
query.stop()
print(sorted((r.key, r.value) for r in first))
"""
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("JAVA_HOME", "SPARK_HOME", "SPARK_CONNECT_MODE_ENABLED")
    }
    env["PATH"] = os.path.dirname(sys.executable)
    process = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_the_session_is_remote(remote):
    assert type(remote).__module__ == "pyspark.sql.connect.session"


@pytest.mark.parametrize(
    "example, op",
    [
        (EXAMPLES[0], "by_key"),
        (EXAMPLES[5], "by_key"),
        (EXAMPLES[3], "by_key_value"),
        (EXAMPLES[7], "deduplicate"),
    ],
    ids=lambda v: v if isinstance(v, str) else v[0],
)
def test_dedup_spec_examples(remote, tmp_path, example, op):
    # one query each: packed into one query (streams.run_examples) the four operators cost as
    # much per micro-batch as the four queries do
    name, interval, recs, expected = example
    records = records_of(recs)
    out = run_mode(remote, tmp_path, records, OPERATORS[op](interval), "split_restart")
    assert forwarded(out) == [(records[i].key, f"v{i}") for i in expected]


def test_sequence_dedup_seed_example(remote, tmp_path):
    seqs = list(range(1, 8)) + [4, 5, 6, 7] + list(range(8, 12))
    records = [Rec("k", i, value=str(s)) for i, s in enumerate(seqs)]
    op = lambda df: KStream(df).deduplicate_by_sequence(F.col("value").cast("long")).df  # noqa: E731
    out = run_mode(remote, tmp_path, records, op, "split_restart")
    assert [int(v) for _, v in forwarded(out)] == list(range(1, 12))


def test_windowed_distinct_spec_examples(remote, tmp_path):
    """Both cases in one query, each on partitions and keys of its own (streams.run_examples)."""
    cases = ["tumbling_10s", "session_gap_9s"]

    each_case = each_example([([i], windowed(CASES[case][0])) for i, case in enumerate(cases)])

    examples = {case: [Rec("k", s) for s in SECONDS] for case in cases}
    got = run_examples(remote, tmp_path, examples, each_case, "split_restart")
    for case in cases:
        _, expected, _ = CASES[case]
        assert [(r["timestamp"], r["window"]["start"], r["window"]["end"]) for r in got[case]] == [
            (ts(t), ts(s), ts(e)) for t, s, e in expected
        ], case


def test_the_readme_example_runs(readme_example):
    """The Spark Connect page's example (started by the readme_example fixture): its stream runs on the server,
    and the rate source's first ten values, keys 0-9, are each forwarded once."""
    stdout, stderr = readme_example.communicate(timeout=300)
    assert readme_example.returncode == 0, stderr[-3000:]
    assert stdout.strip().splitlines()[-1] == str([(str(i), str(i)) for i in range(10)])


def test_operator_metrics_of_a_connect_query(remote, tmp_path):
    records = with_offsets([Rec("a", 1), Rec("b", 2), Rec("a", 6), Rec("a", 21), Rec("b", 4)])
    run = StreamRun(remote, str(tmp_path), lambda df: KStream(df).deduplicate_by_key("10 seconds").df)
    run.add_batch(records[:2])
    run.add_batch(records[2:])
    run.run()
    # the spec's section 2 example in arrival order: only 6 is a repeat (of 1); 4 arrives after
    # 21, when 2 is more than 10 s behind the stream time and no longer counts
    totals = operator_metrics(run.progress)
    assert totals == {"kstreams_deduplicate_by_key": {"forwarded": 4, "duplicates_dropped": 1}}


def test_state_functions_over_connect_work_on_the_checkpoint_where_the_server_runs(remote, tmp_path):
    """checkpoint_operators, read_state and repartition_state over Connect: the server's session
    does the work, on the checkpoint where the server runs."""
    records = with_offsets([Rec("a", 1), Rec("b", 2), Rec("a", 6), Rec("c", 30)])
    run = StreamRun(remote, str(tmp_path), lambda df: KStream(df).deduplicate_by_key("10 seconds").df)
    run.add_batch(records)
    run.run()
    checkpoint = str(tmp_path / "checkpoint")
    assert checkpoint_operators(remote, checkpoint) == [
        "deduplicate_by_key(partition=partition, interval=PT10S, key=key)"
    ]
    # stream time 30: a@1 and b@2 are dead (older than 30 - 10), c@30 lives until 40; a@6 was a@1's repeat
    want = [(0, "c", 3, "2026-01-01 00:00:40")]
    state = read_state(remote, checkpoint)
    assert [(r.partition, r.key, r.offset, str(r.live_until)) for r in state.collect()] == want
    before, settings = int(remote.conf.get("spark.sql.shuffle.partitions")), remote.conf.getAll
    assert repartition_state(remote, checkpoint, before + 1, file_sinks=[str(tmp_path / "out")]) == before
    # the session's settings are put back (Spark's repartitioner sets the checkpoint's in it)
    assert remote.conf.getAll == settings
    # it moved, once (the server makes a call each time it plans it: a second move would fail)
    with pytest.raises(KStreamsError, match=f"already has {before + 1} state partitions"):
        repartition_state(remote, checkpoint, before + 1)
    state = read_state(remote, checkpoint)
    assert [(r.partition, r.key, r.offset, str(r.live_until)) for r in state.collect()] == want
    # the moved query goes on: c@35 is c@30's duplicate, d@36 new
    run.add_batch([Rec("c", 35, offset=4, value="c35"), Rec("d", 36, offset=5, value="d36")])
    run.run()
    assert [r.value for r in run.output().collect() if r.offset >= 4] == ["d36"]


def test_late_records_side_output(remote, tmp_path):
    """late_records over Connect: the classic test's records, policy and expected rows."""
    from test_late_records import DUPLICATE_VALUES, LATE_VALUES, RECORDS, run

    op = lambda df: KStream(df).deduplicate("key", "10 seconds", late_records="side_output").with_side_output  # noqa: E731
    by_partition = [
        Rec(r.key and f"{r.partition}/{r.key}", r.t, r.partition, r.offset, r.value) for r in RECORDS
    ]
    out = run(remote, tmp_path, op, "split_restart", by_partition)
    on_time = [r.value for r in RECORDS if r.value not in LATE_VALUES + DUPLICATE_VALUES]
    assert out == sorted([(v, None) for v in on_time] + [(v, "late") for v in LATE_VALUES])


def test_windowed_count_side_output(remote, tmp_path):
    """A KTable's side output over Connect: the classic test's records, one micro-batch per record
    with a restart, and its hand-written updates and late records."""
    from test_late_records import (
        late_rows,
        multiset,
        output,
        section_3_records,
        table_rows,
        updates,
        windowed_aggregations,
    )

    aggregation, expected, late = windowed_aggregations("side_output")["tumbling_count"]
    out = output(
        remote, tmp_path, lambda df: aggregation(df).with_side_output, "split_restart", section_3_records()
    )
    got = table_rows(out.where("kstreams_reason is null").drop("kstreams_reason", "kstreams_late_record"))
    assert multiset(got) == multiset(updates(expected))
    routed = out.where("kstreams_reason is not null").select("kstreams_late_record.*", "kstreams_reason")
    assert multiset(late_rows(routed)) == multiset(late)


def test_count_reduce_and_windowed_count(remote, tmp_path):
    count = run_mode(
        remote, tmp_path / "count", AGG, lambda df: KStream(df).group_by_key().count().df, "split_restart"
    )
    assert table_rows(count, "value") == [("1", 1, 5), ("1", 2, 5), ("1", 3, 10)]
    reduce = lambda df: KStream(df).group_by_key().reduce(lambda agg, v: F.concat(agg, v)).df  # noqa: E731
    out = run_mode(remote, tmp_path / "reduce", AGG, reduce, "split_restart")
    assert table_rows(out, "value") == [("1", "a", 5), ("1", "ab", 5), ("1", "abc", 10)]
    sessions = lambda df: (  # noqa: E731
        KStream(df)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace("1 second"))
        .aggregate(F.lit(0), lambda agg, v: agg + 1, lambda a, b: a + b)
        .df
    )
    out = run_mode(remote, tmp_path / "sessions", AGG, sessions, "split_restart")
    # 5 ms opens [5,5]; 3 ms merges it away (a tombstone at its own end, 5) into [3,5], and 10 ms
    # merges that into [3,10]; each result at its session's end (the largest timestamp in it)
    assert windowed_rows(out) == [
        ("1", 1, 5, 5, 5),
        ("1", None, 5, 5, 5),
        ("1", 2, 3, 5, 5),
        ("1", None, 3, 5, 5),
        ("1", 3, 3, 10, 10),
    ]
    tumbling = TimeWindows.of_size_with_no_grace("1 second")
    rows = [(r.key, r.value, r.timestamp()) for r in with_offsets(AGG)]
    batch = KStream(
        remote.createDataFrame(rows, "key string, value string, timestamp timestamp"),
        partition=None,
        offset=None,
    )
    # without an offset column the records count in timestamp order (3, 5, 10 ms), all in the
    # window [0, 1 s) of BASE (a whole second), each count at the largest timestamp so far
    assert windowed_rows(batch.group_by_key().windowed_by(tumbling).count().df) == [
        ("1", 1, 0, 1000, 3),
        ("1", 2, 0, 1000, 5),
        ("1", 3, 0, 1000, 10),
    ]


def test_stream_stream_and_table_joins(remote, tmp_path):
    windows = JoinWindows.of_time_difference_with_no_grace("100 milliseconds")

    def op(df):
        left, right = sides(df)
        return left.join(right, concat_joiner, windows).df

    out = run_mode(remote, tmp_path, join_records(), op, "split_restart")
    assert table_rows(out, "value") == JOINED
    schema = "key string, value string, timestamp timestamp, partition int, offset long"
    left, right = sides(remote.createDataFrame([("k", "x", ts(1), 0, 0), ("k", "y", ts(2), 1, 0)], schema))
    joined = left.to_table().join(right.to_table(), concat_joiner).df
    # at the later of the two rows' timestamps (SEMANTICS.md section 5)
    assert [tuple(r) for r in joined.collect()] == [("k", "x+y", ts(2))]


def windowed_rows(df) -> Rows:
    """(key, value, window start, window end, timestamp) of each row, times in ms after BASE."""

    def ms(t):
        return (t - at(0)) // dt.timedelta(milliseconds=1)

    return Rows((r.key, r.value, ms(r.window.start), ms(r.window.end), ms(r.timestamp)) for r in df.collect())


class CountingUpper(Processor):
    """Forwards the value upper-cased with the number of records of its key so far."""

    def init(self, context):
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record):
        seen = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, seen)
        self.context.forward(record.key, f"{record.value.upper()}{seen}")


def test_python_processor(remote, tmp_path):
    records = [Rec("a", 1, value="x"), Rec("b", 2, value="y"), Rec("a", 3, value="z"), Rec("a", 4, value="w")]
    op = lambda df: KStream(df).process(CountingUpper, stores=[Stores.key_value("counts")]).df  # noqa: E731
    out = run_mode(remote, tmp_path, records, op, "split_restart")
    assert forwarded(out) == [("a", "X1"), ("b", "Y1"), ("a", "Z2"), ("a", "W3")]


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at_least_once", "exactly_once"])
def test_dedup_from_kafka_to_kafka(remote, kafka, tmp_path, exactly_once):
    """A Kafka topic in, deduplicate_by_key, ``KStream.to`` another topic: the server's Kafka
    connector (``connect-server`` puts the bundled one on ``--jars``) on both ends; with
    ``exactly_once=True`` the server's exactly-once sink (found by its format name in the
    kstreams jar), read back by a read_committed consumer."""
    suffix = "-eos" if exactly_once else ""
    source, sink = (
        kafka.create_topic(f"connect-in{suffix}", partitions=2),
        kafka.create_topic(f"connect-out{suffix}", partitions=1),
    )
    # partition 0: "a" at 1 s, its replay at 2 s (dropped), "b" at 3 s; partition 1: "a" at 4 s
    # (forwarded: the store is per partition), then its replay at 30 s (forwarded: 4 + 10 <= 30)
    produce(
        kafka.bootstrap,
        source,
        [
            (0, "a", "a1", 1000),
            (0, "a", "a1", 2000),
            (0, "b", "b1", 3000),
            (1, "a", "a2", 4000),
            (1, "a", "a2", 30000),
        ],
    )
    df = kafka_source(remote, kafka.bootstrap, source, max_offsets=2)
    deduped = KStream(df.withColumn("key", df.key.cast("string"))).deduplicate_by_key("10 seconds")
    query = (
        deduped.to(sink, exactly_once=exactly_once, **{"kafka.bootstrap.servers": kafka.bootstrap})
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    out = (read_committed if exactly_once else read_topic)(kafka.bootstrap, sink)
    if exactly_once:
        # each micro-batch's transaction leaves a commit marker, which takes an offset of its own
        ends = EndOffsets(kafka.bootstrap, sink)
        assert ends.total() > len(out)
        ends.close()
    assert sorted((r.key, r.value, dict(r.headers)["kstreams.timestamp"]) for r in out) == [
        (b"a", b"a1", b"1000"),
        (b"a", b"a2", b"30000"),
        (b"a", b"a2", b"4000"),
        (b"b", b"b1", b"3000"),
    ]


def test_real_time_dedup_from_kafka_to_kafka(remote, kafka, tmp_path):
    """``trigger(realTime=...)`` from a Connect client: the server plans kstreams' real-time input
    (the manual, "Real-time mode"), each record written as it comes. One topic partition and one state
    partition: the two task slots a real-time query holds fit the server's ``local[2]``."""
    source, sink = (
        kafka.create_topic("connect-rt-in", partitions=1),
        kafka.create_topic("connect-rt-out", partitions=1),
    )
    produce(kafka.bootstrap, source, [(0, "a", "a1", 1000), (0, "a", "a1", 2000), (0, "b", "b1", 3000)])
    remote.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        df = (
            remote.readStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
        )
        deduped = KStream(df.withColumn("key", df.key.cast("string"))).deduplicate_by_key("10 seconds")
        query = (
            deduped.to(sink, **{"kafka.bootstrap.servers": kafka.bootstrap})
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .outputMode("update")
            .trigger(realTime="5 seconds")
            .start()
        )
    finally:
        remote.conf.unset("spark.sql.shuffle.partitions")
    try:
        deadline = time.monotonic() + 120
        while len(read_topic(kafka.bootstrap, sink)) < 2 and time.monotonic() < deadline:
            assert query.exception() is None, query.exception()
            time.sleep(0.5)
        time.sleep(6)  # one more batch: nothing else may come
        out = read_topic(kafka.bootstrap, sink)
    finally:
        query.stop()
    assert sorted((r.key, r.value) for r in out) == [(b"a", b"a1"), (b"b", b"b1")]


def test_bad_input_gets_the_classic_messages(remote):
    df = remote.createDataFrame([("k", "v", ts(1))], "key string, value string, timestamp timestamp")
    with pytest.raises(
        KStreamsError, match="no key column 'user' in the DataFrame; available columns: key, value, timestamp"
    ):
        KStream(df, key="user").deduplicate_by_key("10 s")
    with pytest.raises(KStreamsError, match="cannot read interval '10 parsecs'"):
        KStream(df).deduplicate_by_key("10 parsecs")
    with pytest.raises(KStreamsError, match="the id expression .*nope.* does not resolve on this DataFrame"):
        KStream(df).deduplicate(F.col("nope"), "1 minute")


def test_a_query_stopped_by_a_check_raises_our_message_first(remote, tmp_path):
    """As in a classic session: the exception a Connect client catches is ours, first line and
    all, and still a StreamingQueryException; the client reads the server's cause chain."""
    run = StreamRun(remote, str(tmp_path), lambda d: KStream(d).deduplicate_by_key("10 s").df)
    run.add_batch(with_offsets([Rec("a", 1, partition=3), Rec("a", None, partition=3)]))
    with pytest.raises(KStreamsQueryError) as e:
        run.run()
    assert isinstance(e.value, StreamingQueryException)
    assert str(e.value) == (
        "null timestamp in column 'timestamp' at partition 3, offset 1; fix the producer, or pass "
        "on_null_timestamp='skip' (Scala: NullTimestamps.Skip) to skip and count such records"
    )
    assert "STREAM_FAILED" in str(e.value.spark_exception)


def test_topology_says_it_does_not_run_over_connect(remote):
    with pytest.raises(KStreamsError, match="Topology does not run over Spark Connect.*KStream.process"):
        Topology()


def test_a_server_without_the_plugin_is_named(tmp_path):
    """Without the plugin the server cannot plan kstreams' message: the error says what to start."""
    saved = dict(os.environ)
    port = free_port()
    command = server_command(port, master="local[1]")
    at = command.index(f"spark.connect.extensions.relation.classes={PLUGIN_CLASS}")
    del command[at - 1 : at + 1]
    with open(tmp_path / "server.log", "w") as log:
        server = start_server(port, log=log, command=command)
        try:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
            session = RemoteSparkSession.builder.remote(f"sc://127.0.0.1:{port}").create()
            df = session.createDataFrame([("k", "v", ts(1))], "key string, value string, timestamp timestamp")
            with pytest.raises(
                KStreamsError, match="does not have the kstreams plugin.*kstreams-spark connect-server"
            ):
                KStream(df, partition=None, offset=None).deduplicate_by_key("1 second")
            session.stop()
        finally:
            stop_server(server)
            os.environ.clear()
            os.environ.update(saved)


def test_a_call_that_fits_two_overloads_is_refused_naming_them(remote):
    """The server calls the public Scala API by reflection; a null fits both
    TimeWindows.ofSizeWithNoGrace(Duration) and (String), and the JVM lists methods in no defined
    order, so it refuses rather than picking one by chance."""
    from kstreams_spark._jvm import kstreams_class, python_dataframe

    df = remote.createDataFrame([("a", "v", dt.datetime(2026, 1, 1), 0, 0)], STREAM_SCHEMA)
    windows = kstreams_class(remote, "TimeWindows").ofSizeWithNoGrace(None)
    with pytest.raises(KStreamsError) as e:
        python_dataframe(KStream(df)._j.groupByKey().windowedBy(windows).count().df(), remote)
    assert re.fullmatch(
        r"a Spark Connect client asked for something this server cannot do: kstreams TimeWindows"
        r"\.ofSizeWithNoGrace taking null could be any of \((Duration|String)\), \((String|Duration)\)",
        str(e.value),
    ), str(e.value)
