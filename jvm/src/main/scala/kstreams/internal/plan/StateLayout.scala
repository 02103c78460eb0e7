package kstreams
package internal
package plan

import org.apache.spark.TaskContext
import org.apache.spark.sql.streaming.StatefulProcessorHandle

/** Which layout of its state variables a processor declares ([[LaidOutState]]): `current` for a
  * new checkpoint and a batch query, and for a checkpoint the one it was first written with
  * ([[CheckpointOperators]]' `state_layouts`), so that a checkpoint written by an earlier release
  * keeps working unchanged.
  *
  * Why layouts at all: Spark builds every state variable a processor declares in `init` anew in
  * every task of every micro-batch (a map state about 25 ms, a value state about 8 ms of encoders
  * and analysis on this project's 2-core machine), which a real-time query pays at each batch
  * boundary (issue 33). A layout that packs small values into one variable is cheaper, but a
  * checkpoint's variables cannot be renamed under it.
  *
  * Kept per query id ([[PerQuery]]); the driver's own `init`, which only collects the variables'
  * schemas, gets the layout of the query it is planning (on that query's thread).
  *
  * `shownByVariables` tells the layout from the names of the state variables Spark's metadata
  * lists for an operator ([[SparkStateMetadata]]), `None` for another operator's: what decides a
  * checkpoint's layout once it has committed state ([[CheckpointOperators]]).
  *
  * {{{
  *   val stateLayout = new StateLayout(current = 2, names => if (names("mode")) Some(1) else Some(2))
  *   // in init: if (stateLayout.inTask(getHandle, streaming = useTimers) == 1) ... else ...
  * }}}
  */
private[kstreams] final class StateLayout(val current: Int, val shownByVariables: Set[String] => Option[Int])
    extends Serializable {
  private val byQuery = new PerQuery[Int]

  /** On the driver, before the processor's `init` for a run: what the checkpoint recorded, `None`
    * outside a streaming query. */
  def plan(recorded: Option[CheckpointOperators.Recorded]): Unit =
    recorded.foreach(run => byQuery.record(run.queryId, run.stateLayout))

  /** The layout to declare in `init` (`streaming`: the processor runs in a streaming query). */
  def inTask(handle: StatefulProcessorHandle, streaming: Boolean): Int =
    if (TaskContext.get() != null && !streaming) current
    else
      byQuery.inInit(handle).getOrElse {
        // the driver's plan of a batch query: a new state
        if (TaskContext.get() == null) current
        // a task whose query's driver did not record the checkpoint's layout could read another
        // layout's state as empty: fail rather than let duplicates through
        else
          throw new KStreamsException(
            s"internal error: no state layout was recorded for query ${handle.getQueryInfo().getQueryId} before its tasks ran")
      }
}
