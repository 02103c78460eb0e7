package kstreams
package internal
package dedup

import org.apache.spark.sql.{Column, DataFrame, KeyValueGroupedDataset}
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types.StructType

import kstreams.internal.plan._
import kstreams.internal.state.PartitionClocks

/** The KIP-655 deduplication operators (spec section 2): `deduplicateByKey`,
  * `deduplicateByKeyValue` and `deduplicate` differ only in the dedup key and in whether state is
  * scoped to the input partition or global. Per-partition state uses the time-bucketed
  * [[PerPartitionDedupProcessor]]; the global store of `deduplicate`, where a purge by one partition's
  * stream time must be seen by the others, uses [[GlobalDedupProcessor]], spread over id hash
  * groups, whose log of writes and tombstones survives entries replaced by older ones.
  */
private[kstreams] object Deduplicate {

  /** Plans the operator on `df`; `parts` are the columns that together form the dedup key. */
  def apply(
      df: DataFrame,
      columns: StreamColumns,
      parts: Seq[(String, Column)],
      scope: DedupScope,
      intervalMicros: Long,
      lateRecords: LateRecords,
      metricName: String): (DataFrame, Option[DataFrame]) = {
    val resolved = columns.resolve(df)
    // each part analyzed once: its type is checked and recorded for reading the state back
    val stateTypes = StructType(parts.map { case (name, c) => df.select(c).schema.head.copy(name = name) })
    stateTypes.foreach(f => StreamColumns.checkKeyType(s"dedup key part '${f.name}'", f.dataType))
    val descriptor =
      parts
        .foldLeft(OperatorDescriptor.arrivalOrder(metricName, resolved).interval("interval", intervalMicros)) {
          case (d, (name, c)) => d.expression(name, c)
        }
        .withStateTypes(stateTypes)
    val settings = DedupSettings(
      intervalMicros,
      hasOffset = resolved.offset.isDefined,
      useTimers = df.isStreaming,
      memorySetting = DedupCaches.memorySetting(df.sparkSession),
      lateRecords,
      idleMs = PartitionClocks.idleTimeoutMs(df.sparkSession),
      newStateLayout = PerPartitionDedupProcessor.newStateLayout(df.sparkSession)
    )
    val keyParts = parts.map(_._2)
    // both stores judge entries of another interval themselves (the manual, "Operating a query"):
    // the per-partition one deletes what died, the global one marks it per partition
    val restartable = descriptor.mayChangeOnRestart("interval")
    scope match {
      case DedupScope.PerPartition => // state per input partition, in the time-bucketed store
        val (grouped, userSchema) = CompactInput.prepare(df, resolved, keyParts, Some(intervalMicros))
        run(df, grouped, new PerPartitionDedupProcessor(settings), restartable, userSchema, lateRecords)
      case DedupScope.Global => // one store over all partitions, spread over id hash groups
        val (grouped, userSchema) =
          SpreadInput.prepare(df, resolved, keyParts, SpreadRecord.Groups, Some(intervalMicros))
        run(df, grouped, new GlobalDedupProcessor(settings), restartable, userSchema, lateRecords)
    }
  }

  /** Runs either dedup processor over its prepared input and unpacks the forwarded records into
    * the user's schema, counting duplicates (and late records, unless forwarded) under
    * the descriptor's metric; with [[LateRecords.SideOutput]], also the forwarded and the late records in
    * one DataFrame, with [[LateRecords.ReasonColumn]] "late" for the late ones (null for the
    * others): [[KStream.withSideOutput]]. */
  private def run[T](
      df: DataFrame,
      grouped: KeyValueGroupedDataset[Int, T],
      processor: StatefulProcessor[Int, T, CompactOutput],
      descriptor: OperatorDescriptor,
      userSchema: StructType,
      lateRecords: LateRecords): (DataFrame, Option[DataFrame]) = {
    val lateReasons = lateRecords match {
      case LateRecords.Forward => Nil
      case LateRecords.Drop => Seq(DropReasons.Late)
      case LateRecords.SideOutput => Seq(DropReasons.LateSideOutput)
    }
    val all = Stateful.runCountedAll(
      grouped,
      processor,
      descriptor,
      Stateful.eventTime(df.isStreaming),
      DropReasons.Duplicate +: lateReasons)
    val forwarded = CompactInput.unpack(Stateful.forwardedOnly(all), userSchema)
    val withSideOutput =
      if (lateRecords != LateRecords.SideOutput) None
      else
        Some(CompactInput.unpack(Stateful.forwardedOrRouted(all), userSchema, Stateful.sideOutputReason(LateReason)))
    (forwarded, withSideOutput)
  }

  /** The side output's reason for a record older than `streamTime - interval` (spec section 2). */
  val LateReason = "late"
}

/** What a dedup processor is built with, on the driver: its interval; whether the input has
  * offsets (a record delivered again is known by its offset); whether the DataFrame is streaming
  * (maps kept between micro-batches, the sweep timer); the memory setting
  * ([[DedupCaches.MemoryConf]]); the late-record policy; the partition idle timeout. */
private[kstreams] final case class DedupSettings(
    intervalMicros: Long,
    hasOffset: Boolean,
    useTimers: Boolean,
    memorySetting: Long,
    lateRecords: LateRecords,
    idleMs: Long,
    newStateLayout: Int)

/** Whose records a dedup judges together: one input partition's (`deduplicateByKey`,
  * `deduplicateByKeyValue`, as a Kafka Streams task's store), or the whole stream's
  * (`deduplicate`, spec section 2). */
private[kstreams] sealed trait DedupScope
private[kstreams] object DedupScope {
  case object PerPartition extends DedupScope
  case object Global extends DedupScope
}
