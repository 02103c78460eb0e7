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
  * query's name, or its id when it has none; the operator's metric name without `kstreams_`, e.g.
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

  /** The source name of `operator`'s counters in `query` (named `queryName`, or by `queryId`). */
  def sourceName(queryName: String, queryId: UUID, operator: String): String =
    s"kstreams.${Option(queryName).filter(_.nonEmpty).getOrElse(queryId.toString)}.${operator.stripPrefix("kstreams_")}"

  private final class OperatorSource(override val sourceName: String) extends Source {
    override val metricRegistry = new MetricRegistry
    def counter(name: String): Counter = metricRegistry.counter(name)
  }

  private final class Listener extends StreamingQueryListener {
    // per query id, its sources by observed-metric name; events come one at a time from the bus
    private val sources = mutable.HashMap.empty[UUID, mutable.HashMap[String, OperatorSource]]

    override def onQueryStarted(event: QueryStartedEvent): Unit = ()
    override def onQueryIdle(event: QueryIdleEvent): Unit = ()

    override def onQueryProgress(event: QueryProgressEvent): Unit = {
      val progress = event.progress
      progress.observedMetrics.asScala.foreach { case (name, row) =>
        if (name.startsWith("kstreams_")) {
          val ofQuery = sources.getOrElseUpdate(progress.id, mutable.HashMap.empty)
          val source = ofQuery.getOrElseUpdate(
            name, {
              val made = new OperatorSource(sourceName(progress.name, progress.id, name))
              SparkEnv.get.metricsSystem.registerSource(made)
              made
            })
          row.schema.fields.zipWithIndex.foreach { case (field, i) =>
            if (field.dataType.isInstanceOf[NumericType] && !row.isNullAt(i))
              source.counter(field.name).inc(row.getAs[Number](i).longValue)
          }
        }
      }
    }

    override def onQueryTerminated(event: QueryTerminatedEvent): Unit =
      sources.remove(event.id).foreach(_.values.foreach(s => SparkEnv.get.metricsSystem.removeSource(s)))
  }
}
