package kstreams
package internal
package plan

import org.apache.spark.TaskContext
import org.apache.spark.sql.kstreams.RunningQueries
import org.apache.spark.sql.streaming.StatefulProcessorHandle

/** A value a processor is told per query on the driver, before that query's tasks are
  * serialized ([[DescribedProcessor]]), and looks up for its own query in `init`: one DataFrame
  * (so one processor object) may run in several queries, each on a checkpoint of its own. The one
  * place of this plumbing, for [[SettingHistory]] and [[StateLayout]].
  *
  * {{{
  *   private val layouts = new PerQuery[Int]
  *   // driver: layouts.record(queryId, 2); in init: layouts.inInit(getHandle)
  * }}}
  */
private[kstreams] final class PerQuery[T] extends Serializable {
  @volatile private var byQuery = Map.empty[String, T]

  def record(queryId: String, value: T): Unit = synchronized { byQuery += queryId -> value }

  /** The value recorded for the query this `init` serves: in a task, the task's query (call it for
    * a streaming query's task only); on the driver, the query being planned on this thread. `None`
    * when none was recorded (on the driver: a batch query). */
  def inInit(handle: StatefulProcessorHandle): Option[T] =
    if (TaskContext.get() == null) RunningQueries.current().flatMap(query => byQuery.get(query.id.toString))
    else byQuery.get(handle.getQueryInfo().getQueryId.toString)
}
