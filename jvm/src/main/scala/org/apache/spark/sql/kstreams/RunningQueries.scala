package org.apache.spark.sql.kstreams

import java.util.UUID

import org.apache.spark.sql.classic
import org.apache.spark.sql.execution.streaming.runtime.StreamExecution

/** The streaming queries running on this driver, by query id, whichever session started them.
  * A session's query manager only knows its own queries (and a query's thread runs in a clone of
  * its session), but Spark registers every running query in the state all sessions of a
  * SparkContext share, to keep one query id from running twice. */
object RunningQueries {
  def get(queryId: String): Option[StreamExecution] =
    (classic.SparkSession.getActiveSession.toSeq ++ classic.SparkSession.getDefaultSession.toSeq).iterator
      .flatMap(s => Option(s.sharedState.activeStreamingQueries.get(UUID.fromString(queryId))))
      .nextOption()
}
