package kstreams.processor

import scala.collection.mutable

import kstreams.{KStreamsException, StreamColumns}
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.streaming.{StreamingQuery, Trigger}

/** The KIP-28 builder of a processor DAG: sources, processors, sinks, run as Spark streaming
  * queries (one per connected sub-topology).
  *
  * Connected processors run together in one `transformWithState`: per input partition (a Kafka
  * Streams task), a forwarded record is handed to the children at once, depth first, as in Kafka
  * Streams. A sink is a function given each micro-batch's records for it (`key`, `value`,
  * `timestamp`, `partition`, `offset`). Several sources of one sub-topology are co-partitioned: a
  * task takes their records merged by timestamp (`ProcessorPlan.plan`), as Python's `Topology`.
  *
  * {{{
  * val topology = new Topology()
  *   .addSource("SOURCE", df)
  *   .addProcessor("SUM", () => new Sum, Seq(Stores.keyValue("sums")), "SOURCE")
  *   .addSink("SINK", (batch, id) => batch.write.parquet(s"/out/$id"), "SUM")
  * println(topology.describe())
  * val queries = topology.start("/checkpoints/sums")
  * }}}
  */
final class Topology {
  import Topology._

  private val nodes = mutable.LinkedHashMap.empty[String, Node]

  /** Adds a source reading a streaming DataFrame with record columns named as in `columns`. */
  def addSource(name: String, df: DataFrame, columns: StreamColumns = StreamColumns()): Topology =
    add(
      Source(
        name,
        Option(df).getOrElse(throw new KStreamsException(s"source '$name' needs a DataFrame, got null")),
        columns))

  /** Adds a processor fed by what its parents forward (or read, for sources). */
  def addProcessor[K, V](name: String, supplier: ProcessorSupplier[K, V], parents: String*): Topology =
    addProcessor(name, supplier, Nil, parents: _*)

  /** Adds a processor with the key-value stores it uses. */
  def addProcessor[K, V](
      name: String,
      supplier: ProcessorSupplier[K, V],
      stores: Seq[StoreSpec],
      parents: String*): Topology = {
    if (supplier == null) throw new KStreamsException(s"processor '$name' needs a supplier")
    add(ProcessorNode(name, supplier.asInstanceOf[ProcessorSupplier[Any, Any]], stores, checkedParents(name, parents)))
  }

  /** Adds a sink: `target(batch, batchId)` gets each micro-batch's records its parents forward. */
  def addSink(name: String, target: (DataFrame, Long) => Unit, parents: String*): Topology = {
    val ps = checkedParents(name, parents)
    ps.foreach(p =>
      nodes(p) match {
        case _: ProcessorNode =>
        case _ =>
          throw new KStreamsException(
            s"sink '$name': parent '$p' is not a processor; a sink's parents must be processors")
      })
    add(SinkNode(name, target, ps))
  }

  private def add(node: Node): Topology = {
    if (node.name == null || node.name.isEmpty)
      throw new KStreamsException("a node needs a non-empty name")
    if (nodes.contains(node.name))
      throw new KStreamsException(s"a node named '${node.name}' was already added")
    nodes(node.name) = node
    this
  }

  private def checkedParents(name: String, parents: Seq[String]): Seq[String] = {
    if (parents.isEmpty) throw new KStreamsException(s"'$name' needs at least one parent")
    parents.foreach { p =>
      nodes.get(p) match {
        case None =>
          throw new KStreamsException(
            s"'$name': parent '$p' is not in the topology " +
              s"(add parents first); nodes: ${if (nodes.isEmpty) "none" else nodes.keys.mkString(", ")}")
        case Some(_: SinkNode) =>
          throw new KStreamsException(s"'$name': parent '$p' is a sink, which has no output")
        case _ =>
      }
    }
    parents
  }

  private def children(name: String): Seq[Node] = nodes.values.filter(_.parents.contains(name)).toSeq

  /** Connected components, in the order their first node was added. */
  private def subTopologies: Seq[Seq[Node]] = {
    val component = mutable.HashMap.empty[String, Int]
    val groups = mutable.ArrayBuffer.empty[mutable.ArrayBuffer[String]]
    nodes.values.foreach { node =>
      val linked = node.parents.map(component).distinct.sorted
      if (linked.isEmpty) {
        component(node.name) = groups.size
        groups += mutable.ArrayBuffer(node.name)
      } else {
        val keep = linked.head
        linked.tail.foreach { other =>
          groups(other).foreach(n => component(n) = keep)
          groups(keep) ++= groups(other)
          groups(other).clear()
        }
        component(node.name) = keep
        groups(keep) += node.name
      }
    }
    val order = nodes.keys.toIndexedSeq
    groups.filter(_.nonEmpty).map(g => g.sortBy(order.indexOf).map(nodes).toSeq).toSeq
  }

  /** The DAG as text, in Kafka Streams' `describe()` layout. */
  def describe(): String = {
    val lines = mutable.ArrayBuffer("Topologies:")
    subTopologies.zipWithIndex.foreach { case (sub, i) =>
      lines += s"   Sub-topology: $i"
      sub.foreach { n =>
        lines += (n match {
          case s: Source => s"    Source: ${s.name} (DataFrame)"
          case p: ProcessorNode => s"    Processor: ${p.name} (stores: [${p.stores.map(_.name).mkString(", ")}])"
          case k: SinkNode => s"    Sink: ${k.name} (target: function)"
        })
        val cs = children(n.name).map(_.name)
        if (cs.nonEmpty) lines += s"      --> ${cs.mkString(", ")}"
        if (n.parents.nonEmpty) lines += s"      <-- ${n.parents.mkString(", ")}"
      }
    }
    lines.mkString("\n")
  }

  /** Starts one streaming query per sub-topology (checkpoint under
    * `checkpointLocation/sub-topology-<i>`) and returns them, running. */
  def start(
      checkpointLocation: String,
      trigger: Trigger = Trigger.ProcessingTime(0L),
      wallClock: Boolean = false): Seq[StreamingQuery] = {
    val subs = subTopologies
    if (subs.isEmpty) throw new KStreamsException("the topology is empty; add a source, processors and sinks")
    subs.zipWithIndex.map { case (sub, i) =>
      val planned = plan(sub, wallClock)
      val sinks = sub.collect { case k: SinkNode => k }
      planned.writeStream
        .option("checkpointLocation", s"$checkpointLocation/sub-topology-$i")
        .trigger(trigger)
        .foreachBatch { (batch: DataFrame, batchId: Long) =>
          batch.persist()
          try
            sinks.foreach(k =>
              k.target(batch.where(col(ProcessorPlan.Sink) === k.name).drop(ProcessorPlan.Sink), batchId))
          finally batch.unpersist()
          ()
        }
        .start()
    }
  }

  private def plan(sub: Seq[Node], wallClock: Boolean): DataFrame = {
    val sources = sub.collect { case s: Source => s }
    val processors = sub.collect { case p: ProcessorNode => p }
    if (processors.isEmpty) throw new KStreamsException(s"source '${sources.head.name}' feeds no processor")
    val index = processors.map(_.name).zipWithIndex.toMap
    val specs = processors.map { p =>
      val cs = children(p.name)
      NodeSpec(
        p.name,
        p.supplier,
        p.stores.map(_.name),
        children = cs.collect { case c: ProcessorNode => index(c.name) },
        sinks = cs.collect { case k: SinkNode => k.name })
    }
    val inputs = sources.map(s =>
      ProcessorPlan.SourceSpec(
        s.name,
        s.df,
        s.columns,
        children(s.name).collect { case c: ProcessorNode => index(c.name) }))
    val stores = processors
      .flatMap(_.stores)
      .groupBy(_.name)
      .values
      .map { same =>
        if (same.map(s => (s.keyEncoder.schema, s.valueEncoder.schema)).distinct.size > 1)
          throw new KStreamsException(
            s"store '${same.head.name}' is declared with different encoders by different processors")
        same.head
      }
      .toSeq
    val planned = ProcessorPlan.plan(inputs, specs, stores, wallClock)
    if (sources.size > 1) planned // already under the default names
    else
      planned
        .withColumnRenamed(sources.head.columns.key, "key")
        .withColumnRenamed(sources.head.columns.value, "value")
  }
}

private object Topology {
  private sealed trait Node { def name: String; def parents: Seq[String] }
  private final case class Source(name: String, df: DataFrame, columns: StreamColumns) extends Node {
    def parents: Seq[String] = Nil
  }
  private final case class ProcessorNode(
      name: String,
      supplier: ProcessorSupplier[Any, Any],
      stores: Seq[StoreSpec],
      parents: Seq[String])
      extends Node
  private final case class SinkNode(name: String, target: (DataFrame, Long) => Unit, parents: Seq[String]) extends Node
}
