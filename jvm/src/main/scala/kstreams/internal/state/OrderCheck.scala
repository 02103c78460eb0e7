package kstreams
package internal
package state

import scala.collection.mutable

import org.apache.spark.sql.Row

/** Checks that each partition's rows arrive in offset (or timestamp) order: kstreams plans every
  * arrival-order operator so that they do ([[kstreams.internal.plan.PartitionInput]],
  * [[kstreams.internal.plan.CompactInput]]), and this is what fails loudly if a planner ever
  * broke it. (Null timestamps and partitions never get here: `InputColumns` fails the query on
  * them, naming where.) One per task: in a micro-batch a partition's rows come in one call, in a
  * real-time query one per call, all of a batch in the same task.
  *
  * @param partitionIndex the position of the input partition (an int) in a row
  * @param orderIndex     the position of the row's place in its partition (a long; null: not
  *                       checked)
  */
private[kstreams] final class OrderCheck(partitionIndex: Int, orderIndex: Int) {
  private val last = mutable.HashMap.empty[Int, Long]

  def check(row: Row): Unit = {
    val partition = row.getInt(partitionIndex)
    if (!row.isNullAt(orderIndex)) {
      val position = row.getLong(orderIndex)
      last.get(partition) match {
        case Some(previous) if position < previous => throw OrderCheck.outOfOrder(partition, position, previous)
        case _ => last(partition) = position
      }
    }
  }
}

private[kstreams] object OrderCheck {

  /** The one error for a partition whose records reach an operator out of their order (offset, or
    * timestamp without offsets): kstreams sorted them (micro-batch) or read them in order from one
    * source task (real-time), so a planner changed what it relies on, and deciding on would give
    * other results than the spec's. `position` came after `previous`. */
  def outOfOrder(partition: Int, position: Long, previous: Long): IllegalStateException =
    outOfOrder(partition, s"$position after $previous")

  /** [[outOfOrder]] saying in `detail` what came after what. */
  def outOfOrder(partition: Int, detail: String): IllegalStateException =
    new IllegalStateException(
      s"kstreams internal error: partition $partition arrived out of order ($detail), so Spark " +
        "re-shuffled the input after kstreams ordered it. Please report this with the query plan " +
        "(query.explain()).")
}
