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
  def distinct(): KStream = distinct(LateRecords.Drop)

  /** [[distinct]] with a policy for the records of closed windows: [[LateRecords.Drop]] (the
    * default, spec section 3) or [[LateRecords.SideOutput]] (the result's [[KStream.sideOutput]],
    * reason "window closed"); [[LateRecords.Forward]] is refused. */
  def distinct(lateRecords: LateRecords): KStream =
    stream.withOutputs(WindowedDistinct.session(stream.df, stream.columns, windows, lateRecords))
}
