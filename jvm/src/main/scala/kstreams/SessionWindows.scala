package kstreams

import java.time.Duration

/** Session windows: records of a key closer than `gap` (inclusive) form one session. A record
  * whose (merged) session ends before `streamTime - grace` is late.
  *
  * {{{ SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMinutes(5)) }}}
  */
final case class SessionWindows private (gapMicros: Long, graceMicros: Long)
object SessionWindows {

  /** Sessions that end `gap` after their last record, with no grace: a record whose session ends
    * before its partition's stream time is late (Kafka Streams' `ofInactivityGapWithNoGrace`).
    *
    * {{{ SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMinutes(5)) }}}
    * @param gap
    *   records of a key at most this far apart form one session (more than 0)
    * @throws KStreamsException if an interval is null, negative, unreadable (a string: e.g. "10 seconds",
    *   "1 minute 30 s" or ISO-8601 "PT10S"), finer than a microsecond or in calendar units, or if
    *   `gap` is 0
    */
  def ofInactivityGapWithNoGrace(gap: Duration): SessionWindows = of(Intervals.micros(gap), 0L)

  /** `ofInactivityGapWithNoGrace` with the gap as text, e.g. `"5 minutes"` ([[Intervals]]). */
  def ofInactivityGapWithNoGrace(gap: String): SessionWindows = of(Intervals.micros(gap), 0L)

  /** Sessions that end `gap` after their last record and take records `grace` longer (Kafka
    * Streams' `ofInactivityGapAndGrace`).
    *
    * {{{ SessionWindows.ofInactivityGapAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1)) }}}
    * @param gap
    *   records of a key at most this far apart form one session (more than 0)
    * @param grace
    *   how long after its end a session still takes records (0 or more)
    * @throws KStreamsException if an interval is null, negative, unreadable (a string: e.g. "10 seconds",
    *   "1 minute 30 s" or ISO-8601 "PT10S"), finer than a microsecond or in calendar units, or if
    *   `gap` is 0
    */
  def ofInactivityGapAndGrace(gap: Duration, grace: Duration): SessionWindows =
    of(Intervals.micros(gap), Intervals.micros(grace))

  /** `ofInactivityGapAndGrace` with the intervals as text, e.g. `("5 minutes", "1 minute")`. */
  def ofInactivityGapAndGrace(gap: String, grace: String): SessionWindows =
    of(Intervals.micros(gap), Intervals.micros(grace))

  // Kafka Streams refuses a zero gap too (SessionWindows: "Gap time cannot be zero or negative")
  private def of(gap: Long, grace: Long): SessionWindows = {
    if (gap <= 0) throw new KStreamsException("session inactivity gap must be positive, got 0")
    new SessionWindows(gap, grace)
  }
}
