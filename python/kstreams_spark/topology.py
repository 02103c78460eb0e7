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

from kstreams_spark._processor_plan import check_stores, normalized_input, run, supplier_of
from kstreams_spark._processor_runtime import FORWARD_TS, SINK, NodeSpec
from kstreams_spark.errors import KStreamsError
from kstreams_spark.processor import StoreSpec

SinkTarget = str | Callable[[DataFrame, int], None]


@dataclass
class _Node:
    kind: str  # "source", "processor" or "sink"
    name: str
    parents: list[str]
    source: Any = None  # source: a DataFrame or a topic name
    supplier: Any = None
    stores: list[str] = field(default_factory=list)
    target: Any = None


class Topology:
    """A DAG of sources, processors and sinks (Kafka Streams' ``Topology``, KIP-28).

    A source is a streaming DataFrame with the usual record columns (``key``, ``value``,
    ``timestamp``, ``partition``, ``offset``; names as in :class:`~kstreams_spark.KStream`), or a
    Kafka topic name when ``kafka_options`` (e.g. ``{"kafka.bootstrap.servers": ...}``) are given
    and Spark's Kafka connector is on the classpath. A sink target is a directory (Parquet, one
    ``batch_id=<n>`` folder per micro-batch, rewritten if a batch is replayed) or a function
    ``(batch_df, batch_id)`` given each micro-batch's records for it.
    Sink rows have the columns ``key``, ``value``, ``timestamp``, ``partition``, ``offset``.

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
    """

    def __init__(
        self,
        kafka_options: dict[str, str] | None = None,
        key_type=None,
        value_type=None,
        **columns: str | None,
    ) -> None:
        self._nodes: dict[str, _Node] = {}
        self._kafka_options = dict(kafka_options or {})
        self._key_type, self._value_type = key_type, value_type
        self._columns = columns

    def add_source(self, name: str, df_or_topic: DataFrame | str) -> Topology:
        """Adds a source node reading a streaming DataFrame or a Kafka topic."""
        if isinstance(df_or_topic, str):
            if not self._kafka_options:
                raise KStreamsError(
                    f"source '{name}' names topic '{df_or_topic}', which needs "
                    "Topology(kafka_options={'kafka.bootstrap.servers': ...}); or pass a DataFrame"
                )
        elif not isinstance(df_or_topic, DataFrame):
            raise KStreamsError(
                f"source '{name}' must be a DataFrame or a topic name, got {type(df_or_topic).__name__}"
            )
        return self._add(_Node("source", name, [], source=df_or_topic))

    def add_processor(
        self, name: str, supplier: Any, *parents: str, stores: Sequence[StoreSpec] = ()
    ) -> Topology:
        """Adds a processor fed by the records its parents forward (or read, for sources)."""
        return self._add(
            _Node(
                "processor",
                name,
                self._parents(name, parents),
                supplier=supplier_of(supplier),
                stores=check_stores(stores),
            )
        )

    def add_sink(self, name: str, target: SinkTarget, *parents: str) -> Topology:
        """Adds a sink writing what its parent processors forward to ``target``."""
        if not (isinstance(target, str) or callable(target)):
            raise KStreamsError(
                f"sink '{name}' target must be a directory or a function "
                f"(batch_df, batch_id), got {type(target).__name__}"
            )
        node = _Node("sink", name, self._parents(name, parents), target=target)
        for p in node.parents:
            if self._nodes[p].kind != "processor":
                raise KStreamsError(
                    f"sink '{name}': parent '{p}' is a {self._nodes[p].kind}; a "
                    "sink's parents must be processors"
                )
        return self._add(node)

    def _add(self, node: _Node) -> Topology:
        if not isinstance(node.name, str) or not node.name:
            raise KStreamsError(f"a node needs a non-empty name, got {node.name!r}")
        if node.name in self._nodes:
            raise KStreamsError(f"a node named '{node.name}' was already added")
        self._nodes[node.name] = node
        return self

    def _parents(self, name: str, parents: Sequence[str]) -> list[str]:
        if not parents:
            raise KStreamsError(f"'{name}' needs at least one parent")
        for p in parents:
            if p not in self._nodes:
                raise KStreamsError(
                    f"'{name}': parent '{p}' is not in the topology (add parents "
                    f"first); nodes: {', '.join(self._nodes) or 'none'}"
                )
            if self._nodes[p].kind == "sink":
                raise KStreamsError(f"'{name}': parent '{p}' is a sink, which has no output")
        return list(parents)

    def _children(self, name: str) -> list[_Node]:
        return [n for n in self._nodes.values() if name in n.parents]

    def _sub_topologies(self) -> list[list[_Node]]:
        """Connected components, in the order their first node was added."""
        component: dict[str, int] = {}
        groups: list[list[str]] = []
        for node in self._nodes.values():
            linked = sorted({component[p] for p in node.parents})
            if not linked:
                component[node.name] = len(groups)
                groups.append([node.name])
                continue
            keep = linked[0]
            for other in linked[1:]:
                for n in groups[other]:
                    component[n] = keep
                groups[keep].extend(groups[other])
                groups[other] = []
            component[node.name] = keep
            groups[keep].append(node.name)
        order = list(self._nodes)
        return [[self._nodes[n] for n in sorted(g, key=order.index)] for g in groups if g]

    def describe(self) -> str:
        """The DAG as text, in Kafka Streams' ``describe()`` layout; also printed."""
        lines = ["Topologies:"]
        for i, nodes in enumerate(self._sub_topologies()):
            lines.append(f"   Sub-topology: {i}")
            for n in nodes:
                if n.kind == "source":
                    what = f"topics: [{n.source}]" if isinstance(n.source, str) else "DataFrame"
                    lines.append(f"    Source: {n.name} ({what})")
                elif n.kind == "processor":
                    lines.append(f"    Processor: {n.name} (stores: [{', '.join(n.stores)}])")
                else:
                    target = (
                        n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "function")
                    )
                    lines.append(f"    Sink: {n.name} (target: {target})")
                children = [c.name for c in self._children(n.name)]
                if children:
                    lines.append(f"      --> {', '.join(children)}")
                if n.parents:
                    lines.append(f"      <-- {', '.join(n.parents)}")
        text = "\n".join(lines)
        print(text)
        return text

    def start(
        self, checkpoint_location: str, trigger: dict[str, Any] | None = None, wall_clock: bool = False
    ) -> list[StreamingQuery]:
        """Starts one streaming query per sub-topology (checkpoints under
        ``checkpoint_location/sub-topology-<i>``) and returns them, running.

        ``trigger`` is passed to ``writeStream.trigger`` (e.g. ``{"availableNow": True}``);
        ``wall_clock=True`` enables wall-clock punctuation.
        """
        queries = []
        subs = self._sub_topologies()
        if not subs:
            raise KStreamsError("the topology is empty; add a source, processors and sinks")
        for i, nodes in enumerate(subs):
            plan = self._plan(nodes, wall_clock)
            checkpoint = os.path.join(checkpoint_location, f"sub-topology-{i}")
            sinks = {n.name: n.target for n in nodes if n.kind == "sink"}
            writer = plan.writeStream.option("checkpointLocation", checkpoint).foreachBatch(
                _SinkWriter(sinks)
            )
            if trigger:
                writer = writer.trigger(**trigger)
            queries.append(writer.start())
        return queries

    def _plan(self, nodes: list[_Node], wall_clock: bool) -> DataFrame:
        from pyspark.sql import functions as F

        from kstreams_spark.kstream import KStream

        sources = [n for n in nodes if n.kind == "source"]
        processors = [n for n in nodes if n.kind == "processor"]
        if not processors:
            raise KStreamsError(f"source '{sources[0].name}' feeds no processor")
        index = {n.name: i for i, n in enumerate(processors)}
        specs = [
            NodeSpec(
                n.name,
                n.supplier,
                n.stores,
                children=[index[c.name] for c in self._children(n.name) if c.kind == "processor"],
                sinks=[c.name for c in self._children(n.name) if c.kind == "sink"],
            )
            for n in processors
        ]
        inputs, has_offset = [], True
        for s in sources:
            df = s.source if isinstance(s.source, DataFrame) else self._read_topic(s.source)
            normalized, offset = normalized_input(KStream(df, **self._columns), s.name)
            inputs.append(normalized)
            has_offset = has_offset and offset
        source_children = {
            s.name: [index[c.name] for c in self._children(s.name) if c.kind == "processor"] for s in sources
        }
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
