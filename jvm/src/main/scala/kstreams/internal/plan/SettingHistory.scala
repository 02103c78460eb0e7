package kstreams
package internal
package plan

import org.apache.spark.TaskContext
import org.apache.spark.sql.streaming.StatefulProcessorHandle

/** A duration setting a restart may change ([[OperatorDescriptor.mayChangeOnRestart]]), as the
  * runs of a checkpoint had it, for the processor that judges state written under earlier values
  * ([[RecordedSettings]]): the dedup interval, a window's grace.
  *
  * Kept per query id ([[PerQuery]]): the driver tells the processor each query's history before
  * that query's first micro-batch; a task looks its own query's up.
  *
  * {{{
  *   private val intervals = new SettingHistory("interval")
  *   override def recorded(queryId: String, history: Seq[String]): Unit = intervals.record(queryId, history)
  *   // in init: intervals.inTask(getHandle, streaming = useTimers, current = intervalMicros)
  * }}}
  */
private[kstreams] final class SettingHistory(setting: String) extends Serializable {
  private val byQuery = new PerQuery[Vector[Long]]

  /** `history`: the operator's rendered descriptors from the checkpoint's first run to this one. */
  def record(queryId: String, history: Seq[String]): Unit =
    byQuery.record(queryId, history.flatMap(OperatorDescriptor.setting(_, setting)).map(Intervals.micros).toVector)

  /** The values from the checkpoint's first run to this one (whose value is `current`), for the
    * query of the task `handle` serves; `current` alone for a batch query, a new checkpoint and the
    * driver's own `init` (which only collects the state's schemas). */
  def inTask(handle: StatefulProcessorHandle, streaming: Boolean, current: Long): Vector[Long] = {
    val recorded = if (TaskContext.get() == null || !streaming) None else byQuery.inInit(handle)
    recorded.filter(_.lastOption.contains(current)).getOrElse(Vector(current))
  }
}

private[kstreams] object SettingHistory {

  /** For state last judged under run `judgedAt` of `values` ([[SettingHistory.inTask]]'s), the
    * smallest value of the runs from that one to the one before this run: what decides the state
    * that died meanwhile; `None` when this run has nothing to judge. A history of one run (the
    * setting never changed: no state was ever judged under another) needs no read of the state's
    * mark at all, which is why `judgedAt` is by name. */
  def smallestSince(values: Vector[Long], judgedAt: => Int): Option[Long] = {
    val current = values.size - 1
    if (current == 0) None
    else {
      val from = judgedAt
      if (from < current) Some(values.slice(from, current).min) else None
    }
  }
}
