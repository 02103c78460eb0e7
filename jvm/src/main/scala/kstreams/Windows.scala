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

/** `KStream.groupByKey`: records grouped by their key, for windowing. */
final class KGroupedStream private[kstreams] (stream: KStream) {
  def windowedBy(windows: TimeWindows): TimeWindowedKStream = new TimeWindowedKStream(stream, windows)
  def windowedBy(windows: SessionWindows): SessionWindowedKStream =
    new SessionWindowedKStream(stream, windows)
}

/** A stream grouped by key and tumbling window. */
final class TimeWindowedKStream private[kstreams] (stream: KStream, windows: TimeWindows) {
  /** The first record of each (key, window), with a `window` column (start, end).
    *
    * {{{ KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).distinct().df }}}
    */
  def distinct(): KStream = stream.withDf(WindowedDistinct.tumbling(stream.df, stream.columns, windows))
}

/** A stream grouped by key and session window. */
final class SessionWindowedKStream private[kstreams] (stream: KStream, windows: SessionWindows) {
  /** The record that opens each session, with `window = (t, t)`; records that join or bridge a
    * session are not forwarded.
    *
    * {{{ KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("5 min")).distinct() }}}
    */
  def distinct(): KStream = stream.withDf(WindowedDistinct.session(stream.df, stream.columns, windows))
}
