package kstreams
package internal
package plan

import org.apache.spark.sql.{Column, DataFrame, Encoders, KeyValueGroupedDataset}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.{ArrivalOrderSort, RowBytes}
import org.apache.spark.sql.types._

import kstreams.internal.plan.HelperColumns._
import kstreams.internal.plan.HelperColumns.quote

/** Prepares a DataFrame for an arrival-order processor that never looks at the user's columns
  * (the dedup processors): like [[PartitionInput]], but the user's columns travel as one byte
  * array ([[Payload]], an UnsafeRow) and the helper columns are plain numbers, so no row is
  * converted to JVM objects. Rows are read as [[CompactRecord]]s; [[unpack]] turns the forwarded
  * payloads back into the user's columns. */
private[kstreams] object CompactInput {

  val Payload = "payload"

  /** The input grouped by partition (one group per input partition, placed round-robin,
    * [[GroupPlacement]]), and the user's schema to [[unpack]] the output with.
    *
    * Planned for the query's trigger ([[ArrivalOrderSort.byTrigger]]): in a micro-batch each
    * partition's records are sorted after the shuffle ([[byPartition]]); in real-time mode they
    * are not sorted (Spark's pipelined shuffle keeps the order in which each source task, one per
    * Kafka partition, sent them) and each is followed by its partition's end-of-batch marker
    * ([[realTime]]). The processor checks the order either way. */
  def prepare(
      df: DataFrame,
      columns: ResolvedColumns,
      keyParts: Seq[Column],
      watermarkDelayMicros: Option[Long]): (KeyValueGroupedDataset[Int, CompactRecord], StructType) = {
    // Both plans refer to the input's columns by name or by attribute (a key part such as df("id")
    // is resolved to its attribute), which the batch the real-time plan is built on keeps.
    val input = InputColumns(df, columns, watermarkDelayMicros)
    def plan(branch: (DataFrame, InputColumns, Seq[Column]) => DataFrame)(in: DataFrame): DataFrame =
      branch(df, input.copy(df = in), keyParts)
    val named = ArrivalOrderSort.byTrigger(input.df)(plan(byPartition), plan(realTime))
    (
      named.groupBy(col(Group)).as[Int, CompactRecord](StateEncoders.groupNumber, Encoders.product[CompactRecord]),
      InputColumns.userSchema(df, columns))
  }

  /** The compact columns of [[CompactRecord]] (and [[Group]], the partition), each partition's
    * records in one task in arrival order.
    *
    * Only the grouping and sort columns are computed before the shuffle; the rest (checks, the
    * dedup key's and the payload's encoding) after the sort, so that this per-record work is
    * spread over the state partitions' tasks instead of the input's (often one task per
    * micro-batch), and the shuffle carries each value once. */
  def byPartition(df: DataFrame, input: InputColumns, keyParts: Seq[Column]): DataFrame = {
    val userColumns = df.schema.fields.toSeq.map(f => col(quote(f.name)))
    val sorted = ArrivalOrderSort.partitionAndSort(
      input.df.select(userColumns ++ Seq(input.group.as(Group), input.order.as(Order)): _*),
      Group,
      Seq(Order),
      roundRobin = true)
    // the sort column is the checked offset where the stream has one: checked once, read twice
    val offset = input.offset.map(_ => col(Order))
    sorted.select(col(Group) +: compactColumns(input, col(Order), offset, keyParts, userColumns, realTime = false): _*)
  }

  /** [[byPartition]] for a real-time query: the same columns, computed in the source's tasks (there
    * is no sort to wait for, so nothing is gained by moving them), each task's rows followed by one
    * end-of-batch marker per partition it read ([[EndMarkers]]), then shuffled without a sort. */
  private def realTime(df: DataFrame, input: InputColumns, keyParts: Seq[Column]): DataFrame = {
    val userColumns = df.schema.fields.toSeq.map(f => col(quote(f.name)))
    val records = input.df
      .select(input.group
        .as(Group) +: compactColumns(input, input.order, input.offset, keyParts, userColumns, realTime = true): _*)
      .as[CompactRecord](Encoders.product[CompactRecord])
      .mapPartitions(EndMarkers.append _)(Encoders.product[CompactRecord])
      .toDF()
    ArrivalOrderSort.partitionAndSort(records, Group, Nil, roundRobin = true)
  }

  /** The columns of [[CompactRecord]], in its order (`ordering`: the record's place in its
    * partition, [[InputColumns.order]] or the column it was computed into; `offset`: the checked
    * offset, [[InputColumns.offset]] or a column it was computed into, None without offsets). */
  private def compactColumns(
      input: InputColumns,
      ordering: Column,
      offset: Option[Column],
      keyParts: Seq[Column],
      userColumns: Seq[Column],
      realTime: Boolean): Seq[Column] = Seq(
    input.checkedPartition.as("partition"),
    ordering.as("ordering"),
    input.timestampMicros.as("timestampMicros"),
    coalesce(offset.getOrElse(lit(null).cast(LongType)), lit(Long.MinValue)).as("offset"),
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
  * [[HelperColumns.Dropped]] and [[HelperColumns.DroppedCount]], which [[Stateful.runCountedAll]]
  * reads. */
private[kstreams] final case class CompactOutput(
    payload: Array[Byte],
    __kstreams_dropped: String,
    __kstreams_count: Long)
