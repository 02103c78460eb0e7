package kstreams

import org.apache.spark.sql.{Column, DataFrame}
import org.apache.spark.sql.kstreams.ChangeSequence

import kstreams.internal.join._
import kstreams.internal.table._

/** A changelog table: [[df]] is its update stream, one row per change (key, value, timestamp;
  * a null value deletes the key), as Kafka Streams forwards a KTable's changes downstream. The
  * `timestamp` column carries the input's watermark metadata.
  *
  * {{{
  * val counts: KTable = KStream(df).groupByKey.count()
  * counts.join(KStream(profiles).toTable, (c, p) => concat(c.cast("string"), lit("/"), p))
  * }}}
  */
final class KTable private[kstreams] (changes: DataFrame, val columns: StreamColumns) {

  /** The update stream: key, value, timestamp. */
  val df: DataFrame = changes.drop(KTable.ChangeOrder)

  /** The table's update stream as a [[KStream]] (Kafka's `toStream()`). */
  def toStream: KStream = KStream(df, columns)

  /** The update stream with its changes numbered in the order the table made them, for an
    * operator that must apply them in that order (a table join), never re-ordered by timestamp. */
  private[kstreams] def changeStream: KStream =
    KStream(
      changes,
      StreamColumns(
        columns.key,
        columns.value,
        columns.timestamp,
        partition = None,
        offset = Some(KTable.ChangeOrder),
        onNullTimestamp = columns.onNullTimestamp)
    )

  /** Inner join with `other` on the key: whenever either side changes and both have a row, emits
    * `joiner(thisValue, otherValue)` at the later of the two rows' timestamps; a delete on either
    * side emits a tombstone (null value).
    *
    * {{{ left.join(right, (l, r) => concat(l, lit("+"), r)) }}}
    */
  def join(other: KTable, joiner: (Column, Column) => Column): KTable =
    TableJoin(this, other, joiner, JoinKind.Inner)

  /** Like [[join]], also emitting `joiner(thisValue, null)` when `other` has no row for the key. */
  def leftJoin(other: KTable, joiner: (Column, Column) => Column): KTable =
    TableJoin(this, other, joiner, JoinKind.Left)

  /** Like [[join]], emitting a result whenever either side has a row (the other value null). */
  def outerJoin(other: KTable, joiner: (Column, Column) => Column): KTable =
    TableJoin(this, other, joiner, JoinKind.Outer)
}

object KTable {

  /** Hidden column of a table's changes: increasing in the order the producing task emitted them.
    * A key's changes all come from the one task that holds the key, so per key this is the order
    * of its changes inside a micro-batch (micro-batches are in order anyway). */
  private[kstreams] val ChangeOrder = "__kstreams_change"

  /** The table whose changes are `result`'s rows, as the processor that made them emitted them
    * (call it on the processor's output before any shuffle). */
  private[kstreams] def apply(result: DataFrame, columns: StreamColumns): KTable =
    new KTable(
      result.withColumn(ChangeOrder, ChangeSequence.column()),
      StreamColumns(columns.key, columns.value, columns.timestamp, None, None, columns.onNullTimestamp))
}
