package kstreams

import org.apache.spark.sql.Column

import kstreams.internal.aggregate._
import kstreams.internal.window._

/** A stream grouped by key and session window. Aggregations give one result per (key, session)
  * with a `window` column (first and last record's time); when a record merges sessions, each
  * merged-away session gets a tombstone (null value). The result timestamp is the session's
  * latest record's. */
final class SessionWindowedKStream private[kstreams] (stream: KStream, windows: SessionWindows) {

  /** Records per (key, session).
    * {{{ grouped.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("5 min")).count() }}} */
  def count(): KTable = count(LateRecords.Drop)

  /** `count` with a policy for the records of closed sessions (a record whose merged session
    * ends before its own partition's `stream time - grace - gap`, spec section 5): [[LateRecords.Drop]] (the default, spec section 3;
    * counted as `late_dropped`) or [[LateRecords.SideOutput]] (unchanged, in the table's
    * [[KTable.sideOutput]] with reason "window closed", counted as `late_side_output`);
    * [[LateRecords.Forward]] is refused: a closed session's result was emitted already.
    *
    * {{{
    * val counts = KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("5 min"))
    *   .count(LateRecords.SideOutput)
    * counts.sideOutput // the late input records, with kstreams_reason = "window closed"
    * }}}
    */
  def count(lateRecords: LateRecords): KTable =
    Aggregate.run(stream, Aggregate.count, Aggregate.Sessions(windows), lateRecords)

  /** [[KGroupedStream.reduce]] per session; merging sessions combines them with `adder` too. */
  def reduce(adder: (Column, Column) => Column): KTable = reduce(adder, LateRecords.Drop)

  /** `reduce` with a policy for the records of closed sessions, as `count(lateRecords)`.
    * {{{ grouped.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("5 min")).reduce((a, v) => a + v, LateRecords.SideOutput) }}}
    */
  def reduce(adder: (Column, Column) => Column, lateRecords: LateRecords): KTable =
    Aggregate.run(stream, KGroupedStream.reduceFold(adder), Aggregate.Sessions(windows), lateRecords)

  /** [[KGroupedStream.aggregate]] per session; `merger(aggregate1, aggregate2)` combines the
    * aggregates of sessions that a record merges (Kafka's `Merger`). */
  def aggregate(initializer: Column, adder: (Column, Column) => Column, merger: (Column, Column) => Column): KTable =
    aggregate(initializer, adder, merger, LateRecords.Drop)

  /** `aggregate` with a policy for the records of closed sessions, as `count(lateRecords)`.
    * {{{
    * grouped.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("5 min"))
    *   .aggregate(lit(0L), (a, v) => a + 1, (a, b) => a + b, LateRecords.SideOutput)
    * }}}
    */
  def aggregate(
      initializer: Column,
      adder: (Column, Column) => Column,
      merger: (Column, Column) => Column,
      lateRecords: LateRecords): KTable =
    Aggregate.run(
      stream,
      KGroupedStream.aggregateFold(initializer, adder, Some(merger)),
      Aggregate.Sessions(windows),
      lateRecords)

  /** The record that opens each session, with `window = (t, t)`; records that join or bridge a
    * session are not forwarded.
    *
    * {{{ KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("5 min")).distinct() }}}
    */
  def distinct(): KStream = distinct(LateRecords.Drop)

  /** `distinct` with a policy for the records of closed windows: [[LateRecords.Drop]] (the
    * default, spec section 3) or [[LateRecords.SideOutput]] (the result's [[KStream.sideOutput]],
    * reason "window closed"); [[LateRecords.Forward]] is refused. */
  def distinct(lateRecords: LateRecords): KStream =
    stream.withOutputs(WindowedDistinct.session(stream.df, stream.columns, windows, lateRecords))
}
