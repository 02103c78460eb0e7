package kstreams

import org.apache.spark.sql.{Column, DataFrame}
import org.apache.spark.sql.functions.col
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
final class KTable private[kstreams] (changes: DataFrame, val columns: StreamColumns, withSide: Option[DataFrame]) {

  /** The update stream: key, value, timestamp. */
  val df: DataFrame = changes.drop(KTable.ChangeOrder)

  /** The input records the aggregation that made this table routed aside: with
    * [[LateRecords.SideOutput]], the records of closed windows of a windowed `count`, `reduce` or
    * `aggregate`, unchanged (the input stream's columns), then [[LateRecords.ReasonColumn]]
    * (`"window closed"`, as windowed distinct's). A query that writes it alone runs the
    * aggregation on its own checkpoint; [[withSideOutput]] writes both outputs from one query.
    *
    * {{{
    * KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s"))
    *   .count(LateRecords.SideOutput).sideOutput // key, value, timestamp, ..., kstreams_reason
    * }}}
    */
  def sideOutput: DataFrame =
    withSideOutput
      .where(col(LateRecords.ReasonColumn).isNotNull)
      .select(col(s"${KTable.LateRecordColumn}.*"), col(LateRecords.ReasonColumn))

  /** [[df]]'s updates and [[sideOutput]]'s records in one DataFrame, for one query with one run of
    * the aggregation that writes both. Its columns: [[df]]'s (key, `window`, value, timestamp),
    * then [[LateRecords.ReasonColumn]], then [[KTable.LateRecordColumn]], a struct holding the
    * late input record. An update has the reason and the struct null; a late record has the
    * reason, the struct, and null table columns.
    *
    * Why this shape: an update and a late record have different columns, often under the same
    * names (`value` is a count here, a string there), so one cannot be a row of the other's
    * schema; the struct keeps each as it is, so that `drop("kstreams_reason", "kstreams_late_record")`
    * of the updates is [[df]] and `select("kstreams_late_record.*", "kstreams_reason")` of the late
    * ones is [[sideOutput]], and the reason column is [[KStream.withSideOutput]]'s.
    *
    * {{{
    * KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).count(LateRecords.SideOutput)
    *   .withSideOutput.writeStream.foreachBatch { (batch: DataFrame, _: Long) =>
    *     batch.persist() // the aggregation runs once; each write reads the persisted rows
    *     batch.where("kstreams_reason is null").drop("kstreams_reason", "kstreams_late_record")
    *       .write.mode("append").parquet("counts")
    *     batch.where("kstreams_reason is not null").select("kstreams_late_record.*", "kstreams_reason")
    *       .write.mode("append").parquet("late")
    *     batch.unpersist()
    *   }
    * }}}
    */
  def withSideOutput: DataFrame = withSide.getOrElse(
    throw new KStreamsException(
      "this table has no side output: only a windowed count, reduce or aggregate can have one, when " +
        "run with late_records='side_output' (Scala: LateRecords.SideOutput)"))

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

  /** The column of [[KTable.withSideOutput]] that holds a late input record (a struct of the input
    * stream's columns; null for the table's updates). */
  val LateRecordColumn = "kstreams_late_record"

  /** Hidden column of a table's changes: increasing in the order the producing task emitted them.
    * A key's changes all come from the one task that holds the key, so per key this is the order
    * of its changes inside a micro-batch (micro-batches are in order anyway). */
  private[kstreams] val ChangeOrder = internal.plan.HelperColumns.TableChange

  /** The table whose changes are `result`'s rows, as the processor that made them emitted them
    * (call it on the processor's output before any shuffle). */
  private[kstreams] def apply(
      result: DataFrame,
      columns: StreamColumns,
      withSideOutput: Option[DataFrame] = None): KTable =
    new KTable(
      result.withColumn(ChangeOrder, ChangeSequence.column()),
      StreamColumns(columns.key, columns.value, columns.timestamp, None, None, columns.onNullTimestamp),
      withSideOutput
    )
}
