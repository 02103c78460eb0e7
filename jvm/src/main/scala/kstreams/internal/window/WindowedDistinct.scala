package kstreams
package internal
package window

import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

import kstreams.internal.plan._
import kstreams.internal.state._

/** `groupByKey.windowedBy(W).distinct()` (spec section 3): the first record of each (key, window)
  * is forwarded with a `window` column; later records of that window are dropped as duplicates,
  * records of closed windows as late. State is per input partition, like a Kafka Streams task's.
  */
private[kstreams] object WindowedDistinct {
  val Key = HelperColumns.WindowKey
  val Start = HelperColumns.WindowStart
  val End = HelperColumns.WindowEnd
  private val extraOutput = Seq(StructField(Start, LongType), StructField(End, LongType))

  /** The side output's reason for a record of a closed window (spec section 3). */
  val WindowClosedReason = "window closed"

  def tumbling(
      df: DataFrame,
      columns: StreamColumns,
      windows: TimeWindows,
      lateRecords: LateRecords): (DataFrame, Option[DataFrame]) =
    run(
      df,
      columns,
      windows.graceMicros + windows.sizeMicros,
      "kstreams_windowed_distinct",
      lateRecords,
      _.windows(windows).mayChangeOnRestart("grace"),
      new TumblingDistinctProcessor(_, _, windows, _, _, _)
    )

  def session(
      df: DataFrame,
      columns: StreamColumns,
      windows: SessionWindows,
      lateRecords: LateRecords): (DataFrame, Option[DataFrame]) =
    run(
      df,
      columns,
      windows.graceMicros + windows.gapMicros,
      "kstreams_session_distinct",
      lateRecords,
      _.windows(windows).mayChangeOnRestart("grace"),
      new SessionDistinctProcessor(_, _, windows, _, _, _)
    )

  /** The result, and with [[LateRecords.SideOutput]] the result with the records of closed windows
    * (window null, [[LateRecords.ReasonColumn]] [[WindowClosedReason]]). */
  private def run(
      df: DataFrame,
      columns: StreamColumns,
      watermarkDelayMicros: Long,
      metricName: String,
      lateRecords: LateRecords,
      windowSettings: OperatorDescriptor => OperatorDescriptor,
      processor: (PartitionInput.Layout, StructType, Boolean, String, Long) => StatefulProcessor[Int, Row, Row])
      : (DataFrame, Option[DataFrame]) = {
    // a closed window's result is final: its late records can be dropped or routed, not forwarded
    val lateReason = lateRecords match {
      case LateRecords.Drop => DropReasons.Late
      case LateRecords.SideOutput => DropReasons.LateSideOutput
      case LateRecords.Forward =>
        throw new KStreamsException(
          "windowed distinct cannot forward a record of a closed window (its window's first record " +
            "was decided): late_records must be 'drop' (the default) or 'side_output'")
    }
    val key = columns.keyField(df)
    val resolved = columns.resolve(df)
    val prepared = PartitionInput.prepare(
      df,
      resolved,
      Seq(Key -> struct(col(HelperColumns.quote(key.name)).as("key"))),
      watermarkDelayMicros = Some(watermarkDelayMicros),
      roundRobin = true)
    val keySchema = prepared.inputSchema(Key).dataType.asInstanceOf[StructType]
    val window = when(col(Start).isNull, lit(null))
      .otherwise(struct(timestamp_micros(col(Start)).as("start"), timestamp_micros(col(End)).as("end")))
    val all = Stateful.runAll(
      prepared.grouped,
      processor(prepared.layout, keySchema, df.isStreaming, lateReason, PartitionClocks.idleTimeoutMs(df.sparkSession)),
      windowSettings(OperatorDescriptor.arrivalOrder(metricName, resolved))
        .column("key", Some(key.name)),
      Stateful.eventTime(df.isStreaming),
      prepared.outputSchema(extraOutput: _*),
      Seq(DropReasons.Duplicate, lateReason)
    )
    def withWindow(rows: DataFrame) = rows.withColumn("window", window).drop(Start, End)
    val withSideOutput =
      if (lateRecords != LateRecords.SideOutput) None
      else {
        val rows = Stateful.forwardedOrRouted(all)
        Some(
          withWindow(rows)
            .select(col("*"), Stateful.sideOutputReason(WindowClosedReason))
            .drop(HelperColumns.Dropped))
      }
    (withWindow(Stateful.forwardedOnly(all)), withSideOutput)
  }
}

/** Shared parts of the windowed processors: stream time, the sweep timer, output rows. State is
  * read and written per record (the stream time at the end of each call), so they run in a
  * real-time query as in a micro-batch, there one record per call. */
private[kstreams] abstract class WindowProcessor(
    layout: PartitionInput.Layout,
    retainMicros: Long,
    useTimers: Boolean,
    protected val lateReason: String,
    idleMs: Long,
    graceMicros: Long)
    extends StatefulProcessor[Int, Row, Row]
    with RealTimeCapable
    with RecordedSettings {

  private val keyIndex = layout.extraIndex(WindowedDistinct.Key)
  protected val output = new PartitionInput.Output(layout, extraWidth = 2)
  @transient private lazy val order = new OrderCheck(layout.partitionIndex, layout.orderIndex)

  @transient protected var streamTimes: MapState[Int, Long] = _
  @transient private var sweeper: Sweeper = _
  @transient private var lastRecordMs: ValueState[Long] = _
  @transient private lazy val written = scala.collection.mutable.HashMap.empty[Int, Long]

  private val graceHistory = new SettingHistory("grace")
  @transient private var graces: Vector[Long] = _

  /** Per input partition of the group, the window end at or below which (tumbling; below which,
    * session) every window stays closed, whatever the grace: set by a restart that changed it. */
  @transient private var closedBelow: ClosedFloors = _

  /** Per group, its partitions' floors of `closedBelow`, read once per task. */
  @transient private lazy val floors = scala.collection.mutable.HashMap.empty[Int, Map[Int, Long]]

  override def recorded(queryId: String, history: Seq[String]): Unit = graceHistory.record(queryId, history)

  protected def initStore(): Unit

  /** Handles one record of a non-null key; returns the output row (forwarded or a marker).
    * `closedUpTo`: the floor of the record's partition ([[ClosedFloors]]; Long.MinValue without one). */
  protected def process(row: Row, key: Row, ts: Long, streamTime: Long, closedUpTo: Long): Row

  /** Removes the state that no record at stream time >= `streamTime` can reach. */
  protected def sweep(streamTime: Long): Boolean

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    streamTimes = getHandle.getMapState[Int, Long]("streamTimes", Encoders.scalaInt, Encoders.scalaLong, TTLConfig.NONE)
    sweeper = new Sweeper(getHandle, retainMicros)
    lastRecordMs = getHandle.getValueState[Long]("lastRecordMs", Encoders.scalaLong, TTLConfig.NONE)
    closedBelow = new ClosedFloors(getHandle)
    graces = graceHistory.inTask(getHandle, streaming = useTimers, current = graceMicros)
    initStore()
  }

  override def handleInputRows(group: Int, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    // before any stream time moves
    val groupFloors = floors.getOrElseUpdate(group, closedBelow.judge(graces, streamTimes.iterator()))
    val times = new StreamTimes(streamTimes)
    rows.map { row =>
      order.check(row)
      val ts = row.getLong(layout.timestampMicrosIndex)
      val partition = row.getInt(layout.partitionIndex)
      val streamTime = times.advance(partition, ts)
      val key = row.getStruct(keyIndex)
      if (key.isNullAt(0)) output.forward(row, null, null) // null key: null window
      else process(row, key, ts, streamTime, groupFloors.getOrElse(partition, Long.MinValue))
    } ++ {
      times.flush()
      val nowMs = timerValues.getCurrentProcessingTimeInMs()
      // once per group and micro-batch (a real-time query calls once per record)
      if (nowMs >= 0 && !written.get(group).contains(nowMs)) { lastRecordMs.update(nowMs); written(group) = nowMs }
      if (useTimers) sweeper.ensureArmed(timerValues)
      Iterator.empty
    }
  }

  override def handleExpiredTimer(
      group: Int,
      timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo): Iterator[Row] = {
    // the watermark follows the fastest partition: it sweeps only a partition idle for longer than
    // spark.kstreams.partitionIdleTimeout; one still delivering is swept by its own stream time
    val nowMs = timerValues.getCurrentProcessingTimeInMs()
    if (nowMs >= 0 && lastRecordMs.exists() && nowMs - lastRecordMs.get() <= idleMs) {
      val own = streamTimes.values().foldLeft(Long.MinValue)(math.max)
      sweeper.firedAt(timerValues, own)(sweep)
    } else sweeper.fired(timerValues, streamTimes)(sweep)
    Iterator.empty
  }
}

/** Tumbling distinct: remembers each open (key, window start); the value is the window end. */
private[kstreams] final class TumblingDistinctProcessor(
    layout: PartitionInput.Layout,
    keySchema: StructType,
    windows: TimeWindows,
    useTimers: Boolean,
    lateReason: String,
    idleMs: Long)
    extends WindowProcessor(
      layout,
      windows.sizeMicros + windows.graceMicros,
      useTimers,
      lateReason,
      idleMs,
      windows.graceMicros) {

  private val windowKeySchema = keySchema.add("windowStart", LongType, nullable = false)
  @transient private var openWindows: MapState[Row, Long] = _

  override protected def initStore(): Unit =
    openWindows =
      getHandle.getMapState[Row, Long]("openWindows", Encoders.row(windowKeySchema), Encoders.scalaLong, TTLConfig.NONE)

  override protected def process(row: Row, key: Row, ts: Long, streamTime: Long, closedUpTo: Long): Row = {
    val start = Math.floorDiv(ts, windows.sizeMicros) * windows.sizeMicros
    val end = start + windows.sizeMicros
    if (end <= streamTime - windows.graceMicros || end <= closedUpTo) output.drop(row, lateReason)
    else {
      val windowKey = Row(key.get(0), start)
      if (openWindows.containsKey(windowKey)) output.drop(row, DropReasons.Duplicate)
      else {
        openWindows.updateValue(windowKey, end)
        output.forward(row, start, end)
      }
    }
  }

  override protected def sweep(streamTime: Long): Boolean = {
    val closed =
      openWindows.iterator().collect { case (k, end) if end <= streamTime - windows.graceMicros => k }.toVector
    closed.foreach(openWindows.removeKey)
    openWindows.exists()
  }
}

/** The sessions of one key, as parallel arrays of start and end (micros), sorted by start. */
private[kstreams] final case class KeySessions(starts: Seq[Long], ends: Seq[Long])

/** Session distinct: keeps each key's sessions; a record opening a new session is forwarded. */
private[kstreams] final class SessionDistinctProcessor(
    layout: PartitionInput.Layout,
    keySchema: StructType,
    windows: SessionWindows,
    useTimers: Boolean,
    lateReason: String,
    idleMs: Long)
    extends WindowProcessor(
      layout,
      windows.gapMicros + windows.graceMicros,
      useTimers,
      lateReason,
      idleMs,
      windows.graceMicros) {

  @transient private var sessions: MapState[Row, KeySessions] = _

  override protected def initStore(): Unit =
    sessions = getHandle.getMapState[Row, KeySessions](
      "sessions",
      Encoders.row(keySchema),
      StateEncoders.product(Encoders.product[KeySessions]),
      TTLConfig.NONE)

  override protected def process(row: Row, key: Row, ts: Long, streamTime: Long, closedUpTo: Long): Row = {
    val known = Option(sessions.getValue(key)).getOrElse(KeySessions(Nil, Nil))
    val all = known.starts.zip(known.ends)
    // sessions within `gap` (inclusive) of ts on either side join the record's session
    val (joined, apart) = all.partition { case (s, e) =>
      ts >= s - windows.gapMicros && ts <= e + windows.gapMicros
    }
    val mergedStart = (ts +: joined.map(_._1)).min
    val mergedEnd = (ts +: joined.map(_._2)).max
    if (mergedEnd < streamTime - windows.graceMicros || mergedEnd < closedUpTo) output.drop(row, lateReason)
    else {
      val updated = (apart :+ (mergedStart -> mergedEnd)).sortBy(_._1)
      sessions.updateValue(key, KeySessions(updated.map(_._1), updated.map(_._2)))
      if (joined.isEmpty) output.forward(row, ts, ts)
      else output.drop(row, DropReasons.Duplicate)
    }
  }

  override protected def sweep(streamTime: Long): Boolean = {
    // a session ending before streamTime - grace - gap can neither take nor bridge a new record
    val horizon = streamTime - windows.graceMicros - windows.gapMicros
    val changes = sessions
      .iterator()
      .map { case (k, v) =>
        val kept = v.starts.zip(v.ends).filter(_._2 >= horizon)
        (k, kept, kept.size != v.starts.size)
      }
      .filter(_._3)
      .toVector
    changes.foreach { case (k, kept, _) =>
      if (kept.isEmpty) sessions.removeKey(k)
      else sessions.updateValue(k, KeySessions(kept.map(_._1), kept.map(_._2)))
    }
    sessions.exists()
  }
}
