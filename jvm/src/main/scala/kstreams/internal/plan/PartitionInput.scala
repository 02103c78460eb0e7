package kstreams
package internal
package plan

import org.apache.spark.sql.{Column, DataFrame, Encoders, KeyValueGroupedDataset, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.ArrivalOrderSort
import org.apache.spark.sql.types._

import kstreams.internal.plan.HelperColumns._
import kstreams.internal.plan.HelperColumns.quote

/** Prepares a DataFrame for a stateful processor that reads the user's rows as `Row`s and must see
  * every input partition's records in arrival order (spec section 1): micro-batch by micro-batch,
  * and inside one micro-batch by `offset` (or by timestamp when there is no offset column).
  * (Processors that never look at the user's columns read [[CompactInput]] instead.)
  *
  * The rows are hash-partitioned on the processor's grouping column and sorted by (group, offset)
  * *before* `transformWithState`. A group is one input partition (its number, or its key where
  * groups are placed round-robin), so that is (partition, offset), and it is exactly the
  * distribution and a refinement of the ordering the operator requires: Spark adds no shuffle or
  * sort of its own and each group's iterator arrives in offset order. (The partition is not a sort
  * column of its own: it would come between the group and the offset, and the sort's prefix
  * packs the group with the column after it, `ArrivalSortExec`.) The processor checks the order
  * as it reads ([[kstreams.internal.state.OrderCheck]]) and fails loudly if a future planner ever
  * broke it.
  *
  * The timestamp column is re-derived without its watermark metadata: `transformWithState` in
  * event-time mode would otherwise drop records older than the watermark before the processor saw
  * them, and the spec needs late records forwarded. The query-wide watermark still drives timers.
  */
private[kstreams] object PartitionInput {

  /** Column positions of a prepared row, computed on the driver for the processor. */
  final case class Layout(
      outputWidth: Int,
      offsetName: Option[String],
      partitionIndex: Int,
      orderIndex: Int,
      timestampMicrosIndex: Int,
      extraIndex: Map[String, Int]) {

    /** `partition 3, offset 42` for error messages. */
    def where(row: Row): String = {
      val part = if (row.isNullAt(partitionIndex)) "null" else row.getInt(partitionIndex).toString
      val offset = offsetName match {
        case Some(_) if !row.isNullAt(orderIndex) => row.getLong(orderIndex).toString
        case Some(_) => "null"
        case None => "n/a (no offset column)"
      }
      s"partition $part, offset $offset"
    }
  }

  /** The prepared, grouped input plus its layout and output schema.
    *
    * @param extra     named helper columns the processor reads (e.g. the dedup key)
    * @param watermarkDelayMicros watermark added when a streaming input has none
    * @param roundRobin input partitions placed round-robin on the state partitions
    *                   ([[GroupPlacement]]); the processor's group is then an opaque key (the
    *                   partition's, or its number in a checkpoint that predates the placement),
    *                   so only a processor that reads the partition from its rows may ask for it
    */
  def prepare(
      df: DataFrame,
      columns: ResolvedColumns,
      extra: Seq[(String, Column)],
      watermarkDelayMicros: Option[Long],
      roundRobin: Boolean): Prepared = {
    val sorted = arrange(df, columns, extra, watermarkDelayMicros, roundRobin, byTrigger = true)
    val schema = sorted.schema
    val userOutput = InputColumns.userSchema(df, columns)
    val layout = Layout(
      outputWidth = userOutput.size,
      offsetName = columns.offset.map(_.name),
      partitionIndex = schema.fieldIndex(Partition),
      orderIndex = schema.fieldIndex(Order),
      timestampMicrosIndex = schema.fieldIndex(TimestampMicros),
      extraIndex = extra.map { case (name, _) => name -> schema.fieldIndex(name) }.toMap
    )
    val grouped = sorted
      .groupBy(col(Group))
      .as[Int, Row](StateEncoders.groupNumber, Encoders.row(schema))
    Prepared(grouped, layout, userOutput, schema)
  }

  /** The rows [[prepare]] groups, as one DataFrame (the user's columns, then [[Group]],
    * [[Partition]], [[Order]], [[TimestampMicros]]), for code that groups them itself (Python's
    * `transformWithState`); grouping on [[Group]] (the partition number) keeps the arrival order. */
  def arranged(df: DataFrame, columns: ResolvedColumns): DataFrame =
    arrange(df, columns, Nil, None, roundRobin = false, byTrigger = false)

  /** The prepared rows: in a micro-batch sorted by (group, order) after the shuffle; with
    * `byTrigger`, in a real-time query only shuffled (the pipelined shuffle keeps each partition's
    * order, [[CompactInput.prepare]]), each record then reaching the processor in a call of its own.
    * (Python's `transformWithState`, which reads [[arranged]], does not run in real-time mode.) */
  private def arrange(
      df: DataFrame,
      columns: ResolvedColumns,
      extra: Seq[(String, Column)],
      watermarkDelayMicros: Option[Long],
      roundRobin: Boolean,
      byTrigger: Boolean): DataFrame = {
    val input = InputColumns(df, columns, watermarkDelayMicros)
    val tsName = columns.timestamp.map(_.name)
    val userSelected = df.schema.fields.toSeq.map { f =>
      val c = col(quote(f.name))
      if (tsName.contains(f.name)) c.as(f.name, Metadata.empty) else c
    }
    val helpers = Seq(
      input.group.as(Group),
      input.checkedPartition.as(Partition),
      input.order.as(Order),
      input.timestampMicros.as(TimestampMicros))
    def rows(in: DataFrame) = in.select(userSelected ++ helpers ++ extra.map { case (name, c) => c.as(name) }: _*)
    if (!byTrigger) ArrivalOrderSort.partitionAndSort(rows(input.df), Group, Seq(Order), roundRobin)
    else
      ArrivalOrderSort.byTrigger(input.df)(
        in => ArrivalOrderSort.partitionAndSort(rows(in), Group, Seq(Order), roundRobin),
        in => ArrivalOrderSort.partitionAndSort(rows(in), Group, Nil, roundRobin)
      )
  }

  final case class Prepared(
      grouped: KeyValueGroupedDataset[Int, Row],
      layout: Layout,
      userSchema: StructType,
      inputSchema: StructType) {

    /** Schema of a processor's output rows: the user's columns, `extra`, then [[Dropped]]. */
    def outputSchema(extra: StructField*): StructType = Stateful.outputSchema(userSchema.fields.toSeq ++ extra)
  }

  /** Builds a processor's output rows: a record with its user columns, the operator's extra values,
    * and the drop reason (null when forwarded). A dropped record keeps its values (so the output
    * schema, nullability included, is the input's) and is filtered out by [[Stateful.run]]. */
  final class Output(layout: Layout, extraWidth: Int) extends Serializable {
    private val width = layout.outputWidth + extraWidth + 1

    def forward(row: Row, extra: Any*): Row = build(row, extra, null)

    def drop(row: Row, reason: String): Row = build(row, Nil, reason)

    private def build(row: Row, extra: Seq[Any], reason: String): Row = {
      val values = new Array[Any](width)
      var i = 0
      while (i < layout.outputWidth) { values(i) = row.get(i); i += 1 }
      extra.foreach { v => values(i) = v; i += 1 }
      values(width - 1) = reason
      Row.fromSeq(values.toSeq)
    }
  }
}
