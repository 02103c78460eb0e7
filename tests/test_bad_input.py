"""Bad input gets a clear error naming what is wrong; nothing is silently dropped."""

import sys
from datetime import timedelta

import pytest
from kstreams_spark import (
    JoinWindows,
    KStream,
    KStreamsError,
    KStreamsQueryError,
    Processor,
    PunctuationType,
    SessionWindows,
    Stores,
    TimeWindows,
)
from pyspark import cloudpickle
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F
from streams import BASE, SCHEMA, Rec, StreamRun, batch_df, with_offsets

# Python workers cannot import this test module; its processors travel by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture()
def df(spark):
    return batch_df(spark, with_offsets([Rec("a", 1), Rec("a", 2)]))


def test_missing_key_column_lists_available_columns(spark, df):
    with pytest.raises(
        KStreamsError,
        match=r"no key column 'user'.*available columns: key, value, timestamp, partition, offset",
    ):
        KStream(df, key="user").deduplicate_by_key("10 s")


def test_missing_timestamp_column(spark, df):
    with pytest.raises(KStreamsError, match="no timestamp column 'ts'"):
        KStream(df, timestamp="ts").deduplicate_by_key("10 s")


def test_explicit_partition_column_must_exist(spark, df):
    with pytest.raises(KStreamsError, match="no partition column 'p'"):
        KStream(df, partition="p").deduplicate_by_key("10 s")


def test_wrong_timestamp_type(spark, df):
    bad = df.withColumn("timestamp", F.col("timestamp").cast("string"))
    with pytest.raises(
        KStreamsError, match="timestamp column 'timestamp' has type string; it must be a timestamp"
    ):
        KStream(bad).deduplicate_by_key("10 s")


def test_wrong_partition_type(spark, df):
    bad = df.withColumn("partition", F.lit("zero"))
    with pytest.raises(KStreamsError, match="partition column 'partition' has type string"):
        KStream(bad).deduplicate_by_key("10 s")


class _Upper(Processor):
    def init(self, context):
        self.context = context

    def process(self, record):
        self.context.forward(record.key, record.value.upper())


EVERY_OPERATOR = {
    "deduplicate_by_key": lambda s: s.deduplicate_by_key("10 s"),
    "deduplicate_by_key_value": lambda s: s.deduplicate_by_key_value("value", "10 s"),
    "deduplicate": lambda s: s.deduplicate("value", "10 s"),
    "deduplicate_by_sequence": lambda s: s.deduplicate_by_sequence(F.lit(1)),
    "tumbling_distinct": lambda s: (
        s.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace("1 minute")).distinct()
    ),
    "session_distinct": lambda s: (
        s.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace("1 minute")).distinct()
    ),
    "count": lambda s: s.group_by_key().count(),
    "reduce": lambda s: s.group_by_key().reduce(lambda agg, v: F.concat(agg, v)),
    "windowed_aggregate": lambda s: (
        s.group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace("1 minute"))
        .aggregate(F.lit(0), lambda agg, v: agg + 1)
    ),
    "to_table": lambda s: s.to_table(),
    "join": lambda s: s.join(s, lambda a, b: a, JoinWindows.of_time_difference_with_no_grace("1 s")),
    "table_join": lambda s: s.to_table().join(s.to_table(), lambda a, b: a),
    "process": lambda s: s.process(_Upper),
}
NEEDS_TIMESTAMP = set(EVERY_OPERATOR) - {"deduplicate_by_sequence"}
NEEDS_KEY = set(EVERY_OPERATOR) - {"deduplicate", "deduplicate_by_sequence"}  # they judge by id, sequence


@pytest.mark.parametrize("operator", sorted(EVERY_OPERATOR))
def test_every_operator_names_a_missing_or_mistyped_column(spark, df, operator):
    op = EVERY_OPERATOR[operator]
    if operator in NEEDS_KEY:
        with pytest.raises(KStreamsError, match="no key column 'user'.*available columns: key, value"):
            op(KStream(df, key="user"))
    with pytest.raises(KStreamsError, match="partition column 'partition' has type string"):
        op(KStream(df.withColumn("partition", F.lit("zero"))))
    if operator in NEEDS_TIMESTAMP:
        with pytest.raises(KStreamsError, match="timestamp column 'timestamp' has type string"):
            op(KStream(df.withColumn("timestamp", F.col("timestamp").cast("string"))))


def test_map_key_is_refused(spark, df):
    bad = df.withColumn("key", F.create_map(F.lit("a"), F.lit(1)))
    with pytest.raises(
        KStreamsError, match="key column 'key' has type map<string,int>, which cannot be a dedup key"
    ):
        KStream(bad).deduplicate_by_key("10 s")


@pytest.mark.parametrize(
    "interval, message",
    [
        ("-5 seconds", "interval must not be negative, got '-5 seconds'"),
        (timedelta(seconds=-1), "interval must not be negative"),
        ("ten seconds", "cannot read interval 'ten seconds'"),
        ("10 parsecs", "cannot read interval '10 parsecs'"),
        ("", "cannot read interval ''"),
        ("1 month", "cannot read interval '1 month': months and years have no fixed length .*\"30 days\""),
        ("P1Y", "cannot read interval 'P1Y': months and years have no fixed length"),
    ],
)
def test_bad_intervals(spark, df, interval, message):
    with pytest.raises(KStreamsError, match=message):
        KStream(df).deduplicate_by_key(interval)


def test_interval_of_wrong_type(spark, df):
    with pytest.raises(KStreamsError, match="interval must be a datetime.timedelta or a string"):
        KStream(df).deduplicate_by_key(10)


@pytest.mark.parametrize(
    "interval", ["10s", "10 seconds", "10000 ms", "PT10S", timedelta(seconds=10), "0.1 min 4 s"]
)
def test_interval_spellings(spark, df, interval):
    # a@1, a@2 -> one record with any of these spellings of 10 s
    assert KStream(df).deduplicate_by_key(interval).df.count() == 1


def test_interval_finer_than_a_microsecond(spark, df):
    with pytest.raises(KStreamsError, match="finer than a microsecond"):
        KStream(df).deduplicate_by_key("0.5 us")


def test_id_of_wrong_type(spark, df):
    with pytest.raises(KStreamsError, match="id must be a column name or a Column, got int 3"):
        KStream(df).deduplicate(3, "10 s")


def test_id_column_that_does_not_exist(spark, df):
    with pytest.raises(KStreamsError, match="the id expression .*nope.* does not resolve on this DataFrame"):
        KStream(df).deduplicate("nope", "10 s")


def test_id_expression_with_a_syntax_error_quotes_the_parser(spark, df):
    with pytest.raises(KStreamsError) as e:
        KStream(df).deduplicate(F.expr("value +* 1"), "10 s")
    message = str(e.value)
    assert "does not resolve on this DataFrame" in message
    assert "Spark said: [PARSE_SYNTAX_ERROR] Syntax error at or near" in message


def test_id_expression_of_the_wrong_type_says_cast_it(spark, df):
    """Kafka's value is binary: a JSON function on it needs a cast, and the error says so."""
    binary_id = F.get_json_object(F.col("value").cast("binary"), "$.id")
    with pytest.raises(KStreamsError) as e:
        KStream(df).deduplicate(binary_id, "10 s")
    message = str(e.value)
    assert (
        "does not resolve on this DataFrame (a column of another type than the expression needs: cast it"
        in message
    )
    assert "Spark said: [DATATYPE_MISMATCH" in message


def test_id_column_of_another_dataframe(spark, df):
    other = spark.range(3).withColumnRenamed("id", "other_id")
    with pytest.raises(KStreamsError, match="does not resolve on this DataFrame"):
        KStream(df).deduplicate_by_key_value(other["other_id"], "10 s")


def test_not_a_dataframe():
    with pytest.raises(KStreamsError, match="KStream needs a pyspark DataFrame, got list"):
        KStream([1, 2])


def test_bad_on_null_timestamp_option(spark, df):
    with pytest.raises(KStreamsError, match="on_null_timestamp must be 'fail' or 'skip', got 'drop'"):
        KStream(df, on_null_timestamp="drop")


def test_session_without_rocksdb_says_what_to_set(spark, df):
    other = spark.newSession()
    other.conf.set(
        "spark.sql.streaming.stateStore.providerClass",
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    )
    df2 = other.createDataFrame(df.collect(), SCHEMA)
    with pytest.raises(KStreamsError) as e:
        KStream(df2).deduplicate_by_key("10 s")
    msg = str(e.value)
    assert "need the RocksDB state store" in msg
    assert (
        "spark.sql.streaming.stateStore.providerClass=org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        in msg
    )
    assert "configure_spark" in msg


def null_timestamp_message(partition: int, offset: int) -> str:
    return (
        f"null timestamp in column 'timestamp' at partition {partition}, offset {offset}; fix the "
        "producer, or pass on_null_timestamp='skip' (Scala: NullTimestamps.Skip) to skip and count such records"
    )


def test_null_timestamp_fails_batch_query_naming_partition_and_offset(spark):
    """The action raises the library's message alone: Spark's job failure is kept behind it."""
    df = batch_df(spark, with_offsets([Rec("a", 1), Rec("a", None), Rec("b", 3)]))
    with pytest.raises(KStreamsError) as e:
        KStream(df).deduplicate_by_key("10 s").df.collect()
    assert str(e.value) == null_timestamp_message(0, 1)
    assert "Job aborted" in str(e.value.spark_exception)


def test_null_timestamp_fails_streaming_query_naming_partition_and_offset(spark, tmp_path):
    """What a user catches is ours first, and still a StreamingQueryException, with Spark's
    ``[STREAM_FAILED] Query [...] terminated with exception: ...`` kept behind it."""
    run = StreamRun(spark, str(tmp_path), lambda d: KStream(d).deduplicate_by_key("10 s").df)
    run.add_batch(with_offsets([Rec("a", 1, partition=3), Rec("a", None, partition=3)]))
    with pytest.raises(KStreamsQueryError) as e:
        run.run()
    assert isinstance(e.value, StreamingQueryException)
    assert str(e.value) == null_timestamp_message(3, 1)
    assert e.value.getMessage() == null_timestamp_message(3, 1)
    assert (e.value.getCondition(), e.value.getSqlState()) == ("STREAM_FAILED", "XXKST")
    assert str(e.value.spark_exception).startswith("[STREAM_FAILED] Query [id = ")
    assert null_timestamp_message(3, 1) in str(e.value.spark_exception)


def test_a_query_stopped_by_anything_else_fails_as_spark_says(spark, tmp_path):
    """Only the library's errors are raised as ours: a user's own raise_error (Spark's
    USER_RAISED_EXCEPTION) in the same query stays the StreamingQueryException PySpark makes."""
    run = StreamRun(
        spark,
        str(tmp_path),
        lambda d: KStream(d).deduplicate_by_key("10 s").df.select(F.raise_error(F.lit("user's own"))),
    )
    run.add_batch(with_offsets([Rec("a", 1)]))
    with pytest.raises(StreamingQueryException) as e:
        run.run()
    assert not isinstance(e.value, KStreamsError)
    assert str(e.value).startswith("[STREAM_FAILED] Query [id = ")
    assert "[USER_RAISED_EXCEPTION] user's own" in str(e.value)


def restarted_under(spark, tmp_path, first, then, refused=KStreamsQueryError) -> tuple[StreamRun, Exception]:
    """A StreamRun in ``tmp_path`` of ``first`` over a@1 ("v0"), restarted from its checkpoint as
    ``then`` over a@2 ("v1"), which must be refused with ``refused``: the run and what it raised."""
    run = StreamRun(spark, str(tmp_path), first)
    run.add_batch(with_offsets([Rec("a", 1)]))
    run.run()
    run.op = then
    run.add_batch([Rec("a", 2, offset=1, value="v1")])
    with pytest.raises(refused) as e:
        run.run()
    return run, e.value


def refusal(tmp_path, recorded: str, running: str) -> str:
    """The message of a restart that runs ``running`` where the checkpoint (of a StreamRun in
    ``tmp_path``) holds ``recorded``, its only operator."""
    return (
        f"the checkpoint file:{tmp_path}/checkpoint holds the state of kstreams operator #1 {recorded}, "
        f"but this query runs {running} in its place; state written under other settings would give "
        "other results. Start this query on a new checkpoint location, or run it with the settings the "
        f"checkpoint was written with (the checkpoint's operators, in order: {recorded})"
    )


def test_a_checkpoint_restarted_under_another_operator_fails_naming_both(spark, tmp_path):
    """Spark would start a windowed distinct from empty state (letting duplicates through); the
    library refuses before the first micro-batch, naming the checkpoint's operator and the new one."""
    windows = TimeWindows.of_size_with_no_grace(timedelta(seconds=10))
    run, refused = restarted_under(
        spark,
        tmp_path,
        lambda d: KStream(d).deduplicate_by_key("10 s").df,
        lambda d: KStream(d).group_by_key().windowed_by(windows).distinct().df,
    )
    assert str(refused) == refusal(
        tmp_path,
        "deduplicate_by_key(partition=partition, interval=PT10S, key=key)",
        "windowed_distinct(partition=partition, size=PT10S, grace=PT0S, key=key)",
    )
    assert [r["value"] for r in run.output().collect()] == ["v0"]  # nothing of the refused run


def test_a_join_restarted_with_another_time_difference_fails_naming_both(spark, tmp_path):
    """A join's grace may change on a restart (tests/test_restart_changes.py), its time difference
    may not: the buffered records were kept for the old one's windows."""

    def join(difference):
        def op(d):
            ks = KStream(d)
            return ks.join(ks, lambda a, b: a, JoinWindows(difference, "0 s")).df

        return op

    run, refused = restarted_under(spark, tmp_path, join("10 s"), join("20 s"))
    message = str(refused)
    assert "time_difference=PT10S, grace=PT0S" in message and "time_difference=PT20S, grace=PT0S" in message
    assert message.startswith(
        f"the checkpoint file:{tmp_path}/checkpoint holds the state of kstreams operator #1 join("
    )
    assert "in its place; state written under other settings would give other results" in message


class _FirstOfKey(Processor):
    """Forwards each key's first record, remembering keys in the store it is given."""

    def __init__(self, store):
        self.store = store

    def init(self, context):
        self.context = context
        self.seen = context.get_state_store(self.store)

    def process(self, record):
        if self.seen.put_if_absent(record.key, 1) is None:
            self.context.forward(record.key, record.value)


def test_a_python_processor_restarted_with_a_store_renamed_is_refused(spark, tmp_path):
    """Spark would give the renamed store a new, empty column family, and the restarted processor
    would forward every key again; the checkpoint records the processors and their stores."""

    def remembering(store):
        return lambda d: (
            KStream(d).process(lambda: _FirstOfKey(store), stores=[Stores.key_value(store)], name="first").df
        )

    run, refused = restarted_under(spark, tmp_path, remembering("seen"), remembering("seen_keys"))
    assert str(refused) == refusal(
        tmp_path,
        "python_process(partition=partition, processors=[first], stores=[seen])",
        "python_process(partition=partition, processors=[first], stores=[seen_keys])",
    )
    run.op = remembering("seen")  # as recorded: a's second record is not forwarded
    run.run()
    assert sorted(r["value"] for r in run.output().collect()) == ["v0"]


def test_a_python_processor_in_foreach_batch_is_no_operator_of_the_query(spark, tmp_path):
    """foreachBatch plans each micro-batch's batch DataFrame on the query's thread: a processor run
    there is not one of the streaming query's operators, and the checkpoint records nothing of it
    (it recorded it again at each micro-batch)."""
    run = StreamRun(spark, str(tmp_path), lambda d: d)
    run.add_batch(with_offsets([Rec("a", 1)]))
    run.add_batch([Rec("a", 2, offset=1, value="v1")])
    seen = []

    def each(batch, _):
        first = KStream(batch).process(lambda: _FirstOfKey("s"), stores=[Stores.key_value("s")], name="first")
        seen.extend(r["value"] for r in first.df.collect())

    source = spark.readStream.schema(run.schema).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    checkpoint = tmp_path / "foreach-checkpoint"
    query = (
        source.writeStream.foreachBatch(each)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert seen == ["v0", "v1"]  # each batch on its own: a is new in both
    assert not (checkpoint / "kstreams" / "operators.json").exists()


ONE_DEDUP = "[(OperatorId: 0 -> OperatorName: transformWithStateExec)]"
TWO_DEDUPS = (
    "[(OperatorId: 0 -> OperatorName: transformWithStateExec), "
    "(OperatorId: 1 -> OperatorName: transformWithStateExec)]"
)


def _one(d):
    return KStream(d).deduplicate_by_key("10 s").df


def _two(d):
    return KStream(KStream(d).deduplicate_by_key("10 s").df).deduplicate_by_key("20 s").df


@pytest.mark.parametrize(
    "first, then, recorded, running",
    [(_one, _two, ONE_DEDUP, TWO_DEDUPS), (_two, _one, TWO_DEDUPS, ONE_DEDUP)],
    ids=["added", "removed"],
)
def test_an_operator_added_or_removed_is_refused_by_spark(spark, tmp_path, first, then, recorded, running):
    """Spark checks the stateful operators of a restarted query against its checkpoint's state
    metadata, before any operator's own check runs, and refuses one added or removed."""
    run, refused = restarted_under(spark, tmp_path, first, then, refused=StreamingQueryException)
    assert not isinstance(refused, KStreamsError)
    assert refused.getCondition() == "STREAM_FAILED"
    assert (
        "[STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA] Streaming stateful operator name does "
        "not match with the operator in state metadata."
    ) in str(refused)
    assert (
        f"Stateful operators in the metadata: {recorded}; Stateful operators in current batch: {running}"
        in str(refused)
    )
    assert [r["value"] for r in run.output().collect()] == ["v0"]  # nothing of the refused run


class _ScheduleInProcess(Processor):
    def init(self, context):
        self.context = context

    def process(self, record):
        self.context.schedule(1000, PunctuationType.STREAM_TIME)


class _ScheduleEvery(Processor):
    interval = None

    def init(self, context):
        context.schedule(self.interval, PunctuationType.STREAM_TIME)

    def process(self, record):
        pass


class _ScheduleZero(_ScheduleEvery):
    interval = 0


class _ScheduleNegative(_ScheduleEvery):
    interval = timedelta(seconds=-1)


@pytest.mark.parametrize(
    "processor, message",
    [
        (_ScheduleInProcess, "processor 'bad' called schedule outside init; register schedules in init"),
        (_ScheduleZero, "processor 'bad': punctuation interval must be at least 1 ms, got 0"),
        (_ScheduleNegative, "processor 'bad': punctuation interval must be at least 1 ms, got"),
    ],
)
def test_a_bad_schedule_fails_the_query_naming_the_processor(spark, df, processor, message):
    with pytest.raises(KStreamsError) as e:
        KStream(df).process(processor, name="bad").df.collect()
    assert str(e.value).startswith(message)


class _ForwardsADict(Processor):
    def init(self, context):
        self.context = context

    def process(self, record):
        self.context.forward(record.key, {"amount": 1})


def test_a_processor_forwarding_a_value_of_the_wrong_type_is_named(spark, df):
    """Arrow would refuse the dict in a worker traceback naming neither the processor nor the
    type (``ArrowTypeError: Expected bytes, got a 'dict' object``)."""
    with pytest.raises(KStreamsError) as e:
        KStream(df).process(_ForwardsADict, name="amounts").df.collect()
    assert str(e.value) == (
        "processor 'amounts' forwarded a value of type dict ({'amount': 1}) at partition 0, offset 0, "
        "where the output's value is string: convert it in the processor, or declare value_type= "
        "(process() or Topology)"
    )


# a@1 (offset 0, "v0"), then a and b with null timestamps (offsets 1 and 2), then b@3 (offset 3)
SKIPPED = [Rec("a", 1), Rec("a", None), Rec("b", None), Rec("b", 3)]


def at(seconds):
    """The timestamp ``seconds`` after BASE, as collect() returns it (naive, UTC)."""
    return (BASE + timedelta(seconds=seconds)).replace(tzinfo=None)


def null_timestamp_counts(progress) -> dict[str, int]:
    """Total ``null_timestamps_skipped`` of each ``kstreams_null_timestamps`` metric."""
    counts: dict[str, int] = {}
    for p in progress:
        for name, m in p["observedMetrics"].items():
            if name.startswith("kstreams_null_timestamps"):
                counts[name] = counts.get(name, 0) + m["null_timestamps_skipped"]
    return counts


def test_null_timestamps_can_be_skipped_and_counted(spark, tmp_path):
    op = lambda d: KStream(d, on_null_timestamp="skip").deduplicate_by_key("10 s").df  # noqa: E731
    run = StreamRun(spark, str(tmp_path), op)
    run.add_batch(with_offsets(SKIPPED))
    run.run()
    # the two null-timestamp records are skipped, so b@3 is the first b: both others forwarded
    assert sorted(tuple(r) for r in run.output().collect()) == [
        ("a", "v0", at(1), 0, 0),
        ("b", "v3", at(3), 0, 3),
    ]
    assert null_timestamp_counts(run.progress) == {"kstreams_null_timestamps": 2}


# every operator family's entry to the input columns: a null partition or offset fails each alike
OPERATOR_FAMILIES = {
    "deduplicate_by_key": lambda s: s.deduplicate_by_key("10 s"),
    "deduplicate": lambda s: s.deduplicate("value", "10 s"),
    "deduplicate_by_sequence": lambda s: s.deduplicate_by_sequence(F.lit(1)),
    "windowed_distinct": lambda s: (
        s.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace("1 minute")).distinct()
    ),
    "count": lambda s: s.group_by_key().count().to_stream(),
    "windowed_count": lambda s: (
        s.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace("1 minute")).count().to_stream()
    ),
    "to_table": lambda s: s.to_table().to_stream(),
}


@pytest.mark.parametrize("operator", OPERATOR_FAMILIES.values(), ids=OPERATOR_FAMILIES.keys())
def test_null_offset_fails_naming_column_and_partition(spark, operator):
    records = with_offsets([Rec("a", 1, partition=4), Rec("b", 2, partition=4)])
    rows = [
        (r.key, r.value, r.timestamp(), r.partition, None if i == 1 else r.offset)
        for i, r in enumerate(records)
    ]
    df = spark.createDataFrame(rows, SCHEMA)
    with pytest.raises(KStreamsError) as e:
        operator(KStream(df)).df.collect()
    assert str(e.value) == (
        "null offset in column 'offset' at partition 4; fix the source, or pass offset=None "
        "(Scala: StreamColumns(offset = None)) to order each partition's records by timestamp"
    )


def test_column_names_must_be_names(spark, df):
    with pytest.raises(
        KStreamsError, match=r"key must name a column of the DataFrame, got Column .*withColumn"
    ):
        KStream(df, key=F.col("key"))
    with pytest.raises(
        KStreamsError, match="offset must name a column of the DataFrame \\(or be None\\), got int 3"
    ):
        KStream(df, offset=3)
    with pytest.raises(KStreamsError, match="on_null_timestamp must be 'fail' or 'skip', got 'drop'"):
        KStream(df, on_null_timestamp="drop")


def test_interval_and_window_checks(spark, df):
    with pytest.raises(KStreamsError, match="interval '999999999999 weeks' is too long"):
        KStream(df).deduplicate_by_key("999999999999 weeks")
    with pytest.raises(KStreamsError, match="session inactivity gap must be positive"):
        KStream(df).group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace("0 s"))


def _join_with_bs(s):
    right = KStream(s.df.where(F.col("key") == "b"), on_null_timestamp="skip")
    windows = JoinWindows.of_time_difference_with_no_grace(timedelta(minutes=1))
    return s.join(right, lambda left, r: F.concat(left, r), windows)


# the output rows of each operator over SKIPPED (all columns, in the operator's column order)
DEDUPED = [("a", "v0", at(1), 0, 0), ("b", "v3", at(3), 0, 3)]
MINUTE = (at(0), at(60))  # BASE is a whole minute: a@1 and b@3 are in one epoch-aligned window


@pytest.mark.parametrize(
    "operator, expected, skipped",
    [
        (lambda s: s.deduplicate_by_key("10 s"), DEDUPED, [2]),
        (
            lambda s: (
                s.group_by_key()
                .windowed_by(TimeWindows.of_size_with_no_grace(timedelta(minutes=1)))
                .distinct()
            ),
            [row + (MINUTE,) for row in DEDUPED],
            [2],
        ),
        # one record per key is left: each key's count is 1, at that record's timestamp
        (lambda s: s.group_by_key().count().to_stream(), [("a", 1, at(1)), ("b", 1, at(3))], [2]),
        (lambda s: s.to_table().to_stream(), [("a", "v0", at(1)), ("b", "v3", at(3))], [2]),
        # the right side (the input's b records) skips b@None, its own count of 1, and keeps b@3,
        # which joins the left's b@3 at max(3, 3); the left's a@1 has no b to join
        (_join_with_bs, [("b", "v3v3", at(3))], [2, 1]),
    ],
    ids=["deduplicate_by_key", "windowed_distinct", "count", "to_table", "join"],
)
def test_skip_means_the_same_for_every_operator(spark, tmp_path, operator, expected, skipped):
    """With on_null_timestamp='skip' no operator sees a null-timestamp record: each input counts
    its skipped records as `null_timestamps_skipped` of `kstreams_null_timestamps` (`_2`...)."""
    run = StreamRun(spark, str(tmp_path), lambda d: operator(KStream(d, on_null_timestamp="skip")).df)
    run.add_batch(with_offsets(SKIPPED))
    run.run()
    assert sorted(tuple(r) for r in run.output().collect()) == expected
    counts = null_timestamp_counts(run.progress)
    assert [counts[n] for n in sorted(counts)] == skipped


def test_dataframe_of_a_stopped_session(tmp_path):
    """Runs in its own process, since it stops its SparkContext."""
    import subprocess
    import sys

    script = tmp_path / "stopped.py"
    script.write_text(
        "from pyspark.sql import SparkSession\n"
        "from kstreams_spark import KStream, KStreamsError, configure_spark\n"
        "spark = configure_spark(SparkSession.builder.master('local[1]')"
        ".config('spark.ui.enabled', 'false')).getOrCreate()\n"
        "df = spark.createDataFrame([('a', 1)], 'key string, secs int')"
        ".selectExpr('key', 'timestamp_seconds(secs) AS timestamp')\n"
        "spark.stop()\n"
        "try:\n"
        "    KStream(df).deduplicate_by_key('1 s')\n"
        "except KStreamsError as e:\n"
        "    print('KStreamsError:', e)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert (
        "KStreamsError: the DataFrame belongs to a SparkSession whose SparkContext is stopped" in out.stdout
    ), out.stderr[-2000:]


def test_configure_spark_refuses_a_plain_session_already_running(tmp_path):
    """getOrCreate() would return the running session without the jar; say to stop it (in its
    own process: it needs a plain SparkContext)."""
    import subprocess
    import sys

    script = tmp_path / "plain.py"
    script.write_text(
        "from pyspark.sql import SparkSession\n"
        "from kstreams_spark import KStreamsError, configure_spark\n"
        "plain = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "try:\n"
        "    configure_spark(SparkSession.builder.master('local[1]')).getOrCreate()\n"
        "except KStreamsError as e:\n"
        "    print('KStreamsError:', e)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert (
        "KStreamsError: a Spark session without kstreams-spark is already running in this process, and "
        "getOrCreate() would return it unchanged: stop it first (spark.stop())" in out.stdout
    ), out.stderr[-2000:]


def test_configure_spark_sets_what_kstream_configure_sets(spark):
    """Python's settings are written out in Python (configure_spark runs before any JVM exists) and
    Scala's in SparkSessionChecks: the two lists must stay the same."""
    from kstreams_spark.session import DEFAULT_SETTINGS, REQUIRED_SETTINGS

    jvm = spark.sparkContext._jvm
    checks = jvm.kstreams.internal.plan.SparkSessionChecks
    scala_defaults = {
        t._1(): t._2() for t in jvm.scala.jdk.javaapi.CollectionConverters.asJava(checks.Defaults())
    }
    assert scala_defaults == DEFAULT_SETTINGS
    assert {checks.ProviderKey(): checks.RocksDBProvider()} == REQUIRED_SETTINGS


@pytest.mark.parametrize(
    "topic, message",
    [
        (123, "topic must be a Kafka topic's name (a str), got 123 (int)"),
        ("", "output topic '' is not a valid Kafka topic name: it is empty"),
        (
            "bad topic!",
            "output topic 'bad topic!' is not a valid Kafka topic name: it contains ' ', '!'; "
            "use only ASCII letters, digits, '.', '_' and '-'",
        ),
        ("t" * 250, "is not a valid Kafka topic name: it has 250 characters, at most 249 are allowed"),
        ("..", "output topic '..' is not a valid Kafka topic name: '.' and '..' are not allowed"),
    ],
)
def test_to_refuses_a_topic_name_kafka_refuses_at_once(spark, df, topic, message):
    """Kafka's topic-name rule, checked when ``to`` is called: a producer would wait 60 s for
    the topic's metadata and then fail without saying why."""
    with pytest.raises(KStreamsError) as refused:
        KStream(df).to(topic)
    assert message in str(refused.value)
    KStream(df).to("ok.topic_name-1")  # every legal character


def test_merge_names_the_column_whose_types_differ(spark, df):
    """Kafka Streams' merge has one value type; a union would cast or fail on one value."""
    numbers = KStream(df.withColumn("value", F.length("key")))
    with pytest.raises(KStreamsError) as refused:
        KStream(df).merge(numbers)
    assert str(refused.value) == (
        "merge needs the same column types on both streams: 'value' is string in this stream and int in "
        'the other; cast one of them, e.g. col("value").cast("string")'
    )


@pytest.mark.parametrize("operator", OPERATOR_FAMILIES.values(), ids=OPERATOR_FAMILIES.keys())
def test_null_partition_fails_every_operator_naming_column_and_offset(spark, operator):
    """One rule for every operator: a record without a partition belongs to no task."""
    records = with_offsets([Rec("a", 1, partition=4), Rec("b", 2, partition=4)])
    rows = [
        (r.key, r.value, r.timestamp(), None if i == 1 else r.partition, r.offset)
        for i, r in enumerate(records)
    ]
    df = spark.createDataFrame(rows, SCHEMA)
    with pytest.raises(KStreamsError) as e:
        operator(KStream(df)).df.collect()
    assert str(e.value) == (
        "null partition in column 'partition' at partition null, offset 1; fix the source, or pass "
        "partition=None (Scala: StreamColumns(partition = None)) to read the stream as one partition"
    )


def test_null_timestamp_of_a_stream_without_offsets_names_its_partition(spark):
    """Without an offset column the message says so where an offset would be."""
    df = batch_df(spark, with_offsets([Rec("a", 1, partition=3), Rec("a", None, partition=3)])).drop("offset")
    with pytest.raises(KStreamsError) as e:
        KStream(df, offset=None).deduplicate_by_key("10 s").df.collect()
    assert str(e.value) == (
        "null timestamp in column 'timestamp' at partition 3, offset n/a (no offset column); fix the "
        "producer, or pass on_null_timestamp='skip' (Scala: NullTimestamps.Skip) to skip and count such records"
    )


def test_a_function_written_for_record_values_says_it_gets_columns(spark, df):
    """A user's function is applied once to Columns; Python's own error ("'Column' object is not
    callable") would not say so."""
    with pytest.raises(KStreamsError) as refused:
        KStream(df).map_values(lambda v: v.upper())
    assert str(refused.value) == (
        "mapper raised TypeError: 'Column' object is not callable; it is called once, with Columns, to "
        "build a Spark expression (not once per record with its values): write it with "
        "pyspark.sql.functions, e.g. lambda v: F.upper(v)"
    )
    with pytest.raises(
        KStreamsError, match=r"^key_selector raised TypeError: object of type 'Column' has no len\(\)"
    ):
        KStream(df).select_key(lambda k, v: len(v))


def test_processor_arguments_of_the_wrong_python_type_are_named(spark, df):
    """A store spec not in a list and a type given as a string reach no Python internals."""
    from kstreams_spark import Stores

    class Passing(Processor):
        def process(self, record):
            self.context.forward(record)

    with pytest.raises(KStreamsError) as refused:
        KStream(df).process(Passing, stores=Stores.key_value("seen"))
    assert str(refused.value) == (
        "stores must be a list of Stores.key_value(...) specs, e.g. stores=[Stores.key_value('seen')], "
        "got StoreSpec(name='seen')"
    )
    with pytest.raises(KStreamsError) as refused:
        KStream(df).process(Passing, key_type="string")
    assert str(refused.value) == (
        "key_type must be a pyspark DataType such as StringType() or LongType() (from pyspark.sql.types), "
        "got 'string'"
    )


def test_a_function_returning_a_python_value_says_to_return_a_column(spark, df):
    """A str result would be read as a column name, and Spark would then suggest kstreams'
    internal columns (``__kstreams_value0``)."""
    with pytest.raises(KStreamsError) as refused:
        KStream(df).join(
            KStream(df), lambda left, right: "both", JoinWindows.of_time_difference_with_no_grace("1 s")
        )
    assert (
        str(refused.value) == "joiner must return a Column, got str 'both'; for a constant, return F.lit(...)"
    )


def test_python_arguments_of_the_wrong_kind_are_named(spark, df):
    """Mistakes found trying the API as a new user (issue 37's "twenty more"): each names the
    argument and its right form instead of failing later in a worker or with Python internals."""
    from kstreams_spark import configure_spark, operator_metrics

    cases = [
        (
            lambda: KStream(df).process(object),
            "process takes a processor class (with a process(record) method, e.g. a subclass of "
            "kstreams_spark.Processor) or a function returning a processor, got type <class 'object'>",
        ),
        (
            lambda: KStream(df).process(Processor, name=123),
            "name must be a str (it names the processor in errors), got 123",
        ),
        (
            lambda: configure_spark("local[2]"),
            "configure_spark takes SparkSession.builder (e.g. SparkSession.builder.master('local[2]')), got str; "
            "call getOrCreate() on what it returns",
        ),
        (
            lambda: operator_metrics(None),
            "operator_metrics takes a list of progress reports, e.g. query.recentProgress or "
            "[query.lastProgress], got NoneType",
        ),
    ]
    for call, message in cases:
        with pytest.raises(KStreamsError) as refused:
            call()
        assert str(refused.value) == message
