package kstreams

import org.apache.spark.sql.Column

import kstreams.internal.aggregate._
import kstreams.internal.window._

/** A stream grouped by key and tumbling window. Aggregations give one result per (key, window)
  * with a `window` column; the result timestamp is the largest within the window. */
final class TimeWindowedKStream private[kstreams] (stream: KStream, windows: TimeWindows) {

  /** Records per (key, window). {{{ grouped.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).count() }}} */
  def count(): KTable = count(LateRecords.Drop)

  /** `count` with a policy for the records of closed windows: [[LateRecords.Drop]] (the default,
    * spec section 3; counted as `late_dropped`) or [[LateRecords.SideOutput]] (unchanged, in the
    * table's [[KTable.sideOutput]] with reason "window closed", counted as `late_side_output`);
    * [[LateRecords.Forward]] is refused: a closed window's result was emitted already.
    *
    * {{{
    * val counts = KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).count(LateRecords.SideOutput)
    * counts.df         // key, window, value, timestamp
    * counts.sideOutput // the late input records, with kstreams_reason = "window closed"
    * }}}
    */
  def count(lateRecords: LateRecords): KTable =
    Aggregate.run(stream, Aggregate.count, Aggregate.Tumbling(windows), lateRecords)

  /** [[KGroupedStream.reduce]] per window. */
  def reduce(adder: (Column, Column) => Column): KTable = reduce(adder, LateRecords.Drop)

  /** `reduce` with a policy for the records of closed windows, as `count(lateRecords)`.
    * {{{ grouped.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).reduce((a, v) => a + v, LateRecords.SideOutput) }}}
    */
  def reduce(adder: (Column, Column) => Column, lateRecords: LateRecords): KTable =
    Aggregate.run(stream, KGroupedStream.reduceFold(adder), Aggregate.Tumbling(windows), lateRecords)

  /** [[KGroupedStream.aggregate]] per window. */
  def aggregate(initializer: Column, adder: (Column, Column) => Column): KTable =
    aggregate(initializer, adder, LateRecords.Drop)

  /** `aggregate` with a policy for the records of closed windows, as `count(lateRecords)`.
    * {{{
    * grouped.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s"))
    *   .aggregate(lit(0L), (a, v) => a + length(v), LateRecords.SideOutput)
    * }}}
    */
  def aggregate(initializer: Column, adder: (Column, Column) => Column, lateRecords: LateRecords): KTable =
    Aggregate.run(
      stream,
      KGroupedStream.aggregateFold(initializer, adder, None),
      Aggregate.Tumbling(windows),
      lateRecords)

  /** The first record of each (key, window), with a `window` column (start, end).
    *
    * {{{ KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).distinct().df }}}
    */
  def distinct(): KStream = distinct(LateRecords.Drop)

  /** `distinct` with a policy for the records of closed windows: [[LateRecords.Drop]] (the
    * default, spec section 3) or [[LateRecords.SideOutput]] (the result's [[KStream.sideOutput]],
    * reason "window closed"); [[LateRecords.Forward]] is refused. */
  def distinct(lateRecords: LateRecords): KStream =
    stream.withOutputs(WindowedDistinct.tumbling(stream.df, stream.columns, windows, lateRecords))
}
