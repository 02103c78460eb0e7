package kstreams.processor

import java.time.Duration

import scala.collection.mutable
import scala.util.control.NonFatal

import kstreams._
import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.functions.{col, timestamp_micros}
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

/** Plans `KStream.process`: the input in arrival order, grouped by input partition (one group =
  * one Kafka Streams task), through a [[ProcessorRunner]] in `transformWithState`.
  *
  * Output columns: the input's key and value columns (same names and types) with what the
  * processor forwarded, `timestamp`, `partition` (the task's), and `offset` (of the record being
  * processed when it forwarded; null when forwarded from a punctuation), under the input's names.
  */
private[kstreams] object ProcessorPlan {
  val TimestampMicros = "__kstreams_forward_ts"

  def apply[K, V](
      df: DataFrame,
      columns: StreamColumns,
      supplier: ProcessorSupplier[K, V],
      stores: Seq[StoreSpec],
      name: String,
      wallClock: Boolean): DataFrame = {
    Sessions.requireStateStore(df)
    if (supplier == null) throw new KStreamsException("process needs a ProcessorSupplier, got null")
    val duplicates = stores.groupBy(_.name).collect { case (n, s) if s.size > 1 => n }
    if (duplicates.nonEmpty) throw new KStreamsException(
      s"store names must be unique; declared more than once: ${duplicates.mkString(", ")}")
    if (wallClock && !df.isStreaming) throw new KStreamsException(
      "wall-clock punctuation runs on Spark's processing-time timers, which need a streaming " +
        "DataFrame; drop wallClock = true for a batch DataFrame")
    val resolved = columns.resolve(df)
    val keyField = df.schema.fields.find(_.name == columns.key)
      .getOrElse(throw StreamColumns.missing(df, columns.key, "key"))
    val valueField = df.schema.fields.find(_.name == columns.value)
      .getOrElse(throw StreamColumns.missing(df, columns.value, "value"))
    val processorName = Option(name).getOrElse(supplier.get().getClass.getSimpleName)

    val prepared = ArrivalOrder.prepare(df, resolved, GroupScope.PerPartition, Nil, None)
    val schema = prepared.inputSchema
    val topicIndex = schema.fields.indexWhere(f => f.name == "topic" && f.dataType == StringType)
    val runner = new ProcessorRunner(
      processorName, supplier.asInstanceOf[ProcessorSupplier[Any, Any]], stores, prepared.layout,
      schema.fieldIndex(keyField.name), schema.fieldIndex(valueField.name),
      if (topicIndex >= 0) Some(topicIndex) else None)
    val partitionName = columns.partition.getOrElse(StreamColumns.DefaultPartition)
    val offsetName = columns.offset.getOrElse(StreamColumns.DefaultOffset)
    val forwarded = StructType(Seq(
      keyField.copy(nullable = true, metadata = Metadata.empty),
      valueField.copy(nullable = true, metadata = Metadata.empty),
      StructField(TimestampMicros, LongType, nullable = false),
      StructField(partitionName, IntegerType, nullable = false),
      StructField(offsetName, LongType, nullable = true)))
    val timeMode = if (wallClock) TimeMode.ProcessingTime() else TimeMode.None()
    val processed = prepared.grouped.transformWithState(runner, timeMode, OutputMode.Append())(
      Encoders.row(forwarded))
    processed.select(
      col(ArrivalOrder.quote(keyField.name)),
      col(ArrivalOrder.quote(valueField.name)),
      timestamp_micros(col(TimestampMicros)).as(columns.timestamp),
      col(ArrivalOrder.quote(partitionName)),
      col(ArrivalOrder.quote(offsetName)))
  }

  /** The arranged input for a Python processor, after the same checks as [[apply]]. */
  def pythonInput(df: DataFrame, columns: StreamColumns): DataFrame = {
    Sessions.requireStateStore(df)
    val resolved = columns.resolve(df)
    Seq(columns.key -> "key", columns.value -> "value").foreach { case (n, what) =>
      if (!df.columns.contains(n)) throw StreamColumns.missing(df, n, what) }
    ArrivalOrder.arranged(df, resolved, GroupScope.PerPartition)
  }
}

/** Runs a user [[Processor]] per input partition inside `transformWithState`.
  *
  * State of each partition (group), all in the RocksDB state store:
  *  - `streamTime`: the partition's stream time (micros);
  *  - `punctuations`: schedule number -> next firing time (ms);
  *  - `wallClockTimer`: the processing-time timer currently registered;
  *  - one `MapState` per declared store.
  */
private[kstreams] final class ProcessorRunner(
    name: String,
    supplier: ProcessorSupplier[Any, Any],
    stores: Seq[StoreSpec],
    layout: ArrivalOrder.Layout,
    keyIndex: Int,
    valueIndex: Int,
    topicIndex: Option[Int])
    extends StatefulProcessor[Int, Row, Row] {

  @transient private var savedStreamTime: ValueState[Long] = _
  @transient private var nextPunctuation: MapState[Int, Long] = _
  @transient private var wallClockTimer: ValueState[Long] = _
  @transient private var maps: Map[String, MapState[Any, Any]] = _
  @transient private var tasks: mutable.LinkedHashMap[Int, Task] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    val handle = getHandle
    savedStreamTime = handle.getValueState[Long]("streamTime", Encoders.scalaLong, TTLConfig.NONE)
    nextPunctuation = handle.getMapState[Int, Long](
      "punctuations", Encoders.scalaInt, Encoders.scalaLong, TTLConfig.NONE)
    wallClockTimer = handle.getValueState[Long]("wallClockTimer", Encoders.scalaLong, TTLConfig.NONE)
    maps = stores.map(s => s.name ->
      handle.getMapState[Any, Any]("store_" + s.name, s.keyEncoder, s.valueEncoder, TTLConfig.NONE)).toMap
    tasks = mutable.LinkedHashMap.empty
  }

  override def handleInputRows(
      group: Int, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val order = new OrderCheck(layout)
    val task = taskFor(group, timerValues)
    rows.flatMap { row =>
      order.check(row)
      task.process(row)
      task.drain()
    } ++ {
      task.saveStreamTime()
      Iterator.empty
    }
  }

  override def handleExpiredTimer(
      group: Int, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo): Iterator[Row] = {
    wallClockTimer.clear()
    val task = taskFor(group, timerValues)
    task.punctuateWallClock(timerValues.getCurrentProcessingTimeInMs())
    task.drain()
  }

  override def close(): Unit = if (tasks != null) {
    tasks.values.foreach(_.close())
    tasks.clear()
  }

  private def taskFor(group: Int, timerValues: TimerValues): Task =
    tasks.getOrElseUpdate(group, new Task(group, timerValues.getCurrentProcessingTimeInMs()))

  private final class Schedule(
      val number: Int, val intervalMs: Long, val kind: PunctuationType, val punctuator: Punctuator)

  /** One input partition's processor instance and context (state accessors are bound to the
    * current group by Spark while this group's rows or timers are handled). */
  private final class Task(val partition: Int, startProcessingTimeMs: Long)
      extends ProcessorContext[Any, Any] {
    private val out = mutable.ArrayBuffer.empty[Row]
    private val schedules = mutable.ArrayBuffer.empty[Schedule]
    private val storeViews = mutable.HashMap.empty[String, KeyValueStore[Any, Any]]
    private var streamTimeMicros: Long =
      if (savedStreamTime.exists()) savedStreamTime.get() else Long.MinValue
    private var streamTimeChanged = false
    private var currentTopic: String = _
    private var currentOffset: java.lang.Long = _
    private var currentTimestampMicros: Long = 0L
    private var initializing = true

    private val processor: Processor[Any, Any] = guard("creating the processor") {
      val p = supplier.get()
      if (p == null) throw new KStreamsException(s"the supplier of processor '$name' returned null")
      p
    }
    guard("init")(processor.init(this))
    initializing = false

    def process(row: Row): Unit = {
      val ts = row.getLong(layout.timestampMicrosIndex)
      if (ts > streamTimeMicros) { streamTimeMicros = ts; streamTimeChanged = true }
      currentTopic = topicIndex.map(i => row.getString(i)).orNull
      currentOffset = if (layout.offsetName.isEmpty || row.isNullAt(layout.orderIndex)) null
        else java.lang.Long.valueOf(row.getLong(layout.orderIndex))
      currentTimestampMicros = ts
      val record = Record[Any, Any](row.get(keyIndex), row.get(valueIndex), Math.floorDiv(ts, 1000L),
        currentTopic, partition, if (currentOffset == null) -1L else currentOffset)
      guard(s"processing the record at ${layout.where(row)}")(processor.process(record))
      punctuateStreamTime()
    }

    /** Fires the stream-time schedules that stream time has reached, earliest first. */
    private def punctuateStreamTime(): Unit = {
      val now = Math.floorDiv(streamTimeMicros, 1000L)
      fireDue(PunctuationType.StreamTime, now, "a stream-time punctuation")
    }

    def punctuateWallClock(nowMs: Long): Unit = {
      fireDue(PunctuationType.WallClockTime, nowMs, "a wall-clock punctuation")
      armWallClockTimer()
    }

    /** Kafka's PunctuationQueue: each due schedule fires once with `now`, then moves to its first
      * boundary after `now` (boundaries jumped over are not fired one by one). */
    private def fireDue(kind: PunctuationType, now: Long, what: String): Unit = {
      var due = schedules.filter(s => s.kind == kind && nextPunctuation.getValue(s.number) <= now)
        .sortBy(s => (nextPunctuation.getValue(s.number), s.number))
      while (due.nonEmpty) {
        val s = due.head
        val at = nextPunctuation.getValue(s.number)
        currentTopic = null
        currentOffset = null
        currentTimestampMicros = Math.multiplyExact(now, 1000L)
        guard(s"$what at $now ms (partition $partition)")(s.punctuator.punctuate(now))
        val next = at + s.intervalMs
        nextPunctuation.updateValue(s.number,
          if (now >= next) at + ((now - at) / s.intervalMs + 1) * s.intervalMs else next)
        due = due.tail
      }
    }

    private def armWallClockTimer(): Unit = {
      val wall = schedules.filter(_.kind == PunctuationType.WallClockTime)
      if (wall.nonEmpty) {
        val at = wall.map(s => nextPunctuation.getValue(s.number)).min
        val armed = if (wallClockTimer.exists()) Some(wallClockTimer.get()) else None
        if (!armed.contains(at)) {
          armed.foreach(getHandle.deleteTimer)
          getHandle.registerTimer(at)
          wallClockTimer.update(at)
        }
      }
    }

    def drain(): Iterator[Row] = {
      if (out.isEmpty) Iterator.empty
      else { val rows = out.toVector; out.clear(); rows.iterator }
    }

    def saveStreamTime(): Unit = if (streamTimeChanged) {
      savedStreamTime.update(streamTimeMicros)
      streamTimeChanged = false
    }

    def close(): Unit = guard("close")(processor.close())

    /** Runs user code; a failure becomes a [[KStreamsException]] naming the processor and where. */
    private def guard[T](where: String)(body: => T): T =
      try body
      catch {
        case e: KStreamsException => throw e
        case NonFatal(e) => throw new KStreamsException(
          s"processor '$name' failed $where: ${e.getClass.getName}: ${e.getMessage}", e)
      }

    // ProcessorContext

    override def forward(key: Any, value: Any): Unit = emit(key, value, currentTimestampMicros)

    override def forward(key: Any, value: Any, timestamp: Long): Unit =
      emit(key, value, Math.multiplyExact(timestamp, 1000L))

    private def emit(key: Any, value: Any, tsMicros: Long): Unit =
      out += Row(key, value, tsMicros, partition, currentOffset)

    override def schedule(interval: Duration, kind: PunctuationType): Unit =
      schedule(interval, kind, (t: Long) => processor.punctuate(t))

    override def schedule(interval: Duration, kind: PunctuationType, punctuator: Punctuator): Unit = {
      if (!initializing) throw new KStreamsException(
        s"processor '$name' called schedule outside init; register schedules in init")
      val ms = Intervals.micros(interval) / 1000
      if (ms <= 0) throw new KStreamsException(
        s"processor '$name': punctuation interval must be at least 1 ms, got $interval")
      if (kind == null) throw new KStreamsException(s"processor '$name': punctuation type is null")
      val number = schedules.size
      if (!nextPunctuation.containsKey(number)) {
        // Kafka aligns stream-time schedules to 0 (the first record punctuates) and wall-clock
        // schedules to the time they are first registered.
        nextPunctuation.updateValue(number, kind match {
          case PunctuationType.StreamTime => 0L
          case PunctuationType.WallClockTime => startProcessingTimeMs + ms
        })
      }
      schedules += new Schedule(number, ms, kind, punctuator)
      if (kind == PunctuationType.WallClockTime) {
        if (startProcessingTimeMs < 0) throw new KStreamsException(
          s"processor '$name' scheduled a wall-clock punctuation, which needs " +
            "process(..., wallClock = true) (Python: wall_clock=True)")
        armWallClockTimer()
      }
    }

    override def processorName: String = name
    override def topic: String = currentTopic
    override def offset: Long = if (currentOffset == null) -1L else currentOffset
    override def timestamp: Long = Math.floorDiv(currentTimestampMicros, 1000L)
    override def streamTime: Long =
      if (streamTimeMicros == Long.MinValue) -1L else Math.floorDiv(streamTimeMicros, 1000L)

    override def currentSystemTimeMs: Long =
      if (startProcessingTimeMs >= 0) startProcessingTimeMs else System.currentTimeMillis()

    override def getStateStore[SK, SV](storeName: String): KeyValueStore[SK, SV] =
      storeViews.getOrElseUpdate(storeName, maps.get(storeName) match {
        case Some(state) => new MapStateStore(storeName, state)
        case None => throw new KStreamsException(
          s"processor '$name' asked for store '$storeName', which was not declared; declare it " +
            s"in process(..., stores = Seq(Stores.keyValue(\"$storeName\"))); declared: " +
            (if (maps.isEmpty) "none" else maps.keys.toSeq.sorted.mkString(", ")))
      }).asInstanceOf[KeyValueStore[SK, SV]]
  }
}

/** A [[KeyValueStore]] over one `MapState` of the current group. */
private[kstreams] final class MapStateStore(val name: String, state: MapState[Any, Any])
    extends KeyValueStore[Any, Any] {
  override def get(key: Any): Option[Any] = Option(state.getValue(key))
  override def put(key: Any, value: Any): Unit =
    if (value == null) state.removeKey(key) else state.updateValue(key, value)
  override def putIfAbsent(key: Any, value: Any): Option[Any] = {
    val existing = get(key)
    if (existing.isEmpty) put(key, value)
    existing
  }
  override def delete(key: Any): Option[Any] = {
    val existing = get(key)
    if (existing.isDefined) state.removeKey(key)
    existing
  }
  override def range(from: Any, to: Any)(implicit ordering: Ordering[Any]): Iterator[(Any, Any)] =
    state.iterator().filter { case (k, _) => ordering.gteq(k, from) && ordering.lteq(k, to) }
      .toVector.sortBy(_._1).iterator
  override def all(): Iterator[(Any, Any)] = state.iterator()
}
