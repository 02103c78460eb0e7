package kstreams.processor

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import kstreams.{KStreamsException, StreamColumns}
import kstreams.internal.runner.{NodeSpec, ProcessorPlan, TopologyGraph}
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
  *   .addSink("SINK", (batch, _) => batch.write.mode("append").parquet("/out/sums"), "SUM")
  * println(topology.describe())
  * val queries = topology.start("/checkpoints/sums")
  * }}}
  */
final class Topology {
  import Topology._

  private val graph = new TopologyGraph
  private val sources = mutable.HashMap.empty[String, (DataFrame, StreamColumns)]
  private val processors = mutable.HashMap.empty[String, (ProcessorSupplier[Any, Any], Seq[StoreSpec])]
  private val sinks = mutable.HashMap.empty[String, SinkTarget]

  /** Adds a source reading a streaming DataFrame with record columns named as in `columns`.
    *
    * @param name
    *   the node's name, unique in the topology
    * @param df
    *   a streaming DataFrame
    * @param columns
    *   which of its columns are the key, value, timestamp, partition and offset
    * @throws KStreamsException
    *   for a null DataFrame, an empty name or one already used */
  def addSource(name: String, df: DataFrame, columns: StreamColumns = StreamColumns()): Topology = {
    if (df == null) throw new KStreamsException(s"source '$name' needs a DataFrame, got null")
    graph.addSource(name, "DataFrame")
    sources(name) = (df, columns)
    this
  }

  /** Adds a processor fed by what its parents forward (or read, for sources).
    *
    * @param name
    *   the node's name, unique in the topology (a record's `processorName`)
    * @param supplier
    *   makes the processor of each input partition
    * @param parents
    *   the sources or processors it reads from, at least one
    * @throws KStreamsException
    *   for a null supplier, an empty or used name, no parent, or a parent that is unknown or a
    *   sink */
  def addProcessor[K, V](name: String, supplier: ProcessorSupplier[K, V], parents: String*): Topology =
    addProcessor(name, supplier, Nil, parents: _*)

  /** Adds a processor with the key-value stores it uses (see the other overload for the rest).
    *
    * @param stores
    *   the stores it may open (`Stores.keyValue`); any other name fails at `getStateStore` */
  def addProcessor[K, V](
      name: String,
      supplier: ProcessorSupplier[K, V],
      stores: Seq[StoreSpec],
      parents: String*): Topology = {
    if (supplier == null) throw new KStreamsException(s"processor '$name' needs a supplier")
    graph.addProcessor(name, stores.map(_.name).asJava, parents.asJava)
    processors(name) = (supplier.asInstanceOf[ProcessorSupplier[Any, Any]], stores)
    this
  }

  /** Adds a sink: `target(batch, batchId)` gets each micro-batch's records its parents forward.
    *
    * @param target
    *   called once per micro-batch with its records and its id (as `foreachBatch`)
    * @param parents
    *   the processors (or sources) whose forwards it writes
    * @throws KStreamsException
    *   for an empty or used name, no parent, or a parent that is unknown or a sink */
  def addSink(name: String, target: (DataFrame, Long) => Unit, parents: String*): Topology = {
    graph.addSink(name, "function", parents.asJava)
    sinks(name) = target
    this
  }

  /** The DAG as text, in Kafka Streams' `describe()` layout. */
  def describe(): String = graph.describe()

  /** Starts one streaming query per sub-topology (checkpoint under
    * `checkpointLocation/sub-topology-<i>`) and returns them, running.
    *
    * @param checkpointLocation
    *   the folder under which each sub-topology's checkpoint is kept
    * @param trigger
    *   the queries' trigger (micro-batch)
    * @param wallClock
    *   whether processors may schedule `PunctuationType.WallClockTime` punctuations
    * @throws KStreamsException
    *   for an empty topology */
  def start(
      checkpointLocation: String,
      trigger: Trigger = Trigger.ProcessingTime(0L),
      wallClock: Boolean = false): Seq[StreamingQuery] = {
    val subs = graph.subTopologies().asScala.map(_.asScala.toSeq).toSeq
    if (subs.isEmpty) throw new KStreamsException("the topology is empty; add a source, processors and sinks")
    subs.zipWithIndex.map { case (sub, i) =>
      val planned = plan(sub, wallClock)
      val subSinks = sub.filter(sinks.contains)
      planned.writeStream
        .option("checkpointLocation", s"$checkpointLocation/sub-topology-$i")
        .trigger(trigger)
        .foreachBatch { (batch: DataFrame, batchId: Long) =>
          batch.persist()
          try
            subSinks.foreach(k =>
              sinks(k)(batch.where(col(ProcessorPlan.Sink) === k).drop(ProcessorPlan.Sink), batchId))
          finally batch.unpersist()
          ()
        }
        .start()
    }
  }

  private def plan(sub: Seq[String], wallClock: Boolean): DataFrame = {
    val subSources = sub.filter(sources.contains)
    val subProcessors = sub.filter(processors.contains)
    if (subProcessors.isEmpty) throw new KStreamsException(s"source '${subSources.head}' feeds no processor")
    val index = subProcessors.zipWithIndex.toMap
    def childProcessors(name: String) = graph.children(name).asScala.toSeq.filter(processors.contains).map(index)
    val specs = subProcessors.map { p =>
      NodeSpec(
        p,
        processors(p)._1,
        processors(p)._2.map(_.name),
        children = childProcessors(p),
        sinks = graph.children(p).asScala.toSeq.filter(sinks.contains))
    }
    val inputs = subSources.map { s =>
      val (df, columns) = sources(s)
      ProcessorPlan.SourceSpec(s, df, columns, childProcessors(s))
    }
    val stores = subProcessors
      .flatMap(p => processors(p)._2)
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
    if (subSources.size > 1) planned // already under the default names
    else {
      val columns = sources(subSources.head)._2
      planned.withColumnRenamed(columns.key, "key").withColumnRenamed(columns.value, "value")
    }
  }
}

private object Topology {
  type SinkTarget = (DataFrame, Long) => Unit
}
