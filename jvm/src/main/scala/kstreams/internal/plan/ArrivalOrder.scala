package kstreams
package internal
package plan

import scala.collection.mutable

import org.apache.spark.sql.{Column, DataFrame, Encoders, KeyValueGroupedDataset, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.{ArrivalOrderSort, RowBytes}
import org.apache.spark.sql.streaming.MapState
import org.apache.spark.sql.types._

import kstreams.internal.dedup._
import kstreams.internal.plan.HelperColumns._
import kstreams.internal.plan.HelperColumns.quote

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
      .as[Int, Row](Encoders.scalaInt, Encoders.row(schema))
    Prepared(grouped, layout, userOutput, schema)
  }

  /** The rows [[prepare]] groups, as one DataFrame (the user's columns, then [[Group]],
    * [[Partition]], [[Order]], [[TimestampMicros]]), for code that groups them itself (Python's
    * `transformWithState`); grouping on [[Group]] (the partition number) keeps the arrival order. */
  def arranged(df: DataFrame, columns: ResolvedColumns): DataFrame =
    arrange(df, columns, Nil, None, roundRobin = false, byTrigger = false)

  val Payload = "payload"

  /** Like [[prepare]], for processors that never look at the user's columns: those travel as one
    * byte array ([[Payload]], an UnsafeRow) and the helper columns are plain numbers, so no row is
    * converted to JVM objects. Rows are read as [[CompactRecord]]s. One group per input partition,
    * placed round-robin ([[GroupPlacement]]).
    *
    * Planned for the query's trigger ([[ArrivalOrderSort.byTrigger]]): in a micro-batch each
    * partition's records are sorted after the shuffle ([[compactByPartition]]); in real-time mode
    * they are not sorted (Spark's pipelined shuffle keeps the order in which each source task,
    * one per Kafka partition, sent them) and each is followed by its partition's end-of-batch
    * marker ([[compactRealTime]]). The processor checks the order either way. */
  def prepareCompact(
      df: DataFrame,
      columns: ResolvedColumns,
      keyParts: Seq[Column],
      watermarkDelayMicros: Option[Long]): (KeyValueGroupedDataset[Int, CompactRecord], StructType) = {
    // Both plans refer to the input's columns by name or by attribute (a key part such as df("id")
    // is resolved to its attribute), which the batch the real-time plan is built on keeps.
    val input = InputColumns(df, columns, watermarkDelayMicros)
    def plan(branch: (DataFrame, InputColumns, Seq[Column]) => DataFrame)(in: DataFrame): DataFrame =
      branch(df, input.copy(df = in), keyParts)
    val named = ArrivalOrderSort.byTrigger(input.df)(plan(compactByPartition), plan(compactRealTime))
    (
      named.groupBy(col(Group)).as[Int, CompactRecord](Encoders.scalaInt, Encoders.product[CompactRecord]),
      InputColumns.userSchema(df, columns))
  }

  /** [[prepareCompact]] for the global store of `deduplicate`, spread over `groups` groups by a
    * hash of the dedup key: two shuffles, first by partition (to compute each record's
    * partition stream time in arrival order, see [[SpreadRecord.withStreamTimes]]), then by group
    * (placed round-robin, [[GroupPlacement]]), each group's records in (partition, offset) order,
    * markers after each partition's records. */
  def prepareSpread(
      df: DataFrame,
      columns: ResolvedColumns,
      keyParts: Seq[Column],
      groups: Int,
      watermarkDelayMicros: Option[Long]): (KeyValueGroupedDataset[Int, SpreadRecord], StructType) = {
    val spread = compactByPartition(df, InputColumns(df, columns, watermarkDelayMicros), keyParts)
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
    val sorted =
      ArrivalOrderSort.partitionAndSort(spread.toDF(), "group", Seq("partition", "ordering"), roundRobin = true)
    (
      sorted.groupBy(col("group")).as[Int, SpreadRecord](Encoders.scalaInt, Encoders.product[SpreadRecord]),
      InputColumns.userSchema(df, columns))
  }

  /** The compact columns of [[CompactRecord]] (and [[Group]], the partition), each partition's
    * records in one task in arrival order.
    *
    * Only the grouping and sort columns are computed before the shuffle; the rest (checks, the
    * dedup key's and the payload's encoding) after the sort, so that this per-record work is
    * spread over the state partitions' tasks instead of the input's (often one task per
    * micro-batch), and the shuffle carries each value once. */
  private def compactByPartition(df: DataFrame, input: InputColumns, keyParts: Seq[Column]): DataFrame = {
    val userColumns = df.schema.fields.toSeq.map(f => col(quote(f.name)))
    val sorted = ArrivalOrderSort.partitionAndSort(
      input.df.select(userColumns ++ Seq(input.group.as(Group), input.order.as(Order)): _*),
      Group,
      Seq(Order),
      roundRobin = true)
    sorted.select(col(Group) +: compactColumns(input, col(Order), keyParts, userColumns, realTime = false): _*)
  }

  /** [[compactByPartition]] for a real-time query: the same columns, computed in the source's
    * tasks (there is no sort to wait for, so nothing is gained by moving them), each task's rows
    * followed by one end-of-batch marker per partition it read ([[EndMarkers]]), then shuffled
    * without a sort. */
  private def compactRealTime(df: DataFrame, input: InputColumns, keyParts: Seq[Column]): DataFrame = {
    val userColumns = df.schema.fields.toSeq.map(f => col(quote(f.name)))
    val records = input.df
      .select(input.group.as(Group) +: compactColumns(input, input.order, keyParts, userColumns, realTime = true): _*)
      .as[CompactRecord](Encoders.product[CompactRecord])
      .mapPartitions(EndMarkers.append _)(Encoders.product[CompactRecord])
      .toDF()
    ArrivalOrderSort.partitionAndSort(records, Group, Nil, roundRobin = true)
  }

  /** The columns of [[CompactRecord]], in its order (`ordering`: the record's place in its
    * partition, [[InputColumns.order]] or the column it was computed into). */
  private def compactColumns(
      input: InputColumns,
      ordering: Column,
      keyParts: Seq[Column],
      userColumns: Seq[Column],
      realTime: Boolean): Seq[Column] = Seq(
    input.checkedPartition.as("partition"),
    ordering.as("ordering"),
    input.timestampMicros.as("timestampMicros"),
    coalesce(input.offset.getOrElse(lit(null).cast(LongType)), lit(Long.MinValue)).as("offset"),
    keyParts.map(_.isNull).reduce(_ || _).as("keyNull"),
    RowBytes.encode(keyParts).as("key"),
    RowBytes.encode(userColumns).as(Payload),
    lit(realTime).as("realTime"),
    lit(false).as("endOfBatch")
  )

  /** Decodes [[Payload]] back into the user's columns (with their original types and
    * nullability), followed by the `extra` columns (named). */
  def unpack(df: DataFrame, userSchema: StructType, extra: Column*): DataFrame = {
    val decoded = df.select(RowBytes.decodeNotNull(col(Payload), userSchema).as("r") +: extra: _*)
    decoded.select(col("r.*") +: decoded.columns.toSeq.tail.map(n => col(quote(n))): _*)
  }

  /** The prepared rows: in a micro-batch sorted by (partition, order) after the shuffle; with
    * `byTrigger`, in a real-time query only shuffled (the pipelined shuffle keeps each partition's
    * order, [[prepareCompact]]), each record then reaching the processor in a call of its own.
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
    if (!byTrigger) ArrivalOrderSort.partitionAndSort(rows(input.df), Group, Seq(Partition, Order), roundRobin)
    else
      ArrivalOrderSort.byTrigger(input.df)(
        in => ArrivalOrderSort.partitionAndSort(rows(in), Group, Seq(Partition, Order), roundRobin),
        in => ArrivalOrderSort.partitionAndSort(rows(in), Group, Nil, roundRobin)
      )
  }

  /** Rows of several inputs ("sides" of a per-key operator, sources of a processor DAG) in the
    * order one Kafka Streams task takes them: each input's rows in their own order (`queues`,
    * already sorted), the inputs merged by the timestamp of their next row (`timestampMicros`,
    * Long.MinValue for none), ties to the earlier queue, as a task picks the partition whose head
    * record is oldest. The Python processor runtime ports this rule
    * (`_processor_runtime.arrival_order`). */
  def merge(queues: Seq[Seq[Row]], timestampMicros: Row => Long): Seq[Row] =
    if (queues.size == 1) queues.head
    else {
      val heads = Array.fill(queues.size)(0)
      val out = mutable.ArrayBuffer.empty[Row]
      while (heads.indices.exists(i => heads(i) < queues(i).size)) {
        val next = heads.indices
          .filter(i => heads(i) < queues(i).size)
          .minBy(i => (timestampMicros(queues(i)(heads(i))), i))
        out += queues(next)(heads(next))
        heads(next) += 1
      }
      out.toSeq
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

/** Checks that each partition's rows arrive in offset (or timestamp) order. (Null timestamps and
  * partitions never get here: [[InputColumns]] fails the query on them, naming where.) One per
  * task: in a micro-batch a partition's rows come in one call, in a real-time query one per call,
  * all of a batch in the same task. */
private[kstreams] final class OrderCheck(layout: ArrivalOrder.Layout) {
  private val last = mutable.HashMap.empty[Int, Long]

  def check(row: Row): Unit = {
    val partition = row.getInt(layout.partitionIndex)
    if (!row.isNullAt(layout.orderIndex)) {
      val position = row.getLong(layout.orderIndex)
      last.get(partition) match {
        case Some(previous) if position < previous => throw OrderCheck.outOfOrder(partition, position, previous)
        case _ => last(partition) = position
      }
    }
  }
}

private[kstreams] object OrderCheck {

  /** The one error for a partition whose records reach an operator out of their order (offset, or
    * timestamp without offsets): kstreams sorted them (micro-batch) or read them in order from one
    * source task (real-time), so a planner changed what it relies on, and deciding on would give
    * other results than the spec's. `position` came after `previous`. */
  def outOfOrder(partition: Int, position: Long, previous: Long): IllegalStateException =
    outOfOrder(partition, s"$position after $previous")

  /** [[outOfOrder]] saying in `detail` what came after what. */
  def outOfOrder(partition: Int, detail: String): IllegalStateException =
    new IllegalStateException(
      s"kstreams internal error: partition $partition arrived out of order ($detail), so Spark " +
        "re-shuffled the input after kstreams ordered it. Please report this with the query plan " +
        "(query.explain()).")
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
  * bytes (`keyNull` when any part of the key is null) and the user's columns as an UnsafeRow.
  *
  * @param __kstreams_group the `transformWithState` group ([[HelperColumns.Group]]: the partition,
  *                   before the shuffle; its [[GroupPlacement]] key after it)
  * @param realTime   read by a real-time query: the processor gets it alone, and keeps its
  *                   partition's store open until the partition's end-of-batch marker
  * @param endOfBatch not a record: the marker that follows a partition's last record of a
  *                   real-time batch ([[EndMarkers]]); only `partition` is set
  */
private[kstreams] final case class CompactRecord(
    __kstreams_group: Int,
    partition: Int,
    ordering: Long,
    timestampMicros: Long,
    offset: Long,
    keyNull: Boolean,
    key: Array[Byte],
    payload: Array[Byte],
    realTime: Boolean,
    endOfBatch: Boolean)

/** What a compact processor emits: a forwarded record's payload (reason null, count 1), or the
  * number of records it dropped for a reason (payload null). The field names are
  * [[HelperColumns.Dropped]] and [[HelperColumns.DroppedCount]], which [[Stateful.runCounted]] reads. */
private[kstreams] final case class CompactOutput(
    payload: Array[Byte],
    __kstreams_dropped: String,
    __kstreams_count: Long)
