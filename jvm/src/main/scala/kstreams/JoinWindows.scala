package kstreams

import java.time.Duration

/** The join window of a KStream-KStream join: records join when `|t1 - t2| <= timeDifference`.
  * A record's window closes once its task's stream time (partition `p` of both sides, spec
  * section 5) passes `t + timeDifference + grace`; then a left/outer join emits it unmatched. The
  * record stays joinable until its side's stream time reaches `t + 2 * timeDifference + grace`,
  * the retention of Kafka Streams' join window stores, so a record of the other side that is not
  * late still finds it.
  *
  * {{{ JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(100)) }}}
  */
final case class JoinWindows private (timeDifferenceMicros: Long, graceMicros: Long)
object JoinWindows {

  /** Records join within `timeDifference` of each other; no grace for late records (Kafka Streams'
    * `ofTimeDifferenceWithNoGrace`).
    *
    * {{{ JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(100)) }}}
    * @param timeDifference
    *   the largest `|t1 - t2|` of two records that join (0 or more)
    * @throws KStreamsException if an interval is null, negative, unreadable (a string: e.g. "10 seconds",
    *   "1 minute 30 s" or ISO-8601 "PT10S"), finer than a microsecond or in calendar units
    */
  def ofTimeDifferenceWithNoGrace(timeDifference: Duration): JoinWindows =
    of(Intervals.micros(timeDifference), 0L)

  /** `ofTimeDifferenceWithNoGrace` with the difference as text, e.g. `"10 seconds"`. */
  def ofTimeDifferenceWithNoGrace(timeDifference: String): JoinWindows =
    of(Intervals.micros(timeDifference), 0L)

  /** Records join within `timeDifference` of each other, and a record still joins `grace` after its
    * window's end (Kafka Streams' `ofTimeDifferenceAndGrace`).
    *
    * {{{ JoinWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(10), Duration.ofMinutes(1)) }}}
    * @param timeDifference
    *   the largest `|t1 - t2|` of two records that join (0 or more)
    * @param grace
    *   how long after its window's end a record still joins (0 or more)
    * @throws KStreamsException if an interval is null, negative, unreadable (a string: e.g. "10 seconds",
    *   "1 minute 30 s" or ISO-8601 "PT10S"), finer than a microsecond or in calendar units
    */
  def ofTimeDifferenceAndGrace(timeDifference: Duration, grace: Duration): JoinWindows =
    of(Intervals.micros(timeDifference), Intervals.micros(grace))

  /** `ofTimeDifferenceAndGrace` with the intervals as text, e.g. `("10 seconds", "1 minute")`. */
  def ofTimeDifferenceAndGrace(timeDifference: String, grace: String): JoinWindows =
    of(Intervals.micros(timeDifference), Intervals.micros(grace))

  private def of(difference: Long, grace: Long) = new JoinWindows(difference, grace)
}
