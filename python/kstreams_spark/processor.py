"""The Processor API (KIP-28) for Python: processors written in Python, run by Spark's Python
stateful processing (``transformWithState``), one instance per input partition (a Kafka Streams
task), with key-value stores kept in Spark's checkpointed RocksDB state store.

The JVM prepares the input exactly as for the Scala API (``kstreams.PythonAPI.processorInput``:
grouped by input partition, in offset order, timestamp without watermark metadata); this module
runs the user's code on it. Punctuation follows the Scala API (and Kafka's ``PunctuationQueue``).

>>> class Sum(Processor):
...     def init(self, context):
...         self.context = context
...         self.sums = context.get_state_store("sums")
...         context.schedule(timedelta(seconds=10), PunctuationType.STREAM_TIME)
...     def process(self, record):
...         self.sums.put(record.key, (self.sums.get(record.key) or 0) + record.value)
...     def punctuate(self, timestamp):
...         for key, total in sorted(self.sums.all()):
...             self.context.forward(key, total, timestamp)
>>> KStream(df).process(Sum, stores=[Stores.key_value("sums")]).df
"""

from __future__ import annotations

import enum
import pickle
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from kstreams_spark.errors import KStreamsError

# Helper columns of the prepared input (kstreams.internal.plan.ArrivalOrder) and the forwarded timestamp.
GROUP = "__kstreams_group"
PARTITION = "__kstreams_partition"
ORDER = "__kstreams_order"
TIMESTAMP_MICROS = "__kstreams_ts"
FORWARD_TS = "__kstreams_forward_ts"
_PICKLE_PROTOCOL = 4  # fixed, so equal keys always pickle to the same bytes


@dataclass(frozen=True)
class Record:
    """One input record: key, value, timestamp (epoch ms), and where it came from (``topic`` is
    None without a ``topic`` column).

    >>> Record("a", 1, timestamp=1000, topic=None, partition=0, offset=7)
    """

    key: Any
    value: Any
    timestamp: int
    topic: str | None
    partition: int
    offset: int


class PunctuationType(enum.Enum):
    """When a punctuation fires.

    ``STREAM_TIME``: when the partition's stream time reaches the next multiple of the interval,
    checked after each record; ``punctuate`` gets the stream time, boundaries jumped over fire
    once, and the first record always punctuates (Kafka's behaviour).
    ``WALL_CLOCK_TIME``: on processing time, one interval after the schedule was first registered,
    then every interval (Spark processing-time timers; needs ``process(..., wall_clock=True)``).
    """

    STREAM_TIME = "stream_time"
    WALL_CLOCK_TIME = "wall_clock_time"


class Processor:
    """Base class of a Python processor; override ``process`` and what else you need.

    One instance serves one input partition for one micro-batch: ``init`` runs before the
    partition's first record or punctuation of the micro-batch, ``close`` at its end. Keep what
    must outlive a micro-batch (or a restart) in a store.

    >>> class Upper(Processor):
    ...     def init(self, context): self.context = context
    ...     def process(self, record): self.context.forward(record.key, record.value.upper())
    """

    def init(self, context: ProcessorContext) -> None:
        """Called first; keep the context, get stores, register schedules."""

    def process(self, record: Record) -> None:
        """Called for each record, in offset order of its input partition."""
        raise NotImplementedError(f"{type(self).__name__} must implement process(record)")

    def punctuate(self, timestamp: int) -> None:
        """Called by schedules registered with ``context.schedule(interval, type)``; ``timestamp``
        is the stream time or the processing time, in ms."""

    def close(self) -> None:
        """Called at the end of the partition's micro-batch."""


@dataclass(frozen=True)
class StoreSpec:
    """A declared key-value store (see :meth:`Stores.key_value`)."""

    name: str


class Stores:
    """Declares stores for ``KStream.process``.

    >>> Stores.key_value("sums")
    StoreSpec(name='sums')
    """

    @staticmethod
    def key_value(name: str) -> StoreSpec:
        """A key-value store of any picklable Python keys and values."""
        if not isinstance(name, str) or not name:
            raise KStreamsError(f"a store needs a non-empty name, got {name!r}")
        return StoreSpec(name)


class KeyValueStore:
    """A key-value store scoped to the processor's input partition, in Spark's checkpointed state
    store, so its contents survive restarts. Keys and values are pickled.

    >>> store.put("a", 1); store.get("a")
    1
    """

    def __init__(self, name: str, state) -> None:
        self.name = name
        self._state = state

    def get(self, key: Any) -> Any:
        """The value of ``key``, or None."""
        found = self._state.getValue((_dump(key),))
        return None if found is None else pickle.loads(found[0])

    def put(self, key: Any, value: Any) -> None:
        """Stores ``value`` under ``key``; ``None`` deletes (as in Kafka)."""
        if value is None:
            self._state.removeKey((_dump(key),))
        else:
            self._state.updateValue((_dump(key),), (_dump(value),))

    def put_if_absent(self, key: Any, value: Any) -> Any:
        """Stores ``value`` only if ``key`` has none; returns the value that was there."""
        existing = self.get(key)
        if existing is None:
            self.put(key, value)
        return existing

    def delete(self, key: Any) -> Any:
        """Removes ``key``; returns the value that was there."""
        existing = self.get(key)
        if existing is not None:
            self._state.removeKey((_dump(key),))
        return existing

    def range(self, start: Any, end: Any) -> list[tuple[Any, Any]]:
        """Entries with ``start <= key <= end`` (inclusive, as in Kafka), in key order."""
        return sorted((k, v) for k, v in self.all() if start <= k <= end)

    def all(self) -> Iterator[tuple[Any, Any]]:
        """Every (key, value) entry, in the state store's order."""
        for key, value in self._state.iterator():
            yield pickle.loads(key[0]), pickle.loads(value[0])


def _dump(value: Any) -> bytes:
    return pickle.dumps(value, protocol=_PICKLE_PROTOCOL)


class ProcessorContext:
    """What a :class:`Processor` can see and do: ``forward``, ``schedule``, the current record's
    ``topic``/``partition``/``offset``/``timestamp``, ``stream_time``, ``get_state_store``."""

    def __init__(self, node: _LiveNode) -> None:
        self._node = node

    def forward(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """Emits a record to the children (or the output); ``timestamp`` (epoch ms) defaults to
        the current record's (in a punctuation: the punctuation time)."""
        task = self._node.task
        task.forward(
            self._node, key, value, task.timestamp_micros if timestamp is None else int(timestamp) * 1000
        )

    def schedule(
        self,
        interval: Any,
        punctuation_type: PunctuationType = PunctuationType.STREAM_TIME,
        punctuator: Callable[[int], None] | None = None,
    ) -> None:
        """Calls ``punctuate`` (or ``punctuator``) every ``interval`` (a timedelta, or ms as int) of
        stream or wall-clock time. Call it from ``init``: schedules are numbered in registration
        order and their next time is checkpointed under that number."""
        self._node.task.schedule(self._node, interval, punctuation_type, punctuator)

    def get_state_store(self, name: str) -> KeyValueStore:
        """The store ``name`` declared for this processor (``stores=[Stores.key_value(name)]``)."""
        return self._node.task.store(self._node, name)

    @property
    def processor_name(self) -> str:
        return self._node.spec.name

    @property
    def topic(self) -> str | None:
        return self._node.task.topic

    @property
    def partition(self) -> int:
        return self._node.task.partition

    @property
    def offset(self) -> int:
        """Offset of the current record; -1 in a punctuation."""
        return -1 if self._node.task.offset is None else self._node.task.offset

    @property
    def timestamp(self) -> int:
        """Timestamp (ms) of the current record, or of the punctuation being run."""
        return self._node.task.timestamp_micros // 1000

    @property
    def stream_time(self) -> int:
        """Largest record timestamp (ms) of the partition so far; -1 before any record."""
        st = self._node.task.stream_time_micros
        return -1 if st is None else st // 1000

    @property
    def current_system_time_ms(self) -> int:
        """Processing time (ms) of the current micro-batch (the time wall-clock punctuation goes
        by); the machine's clock when the query has no processing-time mode."""
        import time

        t = self._node.task.processing_time_ms
        return t if t >= 0 else int(time.time() * 1000)


@dataclass
class _NodeSpec:
    """A processor of the DAG run in one task: where its forwards go (child node indices, and
    sink names; ``None`` is the single output of ``KStream.process``)."""

    name: str
    supplier: Callable[[], Processor]
    stores: list[str]
    children: list[int]
    sinks: list[str | None]


@dataclass
class _Schedule:
    node: int
    number: int
    interval_ms: int
    kind: PunctuationType
    punctuator: Callable[[int], None]


class _LiveNode:
    """A node's processor instance and context inside one task."""

    def __init__(self, task: _Task, index: int, spec: _NodeSpec) -> None:
        self.task, self.index, self.spec = task, index, spec
        self.schedules: list[_Schedule] = []
        self.initializing = True
        self.context = ProcessorContext(self)
        self.processor = task.guard(spec.name, "creating the processor", spec.supplier)
        if not isinstance(self.processor, Processor) and not hasattr(self.processor, "process"):
            raise KStreamsError(
                f"the supplier of processor '{spec.name}' returned {self.processor!r}, not a Processor"
            )

    def init(self) -> None:
        self.task.guard(self.spec.name, "init", lambda: self.processor.init(self.context))
        self.initializing = False


class _Task:
    """One input partition (a Kafka Streams task) for one micro-batch: the processors of the DAG,
    stream time, and routing of forwarded records (synchronously, depth first, as in Kafka)."""

    def __init__(self, runner: _Runner, partition: int, processing_time_ms: int) -> None:
        self.runner = runner
        self.partition = partition
        self.processing_time_ms = processing_time_ms
        self.out: list[Row] = []
        self.stores: dict[str, KeyValueStore] = {}
        saved = runner.stream_time.get() if runner.stream_time.exists() else None
        self.stream_time_micros: int | None = None if saved is None else saved[0]
        self.topic: str | None = None
        self.offset: int | None = None
        self.timestamp_micros = 0
        self.nodes = [_LiveNode(self, i, spec) for i, spec in enumerate(runner.nodes)]
        for node in self.nodes:  # in topology order, as Kafka initializes a task's processors
            node.init()

    def guard(self, name: str, where: str, body: Callable[[], Any]) -> Any:
        """Runs user code; a failure is re-raised naming the processor and where it happened."""
        try:
            return body()
        except KStreamsError:
            raise
        except Exception as e:
            raise KStreamsError(f"processor '{name}' failed {where}: {type(e).__name__}: {e}") from e

    def process(self, row: Row) -> None:
        where = f"partition {self.partition}, offset " + (
            str(row[ORDER]) if self.runner.has_offset else "n/a (no offset column)"
        )
        if row[PARTITION] is None:
            raise KStreamsError(
                f"null partition in column '{self.runner.partition_name}' at offset {row[ORDER]}"
            )
        ts = row[TIMESTAMP_MICROS]
        if ts is None:
            raise KStreamsError(
                f"null timestamp in column '{self.runner.timestamp_name}' at {where}; fix the "
                "producer, or pass on_null_timestamp='skip' to skip and count such records"
            )
        if self.stream_time_micros is None or ts > self.stream_time_micros:
            self.stream_time_micros = ts
        self.topic = row[TOPIC]
        self.offset = row[ORDER] if self.runner.has_offset else None
        self.timestamp_micros = ts
        for child in self.runner.source_children[row[SOURCE]]:
            self.deliver(child, row[KEY], row[VALUE], ts, where)
        self.fire_due(
            PunctuationType.STREAM_TIME, self.stream_time_micros // 1000, "a stream-time punctuation"
        )

    def deliver(self, index: int, key: Any, value: Any, ts_micros: int, where: str) -> None:
        node = self.nodes[index]
        record = Record(
            key,
            value,
            ts_micros // 1000,
            self.topic,
            self.partition,
            -1 if self.offset is None else self.offset,
        )
        saved = self.timestamp_micros
        self.timestamp_micros = ts_micros
        self.guard(
            node.spec.name, f"processing the record at {where}", lambda: node.processor.process(record)
        )
        self.timestamp_micros = saved

    def forward(self, node: _LiveNode, key: Any, value: Any, ts_micros: int) -> None:
        where = (
            f"partition {self.partition}, offset {self.offset}"
            if self.offset is not None
            else f"partition {self.partition} (forwarded by '{node.spec.name}' in a punctuation)"
        )
        for sink in node.spec.sinks:
            self.out.append(self.runner.output_row(sink, key, value, ts_micros, self.partition, self.offset))
        for child in node.spec.children:
            self.deliver(child, key, value, ts_micros, where)

    def fire_due(self, kind: PunctuationType, now: int, what: str) -> None:
        """Kafka's PunctuationQueue: each due schedule fires once with ``now``, earliest first,
        then moves to its first boundary after ``now``."""
        nexts = self.runner.next_punctuation
        due = []
        for node in self.nodes:
            for s in node.schedules:
                at = nexts.getValue((s.node, s.number))[0]
                if s.kind == kind and at <= now:
                    due.append((at, s.node, s.number, s))
        for at, _, _, s in sorted(due, key=lambda d: d[:3]):
            self.topic, self.offset, self.timestamp_micros = None, None, now * 1000
            name = self.nodes[s.node].spec.name
            self.guard(
                name, f"in {what} at {now} ms (partition {self.partition})", lambda s=s: s.punctuator(now)
            )
            following = at + s.interval_ms
            if now >= following:
                following = at + ((now - at) // s.interval_ms + 1) * s.interval_ms
            nexts.updateValue((s.node, s.number), (following,))

    def punctuate_wall_clock(self, now_ms: int) -> None:
        self.fire_due(PunctuationType.WALL_CLOCK_TIME, now_ms, "a wall-clock punctuation")
        self.arm_wall_clock_timer()

    def arm_wall_clock_timer(self) -> None:
        nexts = self.runner.next_punctuation
        wall = [
            nexts.getValue((s.node, s.number))[0]
            for node in self.nodes
            for s in node.schedules
            if s.kind == PunctuationType.WALL_CLOCK_TIME
        ]
        if not wall:
            return
        at = min(wall)
        timer = self.runner.wall_clock_timer
        armed = timer.get()[0] if timer.exists() else None
        if armed != at:
            if armed is not None:
                self.runner.handle.deleteTimer(armed)
            self.runner.handle.registerTimer(at)
            timer.update((at,))

    def drain(self) -> list[Row]:
        rows, self.out = self.out, []
        return rows

    def schedule(self, node: _LiveNode, interval: Any, kind: PunctuationType, punctuator) -> None:
        name = node.spec.name
        if not node.initializing:
            raise KStreamsError(
                f"processor '{name}' called schedule outside init; register schedules in init"
            )
        if not isinstance(kind, PunctuationType):
            raise KStreamsError(
                f"processor '{name}': punctuation type must be a PunctuationType, got {kind!r}"
            )
        ms = _interval_ms(interval)
        if ms <= 0:
            raise KStreamsError(
                f"processor '{name}': punctuation interval must be at least 1 ms, got {interval!r}"
            )
        if kind == PunctuationType.WALL_CLOCK_TIME and self.processing_time_ms < 0:
            raise KStreamsError(
                f"processor '{name}' scheduled a wall-clock punctuation, which needs "
                "process(..., wall_clock=True) (Topology: start(..., wall_clock=True))"
            )
        key = (node.index, len(node.schedules))
        nexts = self.runner.next_punctuation
        if not nexts.containsKey(key):
            # Kafka aligns stream-time schedules to 0 (the first record punctuates) and wall-clock
            # schedules to the time they are first registered.
            first = 0 if kind == PunctuationType.STREAM_TIME else self.processing_time_ms + ms
            nexts.updateValue(key, (first,))
        node.schedules.append(_Schedule(node.index, key[1], ms, kind, punctuator or node.processor.punctuate))
        if kind == PunctuationType.WALL_CLOCK_TIME:
            self.arm_wall_clock_timer()

    def store(self, node: _LiveNode, name: str) -> KeyValueStore:
        if name not in node.spec.stores:
            declared = ", ".join(node.spec.stores) or "none"
            raise KStreamsError(
                f"processor '{node.spec.name}' asked for store '{name}', which was not declared; "
                f"declare it in process(..., stores=[Stores.key_value('{name}')]); "
                f"declared: {declared}"
            )
        if name not in self.stores:
            self.stores[name] = KeyValueStore(name, self.runner.store_states[name])
        return self.stores[name]

    def save_stream_time(self) -> None:
        if self.stream_time_micros is not None:
            self.runner.stream_time.update((self.stream_time_micros,))

    def close(self) -> None:
        for node in self.nodes:
            self.guard(node.spec.name, "close", node.processor.close)


def _interval_ms(interval: Any) -> int:
    """Milliseconds in a punctuation interval: a timedelta or an int of ms. (Schedules are made
    on the executors, where the JVM's interval parser is out of reach, so no strings here.)"""
    from datetime import timedelta

    if isinstance(interval, timedelta):
        return interval // timedelta(milliseconds=1)
    if isinstance(interval, int) and not isinstance(interval, bool):
        return interval
    raise KStreamsError(
        f"punctuation interval must be a datetime.timedelta or milliseconds as int, "
        f"got {type(interval).__name__} {interval!r}"
    )


# Columns of the normalized input the runner reads (see _normalized_input).
KEY, VALUE, TOPIC, SOURCE = "__kstreams_key", "__kstreams_value", "__kstreams_topic", "__kstreams_source"
SINK = "__kstreams_sink"


class _Runner(StatefulProcessor):
    """The Spark ``StatefulProcessor`` that runs a DAG of user processors in each task (group =
    input partition). State: stream time, next punctuation per (node, schedule), the wall-clock
    timer, and one map per declared store (keys and values pickled)."""

    def __init__(
        self,
        nodes: list[_NodeSpec],
        source_children: dict[str, list[int]],
        timestamp_name: str,
        has_offset: bool,
        output_names: tuple[str, ...],
        partition_name: str = "partition",
    ) -> None:
        self.nodes = nodes
        self.partition_name = partition_name
        self.source_children = source_children
        self.store_names = sorted({s for n in nodes for s in n.stores})
        self.timestamp_name = timestamp_name
        self.has_offset = has_offset
        self.output_names = output_names

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        long_schema = StructType([StructField("v", LongType())])
        self.stream_time = handle.getValueState("streamTime", long_schema)
        self.wall_clock_timer = handle.getValueState("wallClockTimer", long_schema)
        self.next_punctuation = handle.getMapState(
            "punctuations",
            StructType([StructField("node", IntegerType()), StructField("n", IntegerType())]),
            long_schema,
        )
        binary = StructType([StructField("b", BinaryType())])
        self.store_states = {n: handle.getMapState("store_" + n, binary, binary) for n in self.store_names}
        self.tasks: dict[int, _Task] = {}
        self.output_row = Row(*self.output_names)

    def _task(self, group: Any, processing_time_ms: int) -> _Task:
        partition = group[0] if isinstance(group, tuple) else group
        if partition not in self.tasks:
            self.tasks[partition] = _Task(self, partition, processing_time_ms)
        return self.tasks[partition]

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        task = self._task(key, timerValues.getCurrentProcessingTimeInMs())
        out: list[Row] = []
        for row in _arrival_order(rows):
            task.process(row)
            out.extend(task.drain())
        task.save_stream_time()
        return iter(out)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        self.wall_clock_timer.clear()
        task = self._task(key, timerValues.getCurrentProcessingTimeInMs())
        task.punctuate_wall_clock(timerValues.getCurrentProcessingTimeInMs())
        return iter(task.drain())

    def close(self) -> None:
        for task in getattr(self, "tasks", {}).values():
            task.close()
        self.tasks = {}


def _arrival_order(rows: Iterable[Row]) -> Iterator[Row]:
    """A task's rows in arrival order: each source in offset order (the JVM sorted them already;
    sorting again keeps the guarantee local); several sources merged by the timestamp of their
    next record, as a Kafka Streams task picks the partition whose head record is oldest."""
    import heapq

    by_source: dict[str, list[Row]] = {}
    for row in rows:
        by_source.setdefault(row[SOURCE], []).append(row)
    low = -(2**63)
    queues = [
        sorted(rs, key=lambda r: r[ORDER] if r[ORDER] is not None else low)
        for _, rs in sorted(by_source.items())
    ]
    if len(queues) == 1:
        return iter(queues[0])
    return heapq.merge(*queues, key=lambda r: r[TIMESTAMP_MICROS] if r[TIMESTAMP_MICROS] is not None else low)


def _supplier_of(supplier: Any) -> Callable[[], Processor]:
    """A processor class or a zero-argument callable returning a new processor."""
    if isinstance(supplier, Processor):
        raise KStreamsError(
            "process takes a supplier (the processor class, or a function returning a new "
            f"processor), not an instance: got {type(supplier).__name__} instance; pass "
            f"{type(supplier).__name__} or lambda: {type(supplier).__name__}(...)"
        )
    if not callable(supplier):
        raise KStreamsError(
            f"process takes a processor class or a function returning a "
            f"processor, got {type(supplier).__name__} {supplier!r}"
        )
    return supplier


def _check_stores(stores: Iterable[StoreSpec]) -> list[str]:
    stores = list(stores)
    for s in stores:
        if not isinstance(s, StoreSpec):
            raise KStreamsError(f"stores must be Stores.key_value(...) specs, got {s!r}")
    names = [s.name for s in stores]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise KStreamsError(f"store names must be unique; declared more than once: {', '.join(twice)}")
    return names


def _normalized_input(stream, source: str):
    """The stream's rows as the runner reads them, grouped by input partition in arrival order
    (prepared by the JVM, ``kstreams.PythonAPI.processorInput``), with the source's name."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from kstreams_spark._jvm import jvm_errors

    names = stream._names
    with jvm_errors():
        jprepared = stream._api.processorInput(stream._jks)
    prepared = DataFrame(jprepared, stream.df.sparkSession)
    fields = {f.name: f for f in prepared.schema.fields}
    topic = (
        F.col("topic")
        if "topic" in fields and fields["topic"].dataType.simpleString() == "string"
        else F.lit(None).cast("string")
    )
    offset = names["offset"]
    return prepared.select(
        F.col(f"`{names['key']}`").alias(KEY),
        F.col(f"`{names['value']}`").alias(VALUE),
        topic.alias(TOPIC),
        F.lit(source).alias(SOURCE),
        GROUP,
        PARTITION,
        ORDER,
        TIMESTAMP_MICROS,
    ), offset is not None and offset in fields


def _run(
    inputs, nodes, source_children, timestamp_name, has_offset, key_type, value_type, output_names, wall_clock
):
    """Plans the runner over the union of ``inputs`` (normalized DataFrames)."""
    df = inputs[0]
    for other in inputs[1:]:
        try:
            df = df.unionByName(other)
        except Exception as e:
            raise KStreamsError(f"sources must have the same key and value types: {e}") from None
    output = StructType(
        [
            StructField(SINK, _string(), True),
            StructField(output_names[0], key_type, True),
            StructField(output_names[1], value_type, True),
            StructField(FORWARD_TS, LongType(), False),
            StructField(output_names[2], IntegerType(), False),
            StructField(output_names[3], LongType(), True),
        ]
    )
    runner = _Runner(
        nodes,
        source_children,
        timestamp_name,
        has_offset,
        (SINK, output_names[0], output_names[1], FORWARD_TS, output_names[2], output_names[3]),
        output_names[2],
    )
    return df.groupBy(GROUP).transformWithState(
        runner, output, "Append", "ProcessingTime" if wall_clock else "None"
    )


def _string():
    from pyspark.sql.types import StringType

    return StringType()


def process(
    stream,
    supplier: Any,
    stores: Iterable[StoreSpec] = (),
    name: str | None = None,
    wall_clock: bool = False,
    key_type=None,
    value_type=None,
):
    """Implementation of :meth:`kstreams_spark.KStream.process` (which documents it)."""
    from pyspark.sql import functions as F

    supplier = _supplier_of(supplier)
    store_names = _check_stores(stores)
    df = stream.df
    if wall_clock and not df.isStreaming:
        raise KStreamsError(
            "wall-clock punctuation runs on Spark's processing-time timers, which "
            "need a streaming DataFrame; drop wall_clock=True for a batch DataFrame"
        )
    names = stream._names
    normalized, has_offset = _normalized_input(stream, "input")
    fields = {f.name: f for f in normalized.schema.fields}
    if name is None:
        name = getattr(supplier, "__name__", None) or type(supplier).__name__
    partition_name = names["partition"] or "partition"
    offset_name = names["offset"] or "offset"
    node = _NodeSpec(name, supplier, store_names, children=[], sinks=[None])
    processed = _run(
        [normalized],
        [node],
        {"input": [0]},
        names["timestamp"],
        has_offset,
        key_type or fields[KEY].dataType,
        value_type or fields[VALUE].dataType,
        (names["key"], names["value"], partition_name, offset_name),
        wall_clock,
    )
    return processed.select(
        F.col(f"`{names['key']}`"),
        F.col(f"`{names['value']}`"),
        F.timestamp_micros(F.col(FORWARD_TS)).alias(names["timestamp"]),
        F.col(f"`{partition_name}`"),
        F.col(f"`{offset_name}`"),
    )
