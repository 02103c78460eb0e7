package kstreams

import org.apache.spark.sql.Column
import org.apache.spark.sql.functions.col

import kstreams.internal.aggregate._

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
