package kstreams
package internal
package dedup

import org.apache.spark.sql.{Column, DataFrame, Encoders, KeyValueGroupedDataset}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.ArrivalOrderSort
import org.apache.spark.sql.types.StructType

import kstreams.internal.plan._

/** The input of `deduplicate`'s global store ([[GlobalDedupProcessor]]): [[CompactInput]]'s
  * records spread over [[SpreadRecord.Groups]] groups by a hash of the dedup key, in two shuffles.
  * The first, by partition, computes each record's partition stream time in arrival order
  * ([[SpreadRecord.withStreamTimes]]); the second, by group (placed round-robin,
  * [[GroupPlacement]]), sorts each group's records by (partition, offset), markers after each
  * partition's records. */
private[kstreams] object SpreadInput {

  /** The spread records grouped by id group, and the user's schema to
    * [[CompactInput.unpack]] the output with. */
  def prepare(
      df: DataFrame,
      columns: ResolvedColumns,
      keyParts: Seq[Column],
      groups: Int,
      watermarkDelayMicros: Option[Long]): (KeyValueGroupedDataset[Int, SpreadRecord], StructType) = {
    val spread = CompactInput
      .byPartition(df, InputColumns(df, columns, watermarkDelayMicros), keyParts)
      .select(
        pmod(hash(col("key")), lit(groups)).as("group"),
        col("partition"),
        col("ordering"),
        col("timestampMicros"),
        lit(Long.MinValue).as("streamTimeMicros"),
        col("offset"),
        col("keyNull"),
        col("key"),
        col(CompactInput.Payload),
        lit(false).as("marker")
      )
      .as[SpreadRecord](Encoders.product[SpreadRecord])
      .mapPartitions(SpreadRecord.withStreamTimes(groups) _)(Encoders.product[SpreadRecord])
    val sorted =
      ArrivalOrderSort.partitionAndSort(spread.toDF(), "group", Seq("partition", "ordering"), roundRobin = true)
    (
      sorted.groupBy(col("group")).as[Int, SpreadRecord](StateEncoders.groupNumber, Encoders.product[SpreadRecord]),
      InputColumns.userSchema(df, columns))
  }
}

/** One record of `deduplicate` as the spread global store reads it ([[GlobalDedupProcessor]]):
  * a [[CompactRecord]] plus the id's hash `group` and `streamTimeMicros`, the largest timestamp of
  * its partition among the micro-batch's records up to and including this one.
  *
  * A *marker* (`marker = true`, no key or payload) tells one group the largest timestamp of one
  * partition in this micro-batch (`timestampMicros`), so that every group knows every partition's
  * stream time at the start of the next one, also when none of that partition's records hashed
  * to it.
  */
private[kstreams] final case class SpreadRecord(
    group: Int,
    partition: Int,
    ordering: Long,
    timestampMicros: Long,
    streamTimeMicros: Long,
    offset: Long,
    keyNull: Boolean,
    key: Array[Byte],
    payload: Array[Byte],
    marker: Boolean)

private[kstreams] object SpreadRecord {

  /** Number of id hash groups of `deduplicate`: the unit of its state, so part of every
    * checkpoint (changing it needs a new checkpoint; the processor checks). 64 groups keep up to
    * 64 tasks busy and cost 64 marker rows per input partition and micro-batch. */
  val Groups = 64

  /** Fills in `streamTimeMicros` of records that arrive by partition in arrival order (one
    * partition's records together), and after each partition's records adds one marker per group
    * with the partition's largest timestamp. Runs in the first of the two shuffles of
    * `deduplicate`: by partition, then by id. */
  def withStreamTimes(groups: Int)(records: Iterator[SpreadRecord]): Iterator[SpreadRecord] = {
    var partition = 0
    var maxMicros = Long.MinValue
    var started = false
    def markers(p: Int, tsMicros: Long): Iterator[SpreadRecord] = Iterator
      .range(0, groups)
      .map(g =>
        SpreadRecord(g, p, Long.MaxValue, tsMicros, tsMicros, Long.MinValue, keyNull = true, null, null, marker = true))
    records.flatMap { r =>
      val before = if (started && r.partition != partition) markers(partition, maxMicros) else Iterator.empty
      if (!started || r.partition != partition) {
        partition = r.partition; maxMicros = Long.MinValue; started = true
      }
      maxMicros = math.max(maxMicros, r.timestampMicros)
      before ++ Iterator.single(r.copy(streamTimeMicros = maxMicros))
    } ++ (if (started) markers(partition, maxMicros) else Iterator.empty)
  }
}
