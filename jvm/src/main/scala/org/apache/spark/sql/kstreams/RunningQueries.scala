package org.apache.spark.sql.kstreams

import java.util.UUID

import scala.jdk.CollectionConverters._

import org.apache.spark.SparkContext
import org.apache.spark.sql.classic
import org.apache.spark.sql.execution.streaming.RealTimeTrigger
import org.apache.spark.sql.execution.streaming.runtime.StreamExecution

/** The streaming queries running on this driver, by query id, whichever session started them.
  * A session's query manager only knows its own queries (and a query's thread runs in a clone of
  * its session), but Spark registers every running query in the state all sessions of a
  * SparkContext share, to keep one query id from running twice. (In Spark's package although it
  * uses no Spark-private API: the planner code here uses it, and uses nothing of
  * `kstreams.internal`, so the dependency runs one way.) */
object RunningQueries {
  def get(queryId: String): Option[StreamExecution] =
    (classic.SparkSession.getActiveSession.toSeq ++ classic.SparkSession.getDefaultSession.toSeq).iterator
      .flatMap(s => Option(s.sharedState.activeStreamingQueries.get(UUID.fromString(queryId))))
      .nextOption()

  /** The streaming query being planned (or run) on this thread, if any: Spark sets the query id as
    * a local property of a stream's threads. */
  def current(): Option[StreamExecution] =
    Option(SparkContext.getOrCreate().getLocalProperty(StreamExecution.QUERY_ID_KEY)).flatMap(get)

  /** The queries running on this driver whose checkpoint is `qualifiedRoot` (a qualified path,
    * `file:/chk/dedup`), whichever session started them. */
  def onCheckpoint(qualifiedRoot: String): Seq[StreamExecution] =
    (classic.SparkSession.getActiveSession.toSeq ++ classic.SparkSession.getDefaultSession.toSeq)
      .flatMap(_.sharedState.activeStreamingQueries.values().asScala)
      .distinct
      .filter(q => q.resolvedCheckpointRoot.stripSuffix("/") == qualifiedRoot.stripSuffix("/"))

  /** Whether `query` runs in real-time mode (`trigger(realTime=...)`, Spark 4.3). */
  def isRealTime(query: StreamExecution): Boolean = query.trigger.isInstanceOf[RealTimeTrigger]
}
