package kstreams

import java.time.Duration

/** Epoch-aligned tumbling windows `[start, start + size)` (Kafka Streams' `TimeWindows` without
  * advance). A record whose window has closed (`end <= streamTime - grace`) is late.
  *
  * {{{ TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(2)) }}}
  */
final case class TimeWindows private (sizeMicros: Long, graceMicros: Long)
object TimeWindows {
  def ofSizeWithNoGrace(size: Duration): TimeWindows = of(Intervals.micros(size), 0L)
  def ofSizeWithNoGrace(size: String): TimeWindows = of(Intervals.micros(size), 0L)
  def ofSizeAndGrace(size: Duration, grace: Duration): TimeWindows =
    of(Intervals.micros(size), Intervals.micros(grace))
  def ofSizeAndGrace(size: String, grace: String): TimeWindows =
    of(Intervals.micros(size), Intervals.micros(grace))

  private def of(size: Long, grace: Long): TimeWindows = {
    if (size <= 0) throw new KStreamsException("window size must be positive, got 0")
    new TimeWindows(size, grace)
  }
}
