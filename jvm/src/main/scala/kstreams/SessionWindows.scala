package kstreams

import java.time.Duration

/** Session windows: records of a key closer than `gap` (inclusive) form one session. A record
  * whose (merged) session ends before `streamTime - grace` is late.
  *
  * {{{ SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMinutes(5)) }}}
  */
final case class SessionWindows private (gapMicros: Long, graceMicros: Long)
object SessionWindows {
  def ofInactivityGapWithNoGrace(gap: Duration): SessionWindows = of(Intervals.micros(gap), 0L)
  def ofInactivityGapWithNoGrace(gap: String): SessionWindows = of(Intervals.micros(gap), 0L)
  def ofInactivityGapAndGrace(gap: Duration, grace: Duration): SessionWindows =
    of(Intervals.micros(gap), Intervals.micros(grace))
  def ofInactivityGapAndGrace(gap: String, grace: String): SessionWindows =
    of(Intervals.micros(gap), Intervals.micros(grace))

  // Kafka Streams refuses a zero gap too (SessionWindows: "Gap time cannot be zero or negative")
  private def of(gap: Long, grace: Long): SessionWindows = {
    if (gap <= 0) throw new KStreamsException("session inactivity gap must be positive, got 0")
    new SessionWindows(gap, grace)
  }
}
