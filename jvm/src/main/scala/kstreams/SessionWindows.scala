package kstreams

import java.time.Duration

/** Session windows: records of a key closer than `gap` (inclusive) form one session. A record
  * whose (merged) session ends before `streamTime - grace` is late.
  *
  * {{{ SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMinutes(5)) }}}
  */
final case class SessionWindows private (gapMicros: Long, graceMicros: Long)
object SessionWindows {
  def ofInactivityGapWithNoGrace(gap: Duration): SessionWindows =
    new SessionWindows(Intervals.micros(gap), 0L)
  def ofInactivityGapWithNoGrace(gap: String): SessionWindows =
    new SessionWindows(Intervals.micros(gap), 0L)
  def ofInactivityGapAndGrace(gap: Duration, grace: Duration): SessionWindows =
    new SessionWindows(Intervals.micros(gap), Intervals.micros(grace))
  def ofInactivityGapAndGrace(gap: String, grace: String): SessionWindows =
    new SessionWindows(Intervals.micros(gap), Intervals.micros(grace))
}
