package kstreams

import org.apache.spark.sql.{Column, DataFrame, Encoders, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

/** The KIP-655 deduplication operators (spec section 2): `deduplicateByKey`,
  * `deduplicateByKeyValue` and `deduplicate` differ only in the dedup key and in whether state is
  * scoped to the input partition or global. Per-partition state uses the time-bucketed
  * [[BucketedDedupProcessor]]; the global store of `deduplicate`, where a purge by one partition's
  * stream time must be seen by the others, uses [[DeduplicateProcessor]] with one entry per id.
  */
private[kstreams] object Deduplicate {
  val DedupKey = "__kstreams_dedup_key"

  /** Plans the operator on `df`; `parts` are the columns that together form the dedup key. */
  def apply(
      df: DataFrame,
      columns: StreamColumns,
      parts: Seq[(String, Column)],
      scope: GroupScope,
      intervalMicros: Long,
      metricName: String): DataFrame = {
    Sessions.requireStateStore(df)
    val resolved = columns.resolve(df)
    parts.foreach { case (name, c) =>
      StreamColumns.checkKeyType(s"dedup key part '$name'", df.select(c).schema.head.dataType) }
    scope match {
      case GroupScope.PerPartition => perPartition(df, resolved, parts, intervalMicros, metricName)
      case GroupScope.Global => global(df, resolved, parts, intervalMicros, metricName)
    }
  }

  /** `deduplicate`: one group for the whole stream, one state row per id. */
  private def global(
      df: DataFrame,
      resolved: ResolvedColumns,
      parts: Seq[(String, Column)],
      intervalMicros: Long,
      metricName: String): DataFrame = {
    val keyStruct = struct(parts.map { case (name, c) => c.as(name) }: _*)
    val prepared = ArrivalOrder.prepare(df, resolved, GroupScope.Global, Seq(DedupKey -> keyStruct),
      watermarkDelayMicros = Some(intervalMicros))
    val keySchema = prepared.inputSchema(DedupKey).dataType.asInstanceOf[StructType]
    val processor = new DeduplicateProcessor(
      intervalMicros, prepared.layout, prepared.layout.extraIndex(DedupKey), keySchema,
      useTimers = df.isStreaming)
    val timeMode = if (df.isStreaming) TimeMode.EventTime() else TimeMode.None()
    val processed = prepared.grouped.transformWithState(processor, timeMode, OutputMode.Append())(
      Encoders.row(prepared.outputSchema()))
    ArrivalOrder.finish(processed, metricName, Seq(ArrivalOrder.Reasons.Duplicate))
  }

  /** By-key and by-key-value: state per input partition, in the time-bucketed compact processor. */
  private def perPartition(
      df: DataFrame,
      resolved: ResolvedColumns,
      parts: Seq[(String, Column)],
      intervalMicros: Long,
      metricName: String): DataFrame = {
    val (grouped, userSchema) = ArrivalOrder.prepareCompact(
      df, resolved, GroupScope.PerPartition, parts.map(_._2), Some(intervalMicros))
    val processor = new BucketedDedupProcessor(intervalMicros, hasOffset = resolved.offset.isDefined,
      useTimers = df.isStreaming, memorySetting = DedupCaches.memorySetting(df.sparkSession))
    val timeMode = if (df.isStreaming) TimeMode.EventTime() else TimeMode.None()
    val processed = grouped.transformWithState(processor, timeMode, OutputMode.Append())(
      Encoders.product[CompactOutput]).toDF()
    ArrivalOrder.unpack(
      ArrivalOrder.finishCounted(processed, metricName, Seq(ArrivalOrder.Reasons.Duplicate)), userSchema)
  }
}

/** What the dedup store keeps for a dedup key: the forwarded record's timestamp and position. */
final case class StoredRecord(timestampMicros: Long, partition: Int, offset: Long)

/** Runs the spec's dedup rule over one group's records in arrival order (used for the global
  * store of `deduplicate`).
  *
  * State (all in the RocksDB state store, so it survives restarts):
  *  - `store`: dedup key -> [[StoredRecord]] of the record that was forwarded;
  *  - `streamTimes`: input partition -> its stream time (largest timestamp seen, micros);
  *  - the [[Sweeper]]'s one pending event-time timer of this group.
  *
  * Eviction is one timer per group, not per key: when the watermark reaches it, the processor
  * sweeps out entries that no future record can see as live (`ts < max(streamTime, watermark) -
  * interval`) and re-arms. Results never depend on when sweeps run, since
  * a dead entry is also ignored (and purged) when it is read.
  */
private[kstreams] final class DeduplicateProcessor(
    intervalMicros: Long,
    layout: ArrivalOrder.Layout,
    dedupKeyIndex: Int,
    dedupKeySchema: StructType,
    useTimers: Boolean)
    extends StatefulProcessor[Int, Row, Row] {

  private val NoOffset = Long.MinValue
  private val output = new ArrivalOrder.Output(layout, extraWidth = 0)

  @transient private var store: MapState[Row, StoredRecord] = _
  @transient private var streamTimes: MapState[Int, Long] = _
  @transient private var sweeper: Sweeper = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    store = getHandle.getMapState[Row, StoredRecord](
      "store", Encoders.row(dedupKeySchema), Encoders.product[StoredRecord], TTLConfig.NONE)
    streamTimes = getHandle.getMapState[Int, Long](
      "streamTimes", Encoders.scalaInt, Encoders.scalaLong, TTLConfig.NONE)
    sweeper = new Sweeper(getHandle, intervalMicros)
  }

  override def handleInputRows(
      group: Int, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val times = new StreamTimes(streamTimes)
    val order = new OrderCheck(layout)
    val results = rows.map { row =>
      order.check(row)
      if (shouldForward(row, times)) output.forward(row)
      else output.drop(row, ArrivalOrder.Reasons.Duplicate)
    }
    results ++ {
      times.flush()
      if (useTimers) sweeper.ensureArmed(timerValues)
      Iterator.empty
    }
  }

  /** The spec's rule for one record; updates stream time and the store. */
  private def shouldForward(row: Row, times: StreamTimes): Boolean = {
    val partition = row.getInt(layout.partitionIndex)
    val ts = row.getLong(layout.timestampMicrosIndex)
    val streamTime = times.advance(partition, ts)
    val key = row.getStruct(dedupKeyIndex)
    if (anyNull(key)) return true // null dedup key: forward, store nothing

    val offset = if (layout.offsetName.isEmpty || row.isNullAt(layout.orderIndex)) NoOffset
      else row.getLong(layout.orderIndex)
    val liveFrom = streamTime - intervalMicros
    val late = ts < liveFrom
    val entry = store.getValue(key)
    val live = entry != null && entry.timestampMicros >= liveFrom
    if (live && math.abs(entry.timestampMicros - ts) <= intervalMicros) {
      // A duplicate; the same record re-delivered after a failure is forwarded again.
      return offset != NoOffset && entry.offset == offset && entry.partition == partition
    }
    if (!late) store.updateValue(key, StoredRecord(ts, partition, offset))
    else if (entry != null && !live) store.removeKey(key)
    true
  }

  private def anyNull(key: Row): Boolean = {
    var i = 0
    while (i < key.length) { if (key.isNullAt(i)) return true; i += 1 }
    false
  }

  override def handleExpiredTimer(
      group: Int, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo): Iterator[Row] = {
    sweeper.fired(timerValues, streamTimes) { streamTime =>
      val evictBelow = streamTime - intervalMicros
      val dead = store.iterator().collect { case (k, v) if v.timestampMicros < evictBelow => k }.toVector
      dead.foreach(store.removeKey)
      store.exists()
    }
    Iterator.empty
  }
}
