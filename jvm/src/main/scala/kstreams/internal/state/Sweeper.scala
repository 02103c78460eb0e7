package kstreams
package internal
package state

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TimerValues, TTLConfig}

/** The one event-time timer a processor group keeps to sweep dead state out (one per group, not
  * one per key: timers are a state-store write each).
  *
  * When the watermark reaches the timer, the processor is told the stream time that no record of
  * the group can be behind any more, `max(smallest partition stream time, watermark)`; it removes
  * what is dead below it, and the timer re-arms `max(period, 1 s)` of watermark later while state
  * is left. Create it in `init`.
  */
private[kstreams] final class Sweeper(handle: StatefulProcessorHandle, periodMicros: Long) {
  private val everyMs = math.max(periodMicros / 1000, 1000L)
  private val pending = handle.getValueState[Long]("sweepTimer", Encoders.scalaLong, TTLConfig.NONE)

  /** Arms the timer unless one is pending. */
  def ensureArmed(timerValues: TimerValues): Unit =
    if (!pending.exists()) arm(timerValues.getCurrentWatermarkInMs())

  /** The timer fired: `sweep(streamTime)` removes dead state and says whether any state is left. */
  def fired(timerValues: TimerValues, streamTimes: MapState[Int, Long])(sweep: Long => Boolean): Unit = {
    pending.clear()
    val watermarkMs = timerValues.getCurrentWatermarkInMs()
    val watermarkMicros =
      if (watermarkMs > Long.MaxValue / 1000) Long.MaxValue else watermarkMs * 1000
    val slowest = streamTimes.values().foldLeft(Long.MaxValue)(math.min)
    val streamTime = math.max(if (slowest == Long.MaxValue) Long.MinValue else slowest, watermarkMicros)
    if (sweep(streamTime)) arm(watermarkMs)
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
