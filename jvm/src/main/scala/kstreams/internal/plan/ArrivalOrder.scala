package kstreams
package internal
package plan

import scala.collection.mutable

import org.apache.spark.sql.{Column, DataFrame, Encoders, KeyValueGroupedDataset, Row}
import org.apache.spark.sql.catalyst.plans.logical.{CollectMetrics, EventTimeWatermark}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.{ArrivalOrderSort, RowBytes}
import org.apache.spark.sql.streaming.MapState
import org.apache.spark.sql.types._

import kstreams.internal.dedup._

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

  /** Output column saying why a row was dropped (null: forwarded); see [[finish]]. */
  val Dropped = "__kstreams_dropped"
  private val Count = "__kstreams_count"

  /** Column positions of a prepared row, computed on the driver for the processor. */
  final case class Layout(
      outputWidth: Int,
      timestampName: Option[String],
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
    * @param extra     named helper columns the processor reads (e.g. the dedup key)
    * @param watermarkDelayMicros watermark added when a streaming input has none
    */
  def prepare(
      df: DataFrame,
      columns: ResolvedColumns,
      extra: Seq[(String, Column)],
      watermarkDelayMicros: Option[Long]): Prepared = {
    val (sorted, userOutput) = arrange(df, columns, extra, watermarkDelayMicros)
    val schema = sorted.schema
    val layout = Layout(
      outputWidth = userOutput.size,
      timestampName = columns.timestamp.map(_.name),
      partitionName = columns.partition.map(_.name),
      offsetName = columns.offset.map(_.name),
      partitionIndex = schema.fieldIndex(Partition),
      orderIndex = schema.fieldIndex(Order),
      timestampMicrosIndex = schema.fieldIndex(TimestampMicros),
      extraIndex = extra.map { case (name, _) => name -> schema.fieldIndex(name) }.toMap
    )
    val grouped = sorted
      .groupBy(col(Group))
      .as[Int, Row](Encoders.scalaInt, Encoders.row(schema))
    Prepared(grouped, layout, userOutput, schema)
  }

  /** The rows [[prepare]] groups, as one DataFrame (the user's columns, then [[Group]],
    * [[Partition]], [[Order]], [[TimestampMicros]]), for code that groups them itself (Python's
    * `transformWithState`); grouping on [[Group]] keeps the arrival order. */
  def arranged(df: DataFrame, columns: ResolvedColumns): DataFrame =
    arrange(df, columns, Nil, None)._1

  val Payload = "payload"

  /** Like [[prepare]], for processors that never look at the user's columns: those travel as one
    * byte array ([[Payload]], an UnsafeRow) and the helper columns are plain numbers, so no row is
    * converted to JVM objects. Rows are read as [[CompactRecord]]s; null timestamps and partitions
    * fail in Catalyst (`raise_error`) with the same messages. One group per input partition. */
  def prepareCompact(
      df: DataFrame,
      columns: ResolvedColumns,
      keyParts: Seq[Column],
      watermarkDelayMicros: Option[Long]): (KeyValueGroupedDataset[Int, CompactRecord], StructType) = {
    val named = compactByPartition(df, columns, keyParts, watermarkDelayMicros)
    (
      named.groupBy(col(Group)).as[Int, CompactRecord](Encoders.scalaInt, Encoders.product[CompactRecord]),
      userSchema(df, columns))
  }

  /** [[prepareCompact]] for the global store of `deduplicate`, spread over `groups` groups by a
    * hash of the dedup key: two shuffles, first by partition (to compute each record's
    * partition stream time in arrival order, see [[SpreadRecord.withStreamTimes]]), then by group,
    * each group's records in (partition, offset) order, markers after each partition's records. */
  def prepareSpread(
      df: DataFrame,
      columns: ResolvedColumns,
      keyParts: Seq[Column],
      groups: Int,
      watermarkDelayMicros: Option[Long]): (KeyValueGroupedDataset[Int, SpreadRecord], StructType) = {
    val spread = compactByPartition(df, columns, keyParts, watermarkDelayMicros)
      .select(
        pmod(hash(col("key")), lit(groups)).as("group"),
        col("partition"),
        col("ordering"),
        col("timestampMicros"),
        lit(Long.MinValue).as("streamTimeMicros"),
        col("offset"),
        col("keyNull"),
        col("key"),
        col(Payload),
        lit(false).as("marker")
      )
      .as[SpreadRecord](Encoders.product[SpreadRecord])
      .mapPartitions(SpreadRecord.withStreamTimes(groups) _)(Encoders.product[SpreadRecord])
    val sorted = ArrivalOrderSort.partitionAndSort(spread.toDF(), "group", Seq("partition", "ordering"))
    (
      sorted.groupBy(col("group")).as[Int, SpreadRecord](Encoders.scalaInt, Encoders.product[SpreadRecord]),
      userSchema(df, columns))
  }

  /** The compact columns of [[CompactRecord]] (and [[Group]], the partition), each partition's
    * records in one task in arrival order.
    *
    * Only the grouping and sort columns are computed before the shuffle; the rest (checks, the
    * dedup key's and the payload's encoding) after the sort, so that this per-record work is
    * spread over the state partitions' tasks instead of the input's (often one task per
    * micro-batch), and the shuffle carries each value once. */
  private def compactByPartition(
      df: DataFrame,
      columns: ResolvedColumns,
      keyParts: Seq[Column],
      watermarkDelayMicros: Option[Long]): DataFrame = {
    val checked = watermarkAndCheck(df, columns, watermarkDelayMicros)
    val partitionCol = partitionColumn(columns)
    val offsetCol = offsetColumn(columns)
    val tsMicros = columns.timestamp
      .map(f => timestampMicros(f.name, partitionCol, offsetCol, failOnNull = true))
      .getOrElse(lit(null).cast(LongType))
    val userColumns = df.schema.fields.toSeq.map(f => col(quote(f.name)))
    val sorted = ArrivalOrderSort.partitionAndSort(
      checked.select(
        userColumns ++ Seq(coalesce(partitionCol, lit(-1)).as(Group), offsetCol.getOrElse(tsMicros).as(Order)): _*),
      Group,
      Seq(Order))
    val checkedPartition = when(
      partitionCol.isNull,
      raise_error(
        concat(
          lit(s"null partition in column '${columns.partition.map(_.name).getOrElse("")}' at "),
          whereColumn(partitionCol, offsetCol)))
    ).otherwise(partitionCol)
    sorted.select(
      col(Group),
      checkedPartition.as("partition"),
      col(Order).as("ordering"),
      tsMicros.as("timestampMicros"),
      coalesce(offsetCol.getOrElse(lit(null).cast(LongType)), lit(Long.MinValue)).as("offset"),
      keyParts.map(_.isNull).reduce(_ || _).as("keyNull"),
      RowBytes.encode(keyParts).as("key"),
      RowBytes.encode(userColumns).as(Payload)
    )
  }

  /** Decodes [[Payload]] back into the user's columns (with their original types and nullability). */
  def unpack(df: DataFrame, userSchema: StructType): DataFrame =
    df.select(RowBytes.decodeNotNull(col(Payload), userSchema).as("r")).select("r.*")

  /** `df` with the watermark the operator adds when it has none, and without the records of null
    * timestamp when those are to be skipped (counted in an observed metric). */
  private def watermarkAndCheck(
      df: DataFrame,
      columns: ResolvedColumns,
      watermarkDelayMicros: Option[Long]): DataFrame = {
    val tsName = columns.timestamp.map(_.name)
    val watermarked = (watermarkDelayMicros, tsName) match {
      case (Some(delay), Some(ts)) if df.isStreaming && !hasWatermark(df) =>
        df.withWatermark(ts, s"$delay microseconds")
      case _ => df
    }
    (columns.names.onNullTimestamp, tsName) match {
      case (_, None) | (NullTimestamps.Fail, _) => watermarked
      case (NullTimestamps.Skip, Some(tsName)) =>
        // Skipped records never reach the processor; their count is an observed metric.
        val name = observationName(watermarked, "kstreams_null_timestamps")
        watermarked
          .observe(name, count_if(col(quote(tsName)).isNull).as("null_timestamps_skipped"))
          .where(col(quote(tsName)).isNotNull)
    }
  }

  private def partitionColumn(columns: ResolvedColumns): Column = columns.partition match {
    case Some(f) => col(quote(f.name)).cast(IntegerType)
    case None => lit(0)
  }

  private def offsetColumn(columns: ResolvedColumns): Option[Column] =
    columns.offset.map(f => col(quote(f.name)).cast(LongType))

  /** The user's schema as operators return it: the timestamp column without watermark metadata. */
  private def userSchema(df: DataFrame, columns: ResolvedColumns): StructType =
    StructType(df.schema.fields.map(f =>
      if (columns.timestamp.exists(_.name == f.name)) f.copy(metadata = Metadata.empty) else f))

  private def arrange(
      df: DataFrame,
      columns: ResolvedColumns,
      extra: Seq[(String, Column)],
      watermarkDelayMicros: Option[Long]): (DataFrame, StructType) = {
    val tsName = columns.timestamp.map(_.name)
    val checked = watermarkAndCheck(df, columns, watermarkDelayMicros)
    val partitionCol = partitionColumn(columns)
    val offsetCol = offsetColumn(columns)
    val tsMicros = tsName.map(name => unix_micros(col(quote(name)))).getOrElse(lit(null).cast(LongType))
    val groupCol = coalesce(partitionCol, lit(-1)) // one group per input partition, as a Kafka Streams task
    val userSelected = df.schema.fields.toSeq.map { f =>
      val c = col(quote(f.name))
      if (tsName.contains(f.name)) c.as(f.name, Metadata.empty) else c
    }
    val helpers = Seq(
      groupCol.as(Group),
      partitionCol.as(Partition),
      offsetCol.getOrElse(tsMicros).as(Order),
      tsMicros.as(TimestampMicros))
    val sorted = ArrivalOrderSort.partitionAndSort(
      checked.select(userSelected ++ helpers ++ extra.map { case (name, c) => c.as(name) }: _*),
      Group,
      Seq(Partition, Order))
    (sorted, userSchema(df, columns))
  }

  /** `partition 3, offset 42` as a column, for errors raised inside Catalyst. */
  private def whereColumn(partition: Column, offset: Option[Column]): Column =
    concat(
      lit("partition "),
      coalesce(partition.cast(StringType), lit("null")),
      lit(", offset "),
      offset
        .map(o => coalesce(o.cast(StringType), lit("null")))
        .getOrElse(lit("n/a (no offset column)"))
    )

  /** The timestamp column `name` in microseconds; with `failOnNull`, a null fails the query with an
    * error naming the column, partition and offset (spec section 1). */
  def timestampMicros(name: String, partition: Column, offset: Option[Column], failOnNull: Boolean): Column =
    if (!failOnNull) unix_micros(col(quote(name)))
    else
      when(
        col(quote(name)).isNull,
        raise_error(
          concat(
            lit(s"null timestamp in column '$name' at "),
            whereColumn(partition, offset),
            lit("; fix the producer, or pass on_null_timestamp='skip' (Scala: NullTimestamps.Skip) " +
              "to skip and count such records")
          ))
      )
        .otherwise(unix_micros(col(quote(name))))

  /** Counts what the processor forwarded and dropped (by reason) as the observed metric `name` of
    * the query progress, then keeps the forwarded rows only and drops helper columns.
    *
    * Processors emit a marker row (all nulls but [[Dropped]]) for each record they drop, so the
    * counts are exact in every micro-batch and visible in `lastProgress.observedMetrics`.
    */
  def finish(processed: DataFrame, name: String, reasons: Seq[String]): DataFrame = {
    val dropped = col(Dropped)
    val counts = count_if(dropped.isNull).as("forwarded") +:
      reasons.map(r => count_if(dropped === lit(r)).as(r))
    processed
      .observe(observationName(processed, name), counts.head, counts.tail: _*)
      .where(dropped.isNull)
      .drop(Dropped)
  }

  /** [[finish]] for compact processors, which emit one count per drop reason instead of a marker
    * row per dropped record ([[CompactOutput]]). */
  def finishCounted(processed: DataFrame, name: String, reasons: Seq[String]): DataFrame = {
    val dropped = col(Dropped)
    val counts = count_if(dropped.isNull).as("forwarded") +: reasons.map(r =>
      coalesce(sum(when(dropped === lit(r), col(Count))), lit(0L)).as(r))
    processed
      .observe(observationName(processed, name), counts.head, counts.tail: _*)
      .where(dropped.isNull)
      .drop(Dropped, Count)
  }

  /** `base`, or `base_2`, `base_3`... if the plan already observes under that name: names stay the
    * same when the same code restarts a query, and never clash inside one query. */
  private def observationName(df: DataFrame, base: String): String = {
    val taken = df
      .asInstanceOf[org.apache.spark.sql.classic.Dataset[Row]]
      .queryExecution
      .logical
      .collect { case m: CollectMetrics => m.name }
      .toSet
    (Iterator.single(base) ++ Iterator.from(2).map(i => s"${base}_$i")).find(!taken(_)).get
  }

  def hasWatermark(df: DataFrame): Boolean =
    df.asInstanceOf[org.apache.spark.sql.classic.Dataset[Row]]
      .queryExecution
      .logical
      .exists(_.isInstanceOf[EventTimeWatermark])

  def quote(name: String): String = "`" + name.replace("`", "``") + "`"

  final case class Prepared(
      grouped: KeyValueGroupedDataset[Int, Row],
      layout: Layout,
      userSchema: StructType,
      inputSchema: StructType) {

    /** Schema of a processor's output rows: the user's columns, `extra`, then [[Dropped]]. */
    def outputSchema(extra: StructField*): StructType =
      StructType(userSchema.fields ++ extra :+ StructField(Dropped, StringType))
  }

  /** Builds a processor's output rows: a record with its user columns, the operator's extra values,
    * and the drop reason (null when forwarded). A dropped record keeps its values (so the output
    * schema, nullability included, is the input's) and is filtered out by [[finish]]. */
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

  /** Names of drop reasons, which are also the observed metric names. */
  object Reasons {
    val Duplicate = "duplicates_dropped"
    val Late = "late_dropped"
  }
}

/** Checks that each partition's rows arrive in offset (or timestamp) order and that the fields the
  * spec needs are present, naming the partition and offset when they are not. */
private[kstreams] final class OrderCheck(layout: ArrivalOrder.Layout, timestampRequired: Boolean = true) {
  private val last = mutable.HashMap.empty[Int, Long]

  def check(row: Row): Unit = {
    if (timestampRequired && layout.timestampName.isDefined &&
      row.isNullAt(layout.timestampMicrosIndex))
      throw new KStreamsException(
        s"null timestamp in column '${layout.timestampName.get}' at ${layout.where(row)}; " +
          "fix the producer, or pass on_null_timestamp='skip' (Scala: NullTimestamps.Skip) " +
          "to skip and count such records")
    if (row.isNullAt(layout.partitionIndex))
      throw new KStreamsException(
        s"null partition in column '${layout.partitionName.getOrElse("")}' at ${layout.where(row)}")
    val partition = row.getInt(layout.partitionIndex)
    if (!row.isNullAt(layout.orderIndex)) {
      val position = row.getLong(layout.orderIndex)
      last.get(partition) match {
        case Some(previous) if position < previous =>
          throw new IllegalStateException(
            s"kstreams internal error: partition $partition arrived out of order " +
              s"($position after $previous), so Spark re-shuffled the input after kstreams sorted " +
              "it. Please report this with the query plan (query.explain()).")
        case _ => last(partition) = position
      }
    }
  }
}

/** Stream time per input partition (largest timestamp seen, micros), read from state once per
  * group and written back when the group's rows are done. */
private[kstreams] final class StreamTimes(state: MapState[Int, Long]) {
  private val times = mutable.HashMap.empty[Int, Long]
  private val changed = mutable.HashSet.empty[Int]

  /** Stream time of `partition` so far (Long.MinValue before its first record). */
  def current(partition: Int): Long =
    times.getOrElseUpdate(partition, if (state.containsKey(partition)) state.getValue(partition) else Long.MinValue)

  def advance(partition: Int, ts: Long): Long = {
    val before = current(partition)
    if (ts > before) { times(partition) = ts; changed += partition; ts }
    else before
  }

  def flush(): Unit = changed.foreach(p => state.updateValue(p, times(p)))
}

/** One record as a compact processor reads it: where it came from, its time, its dedup key as
  * bytes (`keyNull` when any part of the key is null) and the user's columns as an UnsafeRow. */
final case class CompactRecord(
    partition: Int,
    ordering: Long,
    timestampMicros: Long,
    offset: Long,
    keyNull: Boolean,
    key: Array[Byte],
    payload: Array[Byte])

/** What a compact processor emits: a forwarded record's payload (reason null, count 1), or the
  * number of records it dropped for a reason (payload null). */
final case class CompactOutput(payload: Array[Byte], __kstreams_dropped: String, __kstreams_count: Long)
