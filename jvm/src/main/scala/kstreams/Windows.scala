package kstreams

import java.time.Duration

import org.apache.spark.sql.Column
import org.apache.spark.sql.functions.col

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

/** `KStream.groupByKey` / `groupBy`: records grouped by their key, for aggregations and windows.
  * Aggregations fold a key's records in arrival order into a [[KTable]] whose timestamp is the
  * largest timestamp folded in; records with a null key are skipped and counted, and so are null
  * values except in windowed and session-windowed aggregations, which fold them in (Kafka Streams
  * 4.3; spec section 5).
  *
  * {{{
  * KStream(df).groupByKey.count()
  * KStream(df).groupByKey.reduce((agg, value) => agg + value)
  * KStream(df).groupByKey.aggregate(lit(""), (agg, value) => concat(agg, value))
  * }}}
  */
final class KGroupedStream private[kstreams] (stream: KStream) {

  /** Number of records per key. */
  def count(): KTable = Aggregate.run(stream, Aggregate.count, Aggregate.Unwindowed)

  /** Combines each key's values with `adder(aggregate, value)`; the first value starts it. */
  def reduce(adder: (Column, Column) => Column): KTable =
    Aggregate.run(stream, KGroupedStream.reduceFold(adder), Aggregate.Unwindowed)

  /** Folds each key's values into `adder(aggregate, value)`, starting from the constant
    * `initializer` (whose type the aggregate keeps). */
  def aggregate(initializer: Column, adder: (Column, Column) => Column): KTable =
    Aggregate.run(stream, KGroupedStream.aggregateFold(initializer, adder, None), Aggregate.Unwindowed)

  def windowedBy(windows: TimeWindows): TimeWindowedKStream = new TimeWindowedKStream(stream, windows)
  def windowedBy(windows: SessionWindows): SessionWindowedKStream =
    new SessionWindowedKStream(stream, windows)
}

/** A stream grouped by key and tumbling window. Aggregations give one result per (key, window)
  * with a `window` column; the result timestamp is the largest within the window. */
final class TimeWindowedKStream private[kstreams] (stream: KStream, windows: TimeWindows) {

  /** Records per (key, window). {{{ grouped.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).count() }}} */
  def count(): KTable = Aggregate.run(stream, Aggregate.count, Aggregate.Tumbling(windows))

  /** [[KGroupedStream.reduce]] per window. */
  def reduce(adder: (Column, Column) => Column): KTable =
    Aggregate.run(stream, KGroupedStream.reduceFold(adder), Aggregate.Tumbling(windows))

  /** [[KGroupedStream.aggregate]] per window. */
  def aggregate(initializer: Column, adder: (Column, Column) => Column): KTable =
    Aggregate.run(stream, KGroupedStream.aggregateFold(initializer, adder, None), Aggregate.Tumbling(windows))

  /** The first record of each (key, window), with a `window` column (start, end).
    *
    * {{{ KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).distinct().df }}}
    */
  def distinct(): KStream = stream.withDf(WindowedDistinct.tumbling(stream.df, stream.columns, windows))
}

/** A stream grouped by key and session window. Aggregations give one result per (key, session)
  * with a `window` column (first and last record's time); when a record merges sessions, each
  * merged-away session gets a tombstone (null value). The result timestamp is the session's
  * latest record's. */
final class SessionWindowedKStream private[kstreams] (stream: KStream, windows: SessionWindows) {

  /** Records per (key, session).
    * {{{ grouped.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("5 min")).count() }}} */
  def count(): KTable = Aggregate.run(stream, Aggregate.count, Aggregate.Sessions(windows))

  /** [[KGroupedStream.reduce]] per session; merging sessions combines them with `adder` too. */
  def reduce(adder: (Column, Column) => Column): KTable =
    Aggregate.run(stream, KGroupedStream.reduceFold(adder), Aggregate.Sessions(windows))

  /** [[KGroupedStream.aggregate]] per session; `merger(aggregate1, aggregate2)` combines the
    * aggregates of sessions that a record merges (Kafka's `Merger`). */
  def aggregate(initializer: Column, adder: (Column, Column) => Column, merger: (Column, Column) => Column): KTable =
    Aggregate.run(stream, KGroupedStream.aggregateFold(initializer, adder, Some(merger)), Aggregate.Sessions(windows))

  /** The record that opens each session, with `window = (t, t)`; records that join or bridge a
    * session are not forwarded.
    *
    * {{{ KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("5 min")).distinct() }}}
    */
  def distinct(): KStream = stream.withDf(WindowedDistinct.session(stream.df, stream.columns, windows))
}

private[kstreams] object KGroupedStream {
  private def adderOf(adder: (Column, Column) => Column): Column =
    adder(col(Aggregate.AggInput), col(Aggregate.ValueInput))

  def reduceFold(adder: (Column, Column) => Column): Aggregate.Fold =
    Aggregate.Fold("kstreams_reduce", None, adderOf(adder), None)

  def aggregateFold(
      initializer: Column,
      adder: (Column, Column) => Column,
      merger: Option[(Column, Column) => Column]): Aggregate.Fold =
    Aggregate.Fold("kstreams_aggregate", Some(initializer), adderOf(adder), merger.map(adderOf))
}
