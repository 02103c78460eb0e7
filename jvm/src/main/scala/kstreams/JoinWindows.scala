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
  def ofTimeDifferenceWithNoGrace(timeDifference: Duration): JoinWindows =
    of(Intervals.micros(timeDifference), 0L)
  def ofTimeDifferenceWithNoGrace(timeDifference: String): JoinWindows =
    of(Intervals.micros(timeDifference), 0L)
  def ofTimeDifferenceAndGrace(timeDifference: Duration, grace: Duration): JoinWindows =
    of(Intervals.micros(timeDifference), Intervals.micros(grace))
  def ofTimeDifferenceAndGrace(timeDifference: String, grace: String): JoinWindows =
    of(Intervals.micros(timeDifference), Intervals.micros(grace))

  private def of(difference: Long, grace: Long) = new JoinWindows(difference, grace)
}
