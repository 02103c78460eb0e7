package org.apache.spark.sql.kstreams

import java.util.{Collections, UUID, WeakHashMap}

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import com.codahale.metrics.{Counter, MetricRegistry}
import org.apache.spark.SparkEnv
import org.apache.spark.metrics.source.Source
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.streaming.StreamingQueryListener
import org.apache.spark.sql.streaming.StreamingQueryListener._
import org.apache.spark.sql.types.NumericType

/** Each kstreams operator's counters (`forwarded`, `duplicates_dropped`, `late_dropped`, ...; the
  * observed metrics `kstreams_<operator>` of its query's progress) published through Spark's
  * metrics system, where operators scrape a cluster: its JMX sink, `PrometheusServlet`, and any
  * other sink configured. (In Spark's package: `MetricsSystem` and `Source` are Spark-private.)
  *
  * One metrics source per running query and operator, named `kstreams.<query>.<operator>` (the
  * query's name, or its id: [[sourceName]]; the operator's metric name without `kstreams_`, e.g.
  * `kstreams.dedup.deduplicate_by_key`), with a counter per counter of the operator: the total
  * since the query (re)started, as Kafka Streams' `-total` metrics count since the instance
  * started. Registered at the first progress that has them, removed when the query stops, as
  * Spark does with its own `spark.streaming.<query>` source.
  *
  * Why a listener: the counts are aggregated from the tasks by Spark into each micro-batch's
  * progress on the driver; nothing else sees them whole. Every session a kstreams operator is
  * built in gets it once ([[publishFrom]]). */
object OperatorMetrics {
  private val sessions =
    Collections.synchronizedSet(Collections.newSetFromMap(new WeakHashMap[SparkSession, java.lang.Boolean]()))

  /** Publishes the counters of the queries `session` starts (once per session). */
  def publishFrom(session: SparkSession): Unit =
    if (sessions.add(session)) session.streams.addListener(new Listener)

  /** The source name of `operator`'s counters in `query`: named by `queryName` (its dots made
    * underscores, as a dot separates a metric name's levels and a source name must not be a prefix
    * of another's: Spark removes a source by prefix), or by `queryId` when it has no name or when
    * another running query of another session holds the name (Spark refuses two running queries
    * of one name only within a session). */
  def sourceName(queryName: String, queryId: UUID, operator: String, taken: String => Boolean): String = {
    val op = operator.stripPrefix("kstreams_")
    val byName = Option(queryName).filter(_.nonEmpty).map(n => s"kstreams.${n.replace('.', '_')}.$op")
    byName.filter(n => !taken(n)).getOrElse(s"kstreams.$queryId.$op")
  }

  private final class OperatorSource(override val sourceName: String) extends Source {
    override val metricRegistry = new MetricRegistry
    def counter(name: String): Counter = metricRegistry.counter(name)
  }

  /** A run's sources, by observed-metric name. */
  private final case class RunSources(runId: UUID, byMetric: mutable.HashMap[String, OperatorSource])

  private final class Listener extends StreamingQueryListener {
    // per query id, its run's sources; progress and termination events come one at a time from
    // the bus's thread (onQueryStarted does not: it runs on the starting thread, and does nothing)
    private val sources = mutable.HashMap.empty[UUID, RunSources]

    override def onQueryStarted(event: QueryStartedEvent): Unit = ()
    override def onQueryIdle(event: QueryIdleEvent): Unit = ()

    override def onQueryProgress(event: QueryProgressEvent): Unit = {
      val progress = event.progress
      // a new run counts from zero, even if the last one's termination event was dropped
      if (sources.get(progress.id).exists(_.runId != progress.runId)) remove(progress.id)
      progress.observedMetrics.asScala.foreach { case (name, row) =>
        if (name.startsWith("kstreams_")) {
          val ofRun = sources.getOrElseUpdate(progress.id, RunSources(progress.runId, mutable.HashMap.empty)).byMetric
          val source = ofRun.getOrElseUpdate(
            name, {
              val metrics = SparkEnv.get.metricsSystem
              val taken = (n: String) => metrics.getSourcesByName(n).nonEmpty
              val made = new OperatorSource(sourceName(progress.name, progress.id, name, taken))
              metrics.registerSource(made)
              made
            }
          )
          row.schema.fields.zipWithIndex.foreach { case (field, i) =>
            if (field.dataType.isInstanceOf[NumericType] && !row.isNullAt(i))
              source.counter(field.name).inc(row.getAs[Number](i).longValue)
          }
        }
      }
    }

    override def onQueryTerminated(event: QueryTerminatedEvent): Unit = remove(event.id)

    private def remove(queryId: UUID): Unit =
      sources.remove(queryId).foreach(_.byMetric.values.foreach(s => SparkEnv.get.metricsSystem.removeSource(s)))
  }
}
