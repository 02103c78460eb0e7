"""``Topology``: the KIP-28 builder of a processor DAG (sources, processors, sinks), run as Spark
streaming queries.

Processors connected to each other run together in one ``transformWithState`` per connected
sub-topology: per input partition (a Kafka Streams task), a record forwarded by a processor is
handed to its children at once, depth first, as in Kafka Streams; records of several sources of
one sub-topology meet in the task of their partition number (co-partitioning) and are taken in the
order of their timestamps. Each sub-topology is one streaming query whose micro-batches are
split among its sinks.

>>> class Upper(Processor):
...     def init(self, context): self.context = context
...     def process(self, record): self.context.forward(record.key, record.value.upper())
>>> df.write.mode("overwrite").parquet(tmp + "/in")
>>> topology = (Topology()
...     .add_source("SOURCE", spark.readStream.schema(df.schema).parquet(tmp + "/in"))
...     .add_processor("UPPER", Upper, "SOURCE", stores=[Stores.key_value("seen")])
...     .add_sink("SINK", print, "UPPER"))
>>> text = topology.describe()
Topologies:
   Sub-topology: 0
    Source: SOURCE (DataFrame)
      --> UPPER
    Processor: UPPER (stores: [seen])
      --> SINK
      <-- SOURCE
    Sink: SINK (target: print)
      <-- UPPER

``topology.start(checkpoint)`` then runs each sub-topology as a streaming query.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import DataType

from kstreams_spark._connect import is_connect
from kstreams_spark._jvm import door
from kstreams_spark._processor_plan import (
    check_stores,
    check_types,
    normalized_input,
    run,
    supplier_of,
)
from kstreams_spark._processor_runtime import FORWARD_TS, SINK, NodeSpec
from kstreams_spark.errors import KStreamsError
from kstreams_spark.processor import StoreSpec

SinkTarget = str | Callable[[DataFrame, int], None]


@dataclass
class _Node:
    """What a node runs (its place in the graph is in the JVM's ``TopologyGraph``)."""

    kind: str  # "source", "processor" or "sink"
    source: Any = None  # source: a DataFrame or a topic name
    supplier: Any = None
    stores: list[str] = field(default_factory=list)
    target: Any = None


def _name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise KStreamsError(f"a node needs a non-empty name, got {name!r}")
    return name


class Topology:
    """A DAG of sources, processors and sinks (Kafka Streams' ``Topology``, KIP-28).

    A source is a streaming DataFrame with the usual record columns (``key``, ``value``,
    ``timestamp``, ``partition``, ``offset``; names as in :class:`~kstreams_spark.KStream`), or a
    Kafka topic name when ``kafka_options`` (e.g. ``{"kafka.bootstrap.servers": ...}``) are given
    and Spark's Kafka connector is on the classpath. A sink target is a directory (Parquet, one
    ``batch_id=<n>`` folder per micro-batch, rewritten if a batch is replayed) or a function
    ``(batch_df, batch_id)`` given each micro-batch's records for it.
    Sink rows have the columns ``key``, ``value``, ``timestamp``, ``partition``, ``offset``.
    The graph (its checks, sub-topologies and ``describe()``) is the Scala ``Topology``'s, so it
    needs an active Spark session.

    >>> class Upper(Processor):
    ...     def init(self, context): self.context = context
    ...     def process(self, record): self.context.forward(record.key, record.value.upper())
    >>> topology = Topology().add_source("S", df).add_processor("P", Upper, "S").add_sink("K", print, "P")
    >>> text = topology.describe()
    Topologies:
       Sub-topology: 0
        Source: S (DataFrame)
          --> P
        Processor: P (stores: [])
          --> K
          <-- S
        Sink: K (target: print)
          <-- P

    Args:
        kafka_options: options of Spark's Kafka source for the sources given as topic names, e.g.
            ``{"kafka.bootstrap.servers": ...}``; None: no topic sources.
        key_type: the Spark type of the key the processors forward; None: the sources' key type.
        value_type: the Spark type of the value the processors forward; None: the sources' value type.
        **columns: the sources' column names, as :class:`~kstreams_spark.KStream` takes them (e.g.
            ``key="user"``).

    Raises:
        KStreamsError: if no Spark session is active, the session is a Spark Connect one, or ``key_type`` or
            ``value_type`` is not a pyspark DataType.
    """

    def __init__(
        self,
        kafka_options: dict[str, str] | None = None,
        key_type: DataType | None = None,
        value_type: DataType | None = None,
        **columns: str | None,
    ) -> None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise KStreamsError(
                "Topology needs an active Spark session; create it first "
                "(kstreams_spark.configure_spark(SparkSession.builder).getOrCreate())"
            )
        if is_connect(spark):
            raise KStreamsError(
                "Topology does not run over Spark Connect: it builds and checks its graph in the "
                "driver's JVM, which a Connect client does not have; over Connect, run a Python "
                "processor with KStream.process"
            )
        self._graph = door(spark).topologyGraph()
        self._nodes: dict[str, _Node] = {}
        self._kafka_options = dict(kafka_options or {})
        check_types(key_type, value_type)
        self._key_type, self._value_type = key_type, value_type
        self._columns = columns

    def add_source(self, name: str, df_or_topic: DataFrame | str) -> Topology:
        """Adds a source node reading a streaming DataFrame or a Kafka topic.

        Args:
            name: the node's name, unique in the topology (a non-empty string).
            df_or_topic: a streaming DataFrame, or the name of a Kafka topic (which needs ``kafka_options``).

        Returns:
            This topology, for chaining.

        Raises:
            KStreamsError: if ``name`` is not a non-empty string or was already added, ``df_or_topic`` is
                neither a DataFrame nor a str, or it names a topic and the topology has no ``kafka_options``.
        """
        if isinstance(df_or_topic, str):
            if not self._kafka_options:
                raise KStreamsError(
                    f"source '{name}' names topic '{df_or_topic}', which needs "
                    "Topology(kafka_options={'kafka.bootstrap.servers': ...}); or pass a DataFrame"
                )
            label = f"topics: [{df_or_topic}]"
        elif isinstance(df_or_topic, DataFrame):
            label = "DataFrame"
        else:
            raise KStreamsError(
                f"source '{name}' must be a DataFrame or a topic name, got {type(df_or_topic).__name__}"
            )
        self._graph.addSource(_name(name), label)
        self._nodes[name] = _Node("source", source=df_or_topic)
        return self

    def add_processor(
        self, name: str, supplier: Any, *parents: str, stores: Sequence[StoreSpec] = ()
    ) -> Topology:
        """Adds a processor fed by the records its parents forward (or read, for sources).

        Args:
            name: the node's name, unique in the topology (a non-empty string).
            supplier: the processor class, or a function returning a new processor.
            *parents: the names of the nodes (sources or processors) it takes records from, added before;
                at least one.
            stores: the key-value stores the processor uses, each declared with :meth:`Stores.key_value` under
                a name of its own.

        Returns:
            This topology, for chaining.

        Raises:
            KStreamsError: if ``name`` is not a non-empty string or was already added, ``supplier`` is neither
                a processor class nor a function returning a processor, ``stores`` is not a list of distinct
                store declarations, or no parent is given, or a parent is not in the topology or is a sink.
        """
        node = _Node("processor", supplier=supplier_of(supplier), stores=check_stores(stores))
        self._graph.addProcessor(_name(name), node.stores, list(parents))
        self._nodes[name] = node
        return self

    def add_sink(self, name: str, target: SinkTarget, *parents: str) -> Topology:
        """Adds a sink writing what its parent processors forward to ``target``.

        Args:
            name: the node's name, unique in the topology (a non-empty string).
            target: a directory (Parquet, one ``batch_id=<n>`` folder per micro-batch) or a function
                ``(batch_df, batch_id)`` given each micro-batch's records.
            *parents: the names of the processors whose forwarded records it writes, added before; at
                least one.

        Returns:
            This topology, for chaining.

        Raises:
            KStreamsError: if ``name`` is not a non-empty string or was already added, ``target`` is neither
                a directory (a str) nor a function, or no parent is given, or a parent is not in the topology
                or is not a processor.
        """
        if not (isinstance(target, str) or callable(target)):
            raise KStreamsError(
                f"sink '{name}' target must be a directory or a function "
                f"(batch_df, batch_id), got {type(target).__name__}"
            )
        label = target if isinstance(target, str) else getattr(target, "__name__", "function")
        self._graph.addSink(_name(name), label, list(parents))
        self._nodes[name] = _Node("sink", target=target)
        return self

    def _children(self, name: str, kind: str) -> list[str]:
        return [c for c in self._graph.children(name) if self._nodes[c].kind == kind]

    def describe(self) -> str:
        """The DAG as text, in Kafka Streams' ``describe()`` layout; also printed."""
        text = self._graph.describe()
        print(text)
        return text

    def start(
        self, checkpoint_location: str, trigger: dict[str, Any] | None = None, wall_clock: bool = False
    ) -> list[StreamingQuery]:
        """Starts one streaming query per sub-topology (checkpoints under
        ``checkpoint_location/sub-topology-<i>``) and returns them, running.

        ``trigger`` is passed to ``writeStream.trigger`` (e.g. ``{"availableNow": True}``);
        ``wall_clock=True`` enables wall-clock punctuation.

        Args:
            checkpoint_location: the directory under which each sub-topology's query checkpoints
                (``sub-topology-<i>``).
            trigger: keyword arguments of ``writeStream.trigger``, e.g. ``{"availableNow": True}``; None:
                Spark's default trigger.
            wall_clock: True enables wall-clock punctuation.

        Returns:
            The streaming queries, one per sub-topology, running.

        Raises:
            KStreamsError: if the topology is empty, or a source feeds no processor.
        """
        queries = []
        subs = self._graph.subTopologies()
        if not subs:
            raise KStreamsError("the topology is empty; add a source, processors and sinks")
        for i, names in enumerate(subs):
            plan = self._plan(names, wall_clock)
            checkpoint = os.path.join(checkpoint_location, f"sub-topology-{i}")
            sinks = {n: self._nodes[n].target for n in names if self._nodes[n].kind == "sink"}
            writer = plan.writeStream.option("checkpointLocation", checkpoint).foreachBatch(
                _SinkWriter(sinks)
            )
            if trigger:
                writer = writer.trigger(**trigger)
            queries.append(writer.start())
        return queries

    def _plan(self, names: list[str], wall_clock: bool) -> DataFrame:
        from pyspark.sql import functions as F

        from kstreams_spark.kstream import KStream

        sources = [n for n in names if self._nodes[n].kind == "source"]
        processors = [n for n in names if self._nodes[n].kind == "processor"]
        if not processors:
            raise KStreamsError(f"source '{sources[0]}' feeds no processor")
        index = {n: i for i, n in enumerate(processors)}
        specs = [
            NodeSpec(
                n,
                self._nodes[n].supplier,
                self._nodes[n].stores,
                children=[index[c] for c in self._children(n, "processor")],
                sinks=self._children(n, "sink"),
            )
            for n in processors
        ]
        inputs, has_offset = [], True
        # a source is known by its place in name order, as in the JVM's runner: records of two
        # sources with equal timestamps go in that order
        ordered = sorted(sources)
        for i, s in enumerate(ordered):
            source = self._nodes[s].source
            df = source if isinstance(source, DataFrame) else self._read_topic(source)
            # the checkpoint check goes with one input: it describes the whole graph
            normalized, offset = normalized_input(KStream(df, **self._columns), i, specs if i == 0 else ())
            inputs.append(normalized)
            has_offset = has_offset and offset
        source_children = [[index[c] for c in self._children(s, "processor")] for s in ordered]
        fields = {f.name: f for f in inputs[0].schema.fields}
        processed = run(
            inputs,
            specs,
            source_children,
            self._columns.get("timestamp", "timestamp"),
            has_offset,
            self._key_type or fields["__kstreams_key"].dataType,
            self._value_type or fields["__kstreams_value"].dataType,
            ("key", "value", "partition", "offset"),
            wall_clock,
        )
        return processed.select(
            SINK,
            "key",
            "value",
            F.timestamp_micros(F.col(FORWARD_TS)).alias("timestamp"),
            "partition",
            "offset",
        )

    def _read_topic(self, topic: str) -> DataFrame:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        reader = spark.readStream.format("kafka").option("subscribe", topic)
        for k, v in self._kafka_options.items():
            reader = reader.option(k, v)
        return reader.load()


class _SinkWriter:
    """foreachBatch function: each sink's rows of the micro-batch to its target."""

    def __init__(self, sinks: dict[str, SinkTarget]) -> None:
        self.sinks = sinks

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            for name, target in self.sinks.items():
                rows = batch.where(batch[SINK] == name).drop(SINK)
                if callable(target):
                    target(rows, batch_id)
                else:
                    # one directory per micro-batch, overwritten if the batch is replayed after a
                    # failure: nothing doubled
                    rows.write.mode("overwrite").parquet(os.path.join(target, f"batch_id={batch_id}"))
        finally:
            batch.unpersist()
