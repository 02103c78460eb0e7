"""The crash harness's input, queries and marker (tests/test_crash.py runs them; tests/crash_job.py
is the child process it kills).

Every stateful operator runs in one streaming query: each operator's output becomes records with
the operator's name as key and the output row as JSON value (timestamps included), merged into
one stream.
A Parquet sink (exactly-once) must then hold, after any number of kills and restarts, exactly the
rows of an uninterrupted run, operator by operator; a Kafka sink (at-least-once) must hold every
one of them and repeat only rows of micro-batches that a kill cut short.

The marker runs inside the task that runs the stateful operators' last stage (after their shuffle,
before the sink), so the test can prove that a kill landed while such a task was running: when the
test "arms" it (a file in the marker folder), the first task to get there writes a marker file
naming its query and micro-batch and waits there to be killed, either before it pulls any row
through the operators ("before") or after the operators have consumed their whole partition and
committed its state, before the sink has its rows ("after").
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterator

from kafka_streams import kafka_source as kafka_records
from kstreams_spark import (
    JoinWindows,
    KStream,
    Processor,
    PunctuationType,
    SessionWindows,
    Stores,
    TimeWindows,
)
from kstreams_spark.kstream import EXACTLY_ONCE_KAFKA
from pyspark import cloudpickle
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from streams import SCHEMA

# The processor below is defined in this test module, which Python workers cannot import.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
PARTITIONS = 3


def records(events_per_partition: int, seed: int, keys: int = 6) -> list[tuple]:
    """``(partition, key, value, timestamp_ms)`` in send order: what an at-least-once producer
    sends. Events advance 1 s each, out of order by up to 2 s; one in 15 is late (30 to 60 s
    behind); one in 20 has a null key. Batches of 5 are sometimes sent twice (a lost ack), and
    after a "failure" half-way each partition's last 12 events are sent again. Values are JSON
    ``{"id": <event id>, "event": <event number>, "seq": <per-partition sequence>, "n": <1..9>}``:
    "id" is unique per partition ("<partition>-<i>"); "event" ("e<i>") is sent on every partition at
    about the same time, so a global ``deduplicate`` by it meets ids that other partitions stored.
    """
    rng = random.Random(seed)
    sent: list[tuple] = []
    for p in range(PARTITIONS):
        events = []
        for i in range(events_per_partition):
            t = BASE_MS + i * 1000 + rng.randrange(-2000, 2000)
            if rng.random() < 1 / 15:
                t -= rng.randrange(30_000, 60_000)
            key = None if rng.random() < 1 / 20 else f"k{rng.randrange(keys)}"
            value = json.dumps({"id": f"{p}-{i}", "event": f"e{i}", "seq": i + 1, "n": rng.randrange(1, 10)})
            events.append((p, key, value, t))
        failure_at = events_per_partition // 2
        for start in range(0, events_per_partition, 5):
            sent += events[start : start + 5]
            if rng.random() < 0.2:
                sent += events[start : start + 5]
            if start <= failure_at < start + 5:
                sent += events[max(0, start + 5 - 12) : start + 5]
    return sent


def as_stored(sent: list[tuple]) -> list[tuple]:
    """``(partition, offset, key, value, timestamp_ms)``: the offsets a broker gives in send order."""
    next_offset: dict[int, int] = {}
    out = []
    for p, key, value, t in sent:
        out.append((p, next_offset.get(p, 0), key, value, t))
        next_offset[p] = next_offset.get(p, 0) + 1
    return out


def write_files(folder: str, stored: list[tuple], files: int) -> None:
    """The records (with offsets) as JSON files in send order, one file per micro-batch."""
    os.makedirs(folder, exist_ok=True)
    size = -(-len(stored) // files)
    for i in range(files):
        path = os.path.join(folder, f"part-{i:03d}.json")
        with open(path, "w") as f:
            for p, offset, key, value, t in stored[i * size : (i + 1) * size]:
                ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t // 1000)) + f".{t % 1000:03d}Z"
                f.write(
                    json.dumps(
                        {"key": key, "value": value, "timestamp": ts, "partition": p, "offset": offset}
                    )
                    + "\n"
                )
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def file_source(spark: SparkSession, folder: str) -> DataFrame:
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(folder)


def kafka_source(spark: SparkSession, bootstrap: str, topic: str, max_offsets: int) -> DataFrame:
    """Kafka-style columns with string key and value, as the file source has them."""
    return kafka_records(spark, bootstrap, topic, max_offsets).select(
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        "timestamp",
        "partition",
        "offset",
    )


def field(name: str, type_: str = "string"):
    return F.get_json_object(F.col("value"), f"$.{name}").cast(type_)


class RunningCount(Processor):
    """Per key, counts the records in a store and forwards (key, count) at the record's time; every
    10 s of stream time forwards ("tick", number of keys seen)."""

    def init(self, context):
        self.context = context
        self.counts = context.get_state_store("counts")
        context.schedule(10_000, PunctuationType.STREAM_TIME, self.tick)

    def process(self, record):
        if record.key is None:
            return
        n = (self.counts.get(record.key) or 0) + 1
        self.counts.put(record.key, n)
        self.context.forward(record.key, str(n))

    def tick(self, timestamp):
        self.context.forward("tick", str(sum(1 for _ in self.counts.all())))


def _numbers(df: DataFrame) -> KStream:
    return KStream(df).map_values(field("n", "long"))


def _scala_processor(df: DataFrame) -> DataFrame:
    spark = df.sparkSession
    return DataFrame(spark._jvm.kstreams.CrashProcessors.dedupByKey(df._jdf), spark)


def _sides(df: DataFrame) -> tuple[KStream, KStream]:
    """Partition 0 against the other partitions (the joins below join them by key)."""
    return KStream(df.where("partition = 0")), KStream(df.where("partition <> 0"))


JOIN_WINDOWS = JoinWindows.of_time_difference_and_grace("2 seconds", "3 seconds")


def _stream_join(kind: str) -> Callable[[DataFrame], DataFrame]:
    def join(df: DataFrame) -> DataFrame:
        left, right = _sides(df)
        return getattr(left, kind)(right, _joiner, JOIN_WINDOWS).df

    return join


def _table_join(kind: str) -> Callable[[DataFrame], DataFrame]:
    def join(df: DataFrame) -> DataFrame:
        left, right = _sides(df)
        return getattr(left.to_table(), kind)(right.to_table(), _joiner).df

    return join


def _add_length(agg, value):
    return agg + F.length(value)


def _joiner(left, right):
    return F.concat_ws("+", left, right)


WINDOWS = TimeWindows.of_size_and_grace("10 seconds", "5 seconds")
SESSIONS = SessionWindows.of_inactivity_gap_and_grace("4 seconds", "2 seconds")


# Every stateful operator of the library, on the same input.
def _record_time(table_and_late: DataFrame) -> DataFrame:
    """A table's ``with_side_output`` with a timestamp on every row: a late record's row has the
    table's columns null, so it takes the record's own."""
    return table_and_late.withColumn(
        "timestamp", F.coalesce("timestamp", F.col("kstreams_late_record.timestamp"))
    )


OPERATORS: dict[str, Callable[[DataFrame], DataFrame]] = {
    "deduplicate_by_key": lambda df: KStream(df).deduplicate_by_key("10 seconds").df,
    "deduplicate_by_key_value": lambda df: KStream(df).deduplicate_by_key_value(field("id"), "10 seconds").df,
    "deduplicate": lambda df: KStream(df).deduplicate(field("id"), "20 seconds").df,
    # the same event on every partition: the global store's cross-partition path
    "deduplicate_across_partitions": lambda df: KStream(df).deduplicate(field("event"), "20 seconds").df,
    "deduplicate_by_sequence": lambda df: KStream(df).deduplicate_by_sequence(field("seq", "long")).df,
    "distinct_tumbling": lambda df: KStream(df).group_by_key().windowed_by(WINDOWS).distinct().df,
    "distinct_session": lambda df: KStream(df).group_by_key().windowed_by(SESSIONS).distinct().df,
    "count": lambda df: KStream(df).group_by_key().count().df,
    "reduce": lambda df: _numbers(df).group_by_key().reduce(lambda agg, v: agg + v).df,
    "aggregate": lambda df: KStream(df).group_by_key().aggregate(F.lit(0), _add_length).df,
    "count_tumbling": lambda df: KStream(df).group_by_key().windowed_by(WINDOWS).count().df,
    "reduce_tumbling": lambda df: (
        _numbers(df).group_by_key().windowed_by(WINDOWS).reduce(lambda a, v: a + v).df
    ),
    "aggregate_tumbling": lambda df: (
        KStream(df).group_by_key().windowed_by(WINDOWS).aggregate(F.lit(0), _add_length).df
    ),
    "count_session": lambda df: KStream(df).group_by_key().windowed_by(SESSIONS).count().df,
    "reduce_session": lambda df: (
        _numbers(df).group_by_key().windowed_by(SESSIONS).reduce(lambda a, v: a + v).df
    ),
    "aggregate_session": lambda df: (
        _numbers(df)
        .group_by_key()
        .windowed_by(SESSIONS)
        .aggregate(F.lit(0).cast("long"), lambda agg, v: agg + v, lambda a, b: a + b)
        .df
    ),
    # late_records="side_output": the forwarded and the routed records in one output
    "deduplicate_by_key_late_aside": lambda df: (
        KStream(df).deduplicate_by_key("10 seconds", late_records="side_output").with_side_output
    ),
    "count_tumbling_late_aside": lambda df: _record_time(
        KStream(df).group_by_key().windowed_by(WINDOWS).count(late_records="side_output").with_side_output
    ),
    "to_table": lambda df: KStream(df).map_values(field("n")).to_table().df,
    "stream_stream_join": _stream_join("join"),
    "stream_stream_left_join": _stream_join("left_join"),
    "stream_stream_outer_join": _stream_join("outer_join"),
    "table_table_join": _table_join("join"),
    "table_table_left_join": _table_join("left_join"),
    "table_table_outer_join": _table_join("outer_join"),
    "python_processor": lambda df: KStream(df).process(RunningCount, stores=[Stores.key_value("counts")]).df,
    "scala_processor": _scala_processor,
}


def all_operators(df: DataFrame, names: list[str]) -> DataFrame:
    """``(key, value, timestamp)``: the output of the operators ``names`` over ``df``, the
    operator's name as the key and the output row as JSON the value, merged into one stream."""
    merged = None
    for name in names:
        result = OPERATORS[name](df)
        rows = KStream(
            result.select(
                F.lit(name).alias("key"), F.to_json(F.struct(*result.columns)).alias("value"), "timestamp"
            )
        )
        merged = rows if merged is None else merged.merge(rows)
    return merged.df


def with_marker(df: DataFrame, folder: str, query: str) -> DataFrame:
    """``df`` through the marker: when ``folder/arm`` holds "<before|after> <query or *>", the first
    task of a matching query to get there writes ``folder/running`` (its query, micro-batch and
    where it waits) and sleeps until it is killed (see the module doc); other tasks pass."""

    def mark(batches: Iterator) -> Iterator:
        from pyspark import TaskContext

        arm = os.path.join(folder, "arm")
        mode, target = open(arm).read().split() if os.path.exists(arm) else ("", "")
        if target not in ("*", query):
            mode = ""

        def wait_here(where: str) -> None:
            try:  # only the first task waits
                first = os.open(os.path.join(folder, "taken"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.close(first)
            batch = int(TaskContext.get().getLocalProperty("streaming.sql.batchId"))
            with open(os.path.join(folder, "running.tmp"), "w") as f:
                f.write(json.dumps({"query": query, "batch": batch, "where": where}))
            os.replace(os.path.join(folder, "running.tmp"), os.path.join(folder, "running"))
            time.sleep(600)  # the test kills the process group here

        if mode == "before":
            wait_here("before")
        if mode != "after":
            yield from batches
            return
        out = list(batches)  # the operators consume the whole partition and commit its state
        wait_here("after")
        yield from out

    return df.mapInArrow(mark, df.schema)


# The Kafka sink query runs these operators (all of them would double the work per micro-batch).
KAFKA_SINK_OPERATORS = ["deduplicate_by_key", "count_tumbling", "to_table", "python_processor"]


def split_operators(seed: int) -> tuple[list[str], list[str]]:
    """The operators of the file query and of the Kafka query: every operator in one of the two,
    chosen by ``seed`` (half each, the two late-record side outputs apart, so that each query
    routes late records), as ``make test`` runs them; ``make test-crash`` runs all in both."""
    names = sorted(OPERATORS)
    random.Random(seed).shuffle(names)
    aside = [n for n in names if n.endswith("_late_aside")]
    assert len(aside) == 2, aside  # one for each query
    rest = [n for n in names if n not in aside]
    half = len(rest) // 2
    return [aside[0], *rest[:half]], [aside[1], *rest[half:]]


QUERY_NAMES = ("file", "kafka", "kafka_sink", "kafka_eos")

# Spark gives a Python worker it starts 10 seconds to connect back (hard-coded in
# PythonWorkerFactory; the driver-side init of a Python processor starts one as the query plans a
# micro-batch). On 2 cores running both test lanes, this harness's two Spark sessions and a broker,
# a worker's imports once took longer: the query failed before running any task (CI, stop 51).
# A supervisor restarts such a query from its checkpoint; so does the harness, which keeps the
# check honest: a restart is one more recovery the outputs must survive, and nothing else is retried.
WORKER_START_TIMEOUT = "Python worker failed to connect back"
RESTARTS_PER_QUERY = 2


def start_queries(spark: SparkSession, setup: dict, marker: str | None, names: tuple = QUERY_NAMES) -> dict:
    """The harness's queries, by name: ``file`` (the JSON files of ``setup["files"]`` into
    Parquet, through the operators ``setup["file_operators"]``), ``kafka`` (``setup["topic"]``
    into Parquet, through ``setup["kafka_operators"]``), ``kafka_sink`` (the topic, through
    KAFKA_SINK_OPERATORS, into the topic ``setup["kafka_out"]``, at-least-once; into Parquet when
    that is not set) and ``kafka_eos`` (the same, exactly once into ``setup["kafka_eos_out"]``), or
    those of them in ``names``. Outputs and checkpoints go under ``setup["root"]``; all run
    ``availableNow``."""
    return {name: start_query(spark, setup, marker, name) for name in names}


def start_query(spark: SparkSession, setup: dict, marker: str | None, name: str) -> StreamingQuery:
    """One of start_queries' queries, started (again) from its checkpoint."""
    root = setup["root"]
    if name == "file":
        source, operators = file_source(spark, setup["files"]), setup["file_operators"]
    else:
        source = kafka_source(spark, setup["bootstrap"], setup["topic"], setup["max_offsets"])
        operators = setup["kafka_operators"] if name == "kafka" else KAFKA_SINK_OPERATORS
    out = all_operators(source, operators)
    if marker:
        out = with_marker(out, marker, name)
    writer = out.writeStream.option("checkpointLocation", os.path.join(root, "checkpoint", name))
    if name == "kafka_sink" and setup.get("kafka_out"):
        writer = writer.format("kafka").option("kafka.bootstrap.servers", setup["bootstrap"])
        writer = writer.option("topic", setup["kafka_out"])
    elif name == "kafka_eos" and setup.get("kafka_eos_out"):
        writer = writer.format(EXACTLY_ONCE_KAFKA).option("kafka.bootstrap.servers", setup["bootstrap"])
        writer = writer.option("topic", setup["kafka_eos_out"])
    else:
        writer = writer.format("parquet").option("path", os.path.join(root, "out", name))
    return writer.trigger(availableNow=True).queryName(f"crash_{name}").start()


def await_queries(spark: SparkSession, setup: dict, marker: str | None, queries: dict) -> None:
    """Waits until every query of start_queries (``queries``, by name) is done; restarts one that
    failed only because Spark timed out a Python worker's start (WORKER_START_TIMEOUT), at most
    RESTARTS_PER_QUERY times, and says so on stdout. Any other failure is raised."""
    for name in list(queries):
        for restart in range(RESTARTS_PER_QUERY + 1):
            try:
                queries[name].awaitTermination()
                break
            except StreamingQueryException as failure:
                if WORKER_START_TIMEOUT not in str(failure) or restart == RESTARTS_PER_QUERY:
                    raise
                print(f"restarting {name}: {WORKER_START_TIMEOUT}", flush=True)
                queries[name] = start_query(spark, setup, marker, name)
