package kstreams
package internal
package state

import scala.collection.mutable

import org.apache.spark.sql.streaming.MapState

/** Stream time per input partition (largest timestamp seen, micros; spec section 1) of an
  * arrival-order processor, read from its map state once per partition and call, and written back
  * ([[flush]]) when the call's rows are done, so a partition's many records cost one state read
  * and at most one write. */
private[kstreams] final class StreamTimes(state: MapState[Int, Long]) {
  private val times = mutable.HashMap.empty[Int, Long]
  private val changed = mutable.HashSet.empty[Int]

  /** Stream time of `partition` so far (Long.MinValue before its first record). */
  def current(partition: Int): Long =
    times.getOrElseUpdate(partition, if (state.containsKey(partition)) state.getValue(partition) else Long.MinValue)

  /** Advances `partition`'s stream time to `ts` if that is later; returns the stream time after. */
  def advance(partition: Int, ts: Long): Long = {
    val before = current(partition)
    if (ts > before) { times(partition) = ts; changed += partition; ts }
    else before
  }

  /** Writes the stream times that advanced since the last flush. */
  def flush(): Unit = changed.foreach(p => state.updateValue(p, times(p)))
}
