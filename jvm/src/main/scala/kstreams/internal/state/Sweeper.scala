package kstreams
package internal
package state

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TimerValues, TTLConfig, ValueState}

/** The one event-time timer a processor group keeps to sweep dead state out (one per group, not
  * one per key: timers are a state-store write each).
  *
  * When the watermark reaches the timer, the processor is told the stream time that no record of
  * the group can be behind any more, `max(smallest partition stream time, watermark)`; it removes
  * what is dead below it, and the timer re-arms `max(period, 1 s)` of watermark later while state
  * is left. Create it in `init`. The time of the pending timer is kept in the value state
  * `sweepTimer`, or where `pendingAt` keeps it (a processor that packs its small values into one,
  * [[kstreams.internal.plan.StateLayout]]).
  */
private[kstreams] final class Sweeper(
    handle: StatefulProcessorHandle,
    periodMicros: Long,
    pendingAt: Option[Sweeper.PendingTimer] = None) {
  private val everyMs = math.max(periodMicros / 1000, 1000L)
  private val pending: Sweeper.PendingTimer = pendingAt.getOrElse(
    Sweeper.inValueState(handle.getValueState[Long]("sweepTimer", Encoders.scalaLong, TTLConfig.NONE)))

  /** Arms the timer unless one is pending. */
  def ensureArmed(timerValues: TimerValues): Unit =
    if (!pending.exists()) arm(timerValues.getCurrentWatermarkInMs())

  /** Removes the pending timer, for a group that [[ensureArmed]] arms again when it closes. Why: a
    * real-time query checks the timers after every record, reading the earliest pending one of
    * the task's state partition (a RocksDB seek and a decoded row each time); a group taking
    * records is not idle, so while it is open its timer has nothing to do but be read. (The read
    * stays where an idle group of the same state partition still holds a timer.) */
  def disarm(): Unit = {
    val at = pending.atMs
    if (at != Long.MinValue) {
      handle.deleteTimer(at)
      pending.clear()
    }
  }

  /** The timer fired: `sweep(streamTime)` removes dead state and says whether any state is left. */
  def fired(timerValues: TimerValues, streamTimes: MapState[Int, Long])(sweep: Long => Boolean): Unit = {
    val slowest = streamTimes.values().foldLeft(Long.MaxValue)(math.min)
    firedBehind(timerValues, if (slowest == Long.MaxValue) Long.MinValue else slowest)(sweep)
  }

  /** [[fired]] for a processor that knows its slowest partition's stream time (Long.MinValue while
    * it has none). */
  def firedBehind(timerValues: TimerValues, slowestStreamTime: Long)(sweep: Long => Boolean): Unit = {
    pending.clear()
    val watermarkMs = timerValues.getCurrentWatermarkInMs()
    val watermarkMicros =
      if (watermarkMs > Long.MaxValue / 1000) Long.MaxValue else watermarkMs * 1000
    if (sweep(math.max(slowestStreamTime, watermarkMicros))) arm(watermarkMs)
  }

  /** The timer fired, for a processor that knows the stream time no record of the group can be
    * behind any more (`streamTime`, Long.MinValue while unknown): `sweep` as in [[fired]]. */
  def firedAt(timerValues: TimerValues, streamTime: Long)(sweep: Long => Boolean): Unit = {
    pending.clear()
    if (streamTime == Long.MinValue || sweep(streamTime)) arm(timerValues.getCurrentWatermarkInMs())
  }

  private def arm(watermarkMs: Long): Unit = {
    val at = math.max(watermarkMs, 0L) + everyMs
    handle.registerTimer(at)
    pending.update(at)
  }
}

private[kstreams] object Sweeper {

  /** Where the time of a group's pending sweep timer is kept. */
  trait PendingTimer {

    /** The pending timer's time, Long.MinValue when none is. */
    def atMs: Long
    final def exists(): Boolean = atMs != Long.MinValue
    def clear(): Unit
    def update(atMs: Long): Unit
  }

  private def inValueState(state: ValueState[Long]): PendingTimer = new PendingTimer {
    def atMs: Long = if (state.exists()) state.get() else Long.MinValue
    def clear(): Unit = state.clear()
    def update(atMs: Long): Unit = state.update(atMs)
  }
}
