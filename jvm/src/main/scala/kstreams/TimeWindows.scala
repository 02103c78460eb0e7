package kstreams

import java.time.Duration

/** Epoch-aligned tumbling windows `[start, start + size)` (Kafka Streams' `TimeWindows` without
  * advance). A record whose window has closed (`end <= streamTime - grace`) is late.
  *
  * {{{ TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(2)) }}}
  */
final case class TimeWindows private (sizeMicros: Long, graceMicros: Long)
object TimeWindows {

  /** Windows of `size` that close at their end: a record is late once its partition's stream time
    * reaches its window's end (Kafka Streams' `ofSizeWithNoGrace`).
    *
    * {{{ TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10)) }}}
    * @param size
    *   the window length (more than 0)
    * @throws KStreamsException if an interval is null, negative, unreadable (a string: e.g. "10 seconds",
    *   "1 minute 30 s" or ISO-8601 "PT10S"), finer than a microsecond or in calendar units, or if
    *   `size` is 0
    */
  def ofSizeWithNoGrace(size: Duration): TimeWindows = of(Intervals.micros(size), 0L)

  /** `ofSizeWithNoGrace` with the size as text, e.g. `"10 seconds"` ([[Intervals]]). */
  def ofSizeWithNoGrace(size: String): TimeWindows = of(Intervals.micros(size), 0L)

  /** Windows of `size` that take records until their partition's stream time reaches their end +
    * `grace` (Kafka Streams' `ofSizeAndGrace`).
    *
    * {{{ TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(5)) }}}
    * @param size
    *   the window length (more than 0)
    * @param grace
    *   how long after its end a window still takes records (0 or more)
    * @throws KStreamsException if an interval is null, negative, unreadable (a string: e.g. "10 seconds",
    *   "1 minute 30 s" or ISO-8601 "PT10S"), finer than a microsecond or in calendar units, or if
    *   `size` is 0
    */
  def ofSizeAndGrace(size: Duration, grace: Duration): TimeWindows =
    of(Intervals.micros(size), Intervals.micros(grace))

  /** `ofSizeAndGrace` with the intervals as text, e.g. `("1 minute", "5 s")` ([[Intervals]]). */
  def ofSizeAndGrace(size: String, grace: String): TimeWindows =
    of(Intervals.micros(size), Intervals.micros(grace))

  private def of(size: Long, grace: Long): TimeWindows = {
    if (size <= 0) throw new KStreamsException("window size must be positive, got 0")
    new TimeWindows(size, grace)
  }
}
