"""The runtime of Python processors: a port of ``kstreams.internal.runner.ProcessorRunner`` (Scala).

The two runtimes must behave the same (delivery order, stream time, punctuation, errors): change
them together, and the shared examples (``tests/test_processor.py``, ``ProcessorSpec``) keep them
honest. One :class:`Runner` (Spark's ``StatefulProcessor``) runs a DAG of user processors per input
partition (a Kafka Streams task).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from kstreams_spark.errors import KStreamsError
from kstreams_spark.processor import KeyValueStore, Processor, ProcessorContext, PunctuationType, Record

# The columns of the runner's input (normalized_input in _processor_plan selects the JVM's prepared
# columns by the names the JVM gives, as these) and of its output's forwarded timestamp. GROUP is
# also the name of the transformWithState grouping key that checkpoints record: it never changes.
GROUP = "__kstreams_group"
PARTITION = "__kstreams_partition"
ORDER = "__kstreams_order"
TIMESTAMP_MICROS = "__kstreams_ts"
FORWARD_TS = "__kstreams_forward_ts"


@dataclass
class NodeSpec:
    """A processor of the DAG run in one task: where its forwards go (child node indices, and
    sink names; ``None`` is the single output of ``KStream.process``)."""

    name: str
    supplier: Callable[[], Processor]
    stores: list[str]
    children: list[int]
    sinks: list[str | None]


@dataclass
class Schedule:
    node: int
    number: int
    interval_ms: int
    kind: PunctuationType
    punctuator: Callable[[int], None]


class LiveNode(ProcessorContext):
    """A node's processor instance inside one task, and the :class:`ProcessorContext` it is given
    (the context's answers come from the task: its current record, stream time, stores)."""

    def __init__(self, task: Task, index: int, spec: NodeSpec) -> None:
        self.task, self.index, self.spec = task, index, spec
        self.schedules: list[Schedule] = []
        self.initializing = True
        self.processor = task.guard(spec.name, "creating the processor", spec.supplier)
        if not isinstance(self.processor, Processor) and not hasattr(self.processor, "process"):
            raise KStreamsError(
                f"the supplier of processor '{spec.name}' returned {self.processor!r}, not a Processor"
            )

    def init(self) -> None:
        self.task.guard(self.spec.name, "init", lambda: self.processor.init(self))
        self.initializing = False

    # ProcessorContext

    def forward(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        self.task.forward(
            self, key, value, self.task.timestamp_micros if timestamp is None else int(timestamp) * 1000
        )

    def schedule(
        self,
        interval: Any,
        punctuation_type: PunctuationType = PunctuationType.STREAM_TIME,
        punctuator: Callable[[int], None] | None = None,
    ) -> None:
        self.task.schedule(self, interval, punctuation_type, punctuator)

    def get_state_store(self, name: str) -> KeyValueStore:
        return self.task.store(self, name)

    @property
    def processor_name(self) -> str:
        return self.spec.name

    @property
    def topic(self) -> str | None:
        return self.task.topic

    @property
    def partition(self) -> int:
        return self.task.partition

    @property
    def offset(self) -> int:
        return -1 if self.task.offset is None else self.task.offset

    @property
    def timestamp(self) -> int:
        return self.task.timestamp_micros // 1000

    @property
    def stream_time(self) -> int:
        return -1 if self.task.stream_time_micros is None else self.task.stream_time_micros // 1000

    @property
    def current_system_time_ms(self) -> int:
        t = self.task.processing_time_ms
        return t if t >= 0 else int(time.time() * 1000)


class Task:
    """One input partition (a Kafka Streams task) for one micro-batch: the processors of the DAG,
    stream time, and routing of forwarded records (synchronously, depth first, as in Kafka)."""

    def __init__(self, runner: Runner, partition: int, processing_time_ms: int) -> None:
        self.runner = runner
        self.partition = partition
        self.processing_time_ms = processing_time_ms
        self.out: list[Row] = []
        self.closing = False  # in close(): Spark has taken the micro-batch's output already
        self.stores: dict[str, KeyValueStore] = {}
        saved = runner.stream_time.get() if runner.stream_time.exists() else None
        self.stream_time_micros: int | None = None if saved is None else saved[0]
        self.topic: str | None = None
        self.offset: int | None = None
        self.timestamp_micros = 0
        self.nodes = [LiveNode(self, i, spec) for i, spec in enumerate(runner.nodes)]
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

    def forward(self, node: LiveNode, key: Any, value: Any, ts_micros: int) -> None:
        if self.closing:
            raise KStreamsError(CLOSE_FORWARD.format(name=node.spec.name, partition=self.partition))
        where = (
            f"partition {self.partition}, offset {self.offset}"
            if self.offset is not None
            else f"partition {self.partition} (forwarded by '{node.spec.name}' in a punctuation)"
        )
        # checked where the record leaves for the output only: between processors any value may
        # pass, as between Kafka Streams processors (types matter at the sink)
        for what, given, verify, t in zip(
            ("key", "value"), (key, value), self.runner.verifiers, self.runner.output_types, strict=True
        ):
            if verify is not None and node.spec.sinks:
                try:
                    verify(given)
                except (TypeError, ValueError):
                    raise KStreamsError(
                        f"processor '{node.spec.name}' forwarded a {what} of type {type(given).__name__} "
                        f"({given!r:.80}) at {where}, where the output's {what} is "
                        f"{t.simpleString()}: convert it in the processor, or declare {what}_type= "
                        "(process() or Topology)"
                    ) from None
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

    def schedule(self, node: LiveNode, interval: Any, kind: PunctuationType, punctuator) -> None:
        name = node.spec.name
        if not node.initializing:
            raise KStreamsError(
                f"processor '{name}' called schedule outside init; register schedules in init"
            )
        if not isinstance(kind, PunctuationType):
            raise KStreamsError(
                f"processor '{name}': punctuation type must be a PunctuationType, got {kind!r}"
            )
        ms = interval_ms(interval)
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
        node.schedules.append(Schedule(node.index, key[1], ms, kind, punctuator or node.processor.punctuate))
        if kind == PunctuationType.WALL_CLOCK_TIME:
            self.arm_wall_clock_timer()

    def store(self, node: LiveNode, name: str) -> KeyValueStore:
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
        self.closing = True
        for node in self.nodes:
            self.guard(node.spec.name, "close", node.processor.close)


# The same words in ProcessorRunner.scala.
CLOSE_FORWARD = (
    "processor '{name}' forwarded a record in close() (partition {partition}); close() runs after the "
    "micro-batch's output is complete, so the record would be lost: forward in process() or a punctuation"
)


def interval_ms(interval: Any) -> int:
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


# Columns of the normalized input the runner reads (see normalized_input).
KEY, VALUE, TOPIC, SOURCE = "__kstreams_key", "__kstreams_value", "__kstreams_topic", "__kstreams_source"
SINK = "__kstreams_sink"


class Runner(StatefulProcessor):
    """The Spark ``StatefulProcessor`` that runs a DAG of user processors in each task (group =
    input partition). State: stream time, next punctuation per (node, schedule), the wall-clock
    timer, and one map per declared store (keys and values pickled)."""

    def __init__(
        self,
        nodes: list[NodeSpec],
        source_children: list[list[int]],
        timestamp_name: str,
        has_offset: bool,
        output_names: tuple[str, ...],
        partition_name: str = "partition",
        output_types: tuple = (None, None),
    ) -> None:
        self.nodes = nodes
        self.partition_name = partition_name
        # the output's key and value types: a forwarded key or value is checked against them
        # where it is forwarded, since Arrow would refuse it later, in a worker traceback that
        # names neither the processor nor the type
        self.output_types = output_types
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
        self.tasks: dict[int, Task] = {}
        self.output_row = Row(*self.output_names)
        self.verifiers = [None if t is None else _verifier(t) for t in self.output_types]

    def _task(self, group: Any, processing_time_ms: int) -> Task:
        partition = group[0] if isinstance(group, tuple) else group
        if partition not in self.tasks:
            self.tasks[partition] = Task(self, partition, processing_time_ms)
        return self.tasks[partition]

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        task = self._task(key, timerValues.getCurrentProcessingTimeInMs())
        out: list[Row] = []
        for row in arrival_order(rows):
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


def arrival_order(rows: Iterable[Row]) -> Iterator[Row]:
    """A task's rows in arrival order: each source in offset order (the JVM sorted them already;
    sorting again keeps the guarantee local); several sources merged by the timestamp of their
    next record, as a Kafka Streams task picks the partition whose head record is oldest, equal
    timestamps in source index order (the sources' name order, as in the JVM's runner)."""
    import heapq

    by_source: dict[int, list[Row]] = {}
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


def _verifier(data_type):
    """A check that a Python value fits ``data_type`` as the worker's Arrow conversion will read
    it, raising TypeError when it does not (None: no check for this type): a quick type test for the atomic types (pyspark's own
    verifier accepts anything for a string), pyspark's verifier for the rest, and what either
    refuses is tried with Arrow itself before it is refused, so nothing Arrow takes is."""
    import numbers

    import pyarrow as pa
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    accepted = {
        T.StringType: (str,),
        T.BinaryType: (bytes, bytearray, str),
        T.BooleanType: (bool,),
        T.LongType: (numbers.Integral,),
        T.IntegerType: (numbers.Integral,),
        T.ShortType: (numbers.Integral,),
        T.ByteType: (numbers.Integral,),
        T.DoubleType: (numbers.Real,),
        T.FloatType: (numbers.Real,),
    }.get(type(data_type))
    try:
        arrow_type = to_arrow_type(data_type)
    except Exception:
        return None  # a type this pyspark cannot give Arrow: the worker's own error stands
    integral = accepted is not None and numbers.Integral in accepted
    slow = None if accepted is not None else T._make_type_verifier(data_type, nullable=True)

    def quick(value) -> bool:
        if slow is not None:
            try:
                slow(value)
                return True
            except (TypeError, ValueError):
                return False
        return isinstance(value, accepted) and not (integral and isinstance(value, bool))

    def verify(value) -> None:
        if value is None or quick(value):
            return
        try:
            pa.array([value], type=arrow_type)
        except (pa.ArrowException, TypeError, ValueError):
            raise TypeError(f"{type(value).__name__} is not {data_type.simpleString()}") from None

    return verify
