package kstreams

import java.util.concurrent.atomic.AtomicLong

import org.apache.spark.sql.{Column, DataFrame, Encoders, KeyValueGroupedDataset, Row}
import org.apache.spark.sql.catalyst.plans.logical.EventTimeWatermark
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.ArrivalOrderSort
import org.apache.spark.sql.types._

/** Prepares a DataFrame for a stateful processor that must see every input partition's records in
  * arrival order (spec section 1): micro-batch by micro-batch, and inside one micro-batch by
  * `offset` (or by timestamp when there is no offset column).
  *
  * The rows are hash-partitioned on the processor's grouping column and sorted by (group,
  * partition, offset) *before* `transformWithState`. That is exactly the distribution and a
  * refinement of the ordering the operator requires, so Spark adds no shuffle or sort of its own and
  * each group's iterator arrives in offset order. The processor checks the order as it reads and
  * fails loudly if a future planner ever broke it.
  *
  * The timestamp column is re-derived without its watermark metadata: `transformWithState` in
  * event-time mode would otherwise drop records older than the watermark before the processor saw
  * them, and the spec needs late records forwarded. The query-wide watermark still drives timers.
  */
private[kstreams] object ArrivalOrder {
  val Group = "__kstreams_group"
  val Partition = "__kstreams_partition"
  val Order = "__kstreams_order"
  val TimestampMicros = "__kstreams_ts"

  private val observationIds = new AtomicLong()

  /** Column positions of a prepared row, computed on the driver for the processor. */
  final case class Layout(
      outputWidth: Int,
      timestampName: String,
      partitionName: Option[String],
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
    * @param group     the grouping column (an Int): the partition, or a constant for global state
    * @param extra     named helper columns the processor reads (e.g. the dedup key)
    * @param watermarkDelayMicros watermark added when a streaming input has none
    */
  def prepare(
      df: DataFrame,
      columns: ResolvedColumns,
      group: GroupScope,
      extra: Seq[(String, Column)],
      watermarkDelayMicros: Long): Prepared = {
    val tsName = columns.timestamp.name
    val watermarked =
      if (df.isStreaming && !hasWatermark(df)) {
        df.withWatermark(tsName, s"${watermarkDelayMicros} microseconds")
      } else df

    val checked = columns.names.onNullTimestamp match {
      case NullTimestamps.Fail => watermarked
      case NullTimestamps.Skip =>
        // Skipped records never reach the processor; their count is an observed metric.
        val name = s"kstreams_null_timestamps_${observationIds.incrementAndGet()}"
        watermarked
          .observe(name, count_if(col(quote(tsName)).isNull).as("null_timestamps_skipped"))
          .where(col(quote(tsName)).isNotNull)
    }

    val userColumns = df.schema.fields.toSeq
    val partitionCol = columns.partition match {
      case Some(f) => col(quote(f.name)).cast(IntegerType)
      case None => lit(0)
    }
    val orderCol = columns.offset match {
      case Some(f) => col(quote(f.name)).cast(LongType)
      case None => unix_micros(col(quote(tsName)))
    }
    val groupCol = group match {
      case GroupScope.PerPartition => coalesce(partitionCol, lit(-1))
      case GroupScope.Global => lit(0)
    }
    val selected = userColumns.map { f =>
      val c = col(quote(f.name))
      if (f.name == tsName) c.as(f.name, Metadata.empty) else c
    } ++ Seq(
      groupCol.as(Group),
      partitionCol.as(Partition),
      orderCol.as(Order),
      unix_micros(col(quote(tsName))).as(TimestampMicros)) ++
      extra.map { case (name, c) => c.as(name) }

    val prepared = ArrivalOrderSort.partitionAndSort(
      checked.select(selected: _*), Group, Seq(Partition, Order))

    val schema = prepared.schema
    val layout = Layout(
      outputWidth = userColumns.size,
      timestampName = tsName,
      partitionName = columns.partition.map(_.name),
      offsetName = columns.offset.map(_.name),
      partitionIndex = schema.fieldIndex(Partition),
      orderIndex = schema.fieldIndex(Order),
      timestampMicrosIndex = schema.fieldIndex(TimestampMicros),
      extraIndex = extra.map { case (name, _) => name -> schema.fieldIndex(name) }.toMap)
    val outputSchema = StructType(userColumns.map(f =>
      if (f.name == tsName) f.copy(metadata = Metadata.empty) else f))
    val grouped = prepared
      .groupBy(col(Group))
      .as[Int, Row](Encoders.scalaInt, Encoders.row(schema))
    Prepared(grouped, layout, outputSchema, schema)
  }

  def hasWatermark(df: DataFrame): Boolean =
    df.asInstanceOf[org.apache.spark.sql.classic.Dataset[Row]].queryExecution.logical
      .exists(_.isInstanceOf[EventTimeWatermark])

  def quote(name: String): String = "`" + name.replace("`", "``") + "`"

  final case class Prepared(
      grouped: KeyValueGroupedDataset[Int, Row],
      layout: Layout,
      outputSchema: StructType,
      inputSchema: StructType)
}

/** Whose state a processor keeps together: one input partition's (as a Kafka Streams task), or
  * the whole stream's. */
private[kstreams] sealed trait GroupScope
private[kstreams] object GroupScope {
  case object PerPartition extends GroupScope
  case object Global extends GroupScope
}
