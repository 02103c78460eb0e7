package kstreams
package internal
package runner

import java.util.{List => JList}

import scala.collection.mutable
import scala.jdk.CollectionConverters._

/** The graph of a topology: node names, kinds and parents, the checks on adding a node, the
  * connected sub-topologies and the `describe()` text. The one implementation, used by the Scala
  * [[kstreams.processor.Topology]] and by Python's (`kstreams_spark.topology`, through py4j, hence the Java lists);
  * each keeps only what its nodes run (DataFrames, processor suppliers, sink targets). */
private[kstreams] final class TopologyGraph {
  import TopologyGraph._

  private val nodes = mutable.LinkedHashMap.empty[String, GraphNode]

  /** Adds a source; `label` is how `describe()` shows what it reads (`DataFrame`, `topics: [t]`). */
  def addSource(name: String, label: String): Unit = add(GraphNode(Source, name, Nil, label))

  def addProcessor(name: String, stores: JList[String], parents: JList[String]): Unit =
    add(GraphNode(Processor, name, checkedParents(name, parents.asScala.toSeq), stores.asScala.mkString(", ")))

  /** Adds a sink; `target` is how `describe()` shows where it writes. */
  def addSink(name: String, target: String, parents: JList[String]): Unit = {
    val ps = checkedParents(name, parents.asScala.toSeq)
    ps.foreach { p =>
      if (nodes(p).kind != Processor)
        throw new KStreamsException(
          s"sink '$name': parent '$p' is a ${nodes(p).kind}; a sink's parents must be processors")
    }
    add(GraphNode(Sink, name, ps, target))
  }

  /** "source", "processor" or "sink". */
  def kind(name: String): String = nodes(name).kind

  def parents(name: String): JList[String] = nodes(name).parents.asJava

  /** The nodes `name` feeds, in the order they were added. */
  def children(name: String): JList[String] = childrenOf(name).asJava

  /** Connected components, each in the order its nodes were added, in the order of their first
    * node: each one runs as one streaming query. */
  def subTopologies(): JList[JList[String]] = {
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
    groups.filter(_.nonEmpty).map(g => g.sortBy(order.indexOf).toSeq.asJava).toSeq.asJava
  }

  /** The DAG as text, in Kafka Streams' `describe()` layout. */
  def describe(): String = {
    val lines = mutable.ArrayBuffer("Topologies:")
    subTopologies().asScala.zipWithIndex.foreach { case (sub, i) =>
      lines += s"   Sub-topology: $i"
      sub.asScala.foreach { name =>
        val n = nodes(name)
        lines += (n.kind match {
          case Source => s"    Source: $name (${n.label})"
          case Processor => s"    Processor: $name (stores: [${n.label}])"
          case _ => s"    Sink: $name (target: ${n.label})"
        })
        val cs = childrenOf(name)
        if (cs.nonEmpty) lines += s"      --> ${cs.mkString(", ")}"
        if (n.parents.nonEmpty) lines += s"      <-- ${n.parents.mkString(", ")}"
      }
    }
    lines.mkString("\n")
  }

  private def childrenOf(name: String): Seq[String] = nodes.values.filter(_.parents.contains(name)).map(_.name).toSeq

  private def add(node: GraphNode): Unit = {
    if (node.name == null || node.name.isEmpty) throw new KStreamsException("a node needs a non-empty name")
    if (nodes.contains(node.name)) throw new KStreamsException(s"a node named '${node.name}' was already added")
    nodes(node.name) = node
  }

  private def checkedParents(name: String, parents: Seq[String]): Seq[String] = {
    if (parents.isEmpty) throw new KStreamsException(s"'$name' needs at least one parent")
    parents.foreach { p =>
      nodes.get(p) match {
        case None =>
          throw new KStreamsException(
            s"'$name': parent '$p' is not in the topology " +
              s"(add parents first); nodes: ${if (nodes.isEmpty) "none" else nodes.keys.mkString(", ")}")
        case Some(n) if n.kind == Sink =>
          throw new KStreamsException(s"'$name': parent '$p' is a sink, which has no output")
        case _ =>
      }
    }
    parents
  }
}

private object TopologyGraph {
  val Source = "source"
  val Processor = "processor"
  val Sink = "sink"

  /** `label`: what a source reads, a processor's stores, or a sink's target, for `describe()`. */
  final case class GraphNode(kind: String, name: String, parents: Seq[String], label: String)
}
