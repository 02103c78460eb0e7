package kstreams
package internal
package runner

import java.time.Duration

import scala.collection.mutable
import scala.util.control.NonFatal

import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.functions.{col, lit, timestamp_micros, unix_micros}
import org.apache.spark.sql.kstreams.PlannedCheck
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

import kstreams.internal.plan._
import kstreams.internal.state.OrderCheck
import kstreams.processor._

/** Plans `KStream.process`: the input in arrival order, grouped by input partition (one group =
  * one Kafka Streams task), through a [[ProcessorRunner]] in `transformWithState`.
  *
  * Output columns: the input's key and value columns (same names and types) with what the
  * processor forwarded, `timestamp`, `partition` (the task's), and `offset` (of the record being
  * processed when it forwarded; null when forwarded from a punctuation), under the input's names.
  */
private[kstreams] object ProcessorPlan {
  val TimestampMicros = HelperColumns.ProcessorTimestampMicros
  val Sink = HelperColumns.ProcessorSink

  def apply[K, V](
      df: DataFrame,
      columns: StreamColumns,
      supplier: ProcessorSupplier[K, V],
      stores: Seq[StoreSpec],
      name: String,
      wallClock: Boolean): DataFrame = {
    if (supplier == null) throw new KStreamsException("process needs a ProcessorSupplier, got null")
    val processorName = Option(name).getOrElse(supplier.get().getClass.getSimpleName)
    val node = NodeSpec(
      processorName,
      supplier.asInstanceOf[ProcessorSupplier[Any, Any]],
      stores.map(_.name),
      children = Nil,
      sinks = Seq(null))
    plan(Seq(SourceSpec("input", df, columns, roots = Seq(0))), Seq(node), stores, wallClock).drop(Sink)
  }

  /** Which source a row of several sources came from, and its place in that source. */
  val SourceIndex = HelperColumns.ProcessorSource
  val SourceOrder = HelperColumns.ProcessorSourceOrder

  /** An input of a processor DAG: a DataFrame with record columns `columns`, read by `roots`. */
  final case class SourceSpec(name: String, df: DataFrame, columns: StreamColumns, roots: Seq[Int])

  /** Plans processors `nodes` (a DAG) on `sources`; the result has a [[Sink]] column naming the
    * sink of each forwarded row (null: the output of `KStream.process`).
    *
    * Several sources (a sub-topology that reads more than one) are co-partitioned: their records
    * meet in the task of their partition number and are taken in [[ArrivalMerge.merge]] order,
    * the sources ordered by name; their key and value types must agree, and the result has the
    * default column names. */
  def plan(sources: Seq[SourceSpec], nodes: Seq[NodeSpec], stores: Seq[StoreSpec], wallClock: Boolean): DataFrame = {
    val ordered = sources.sortBy(_.name) // equal timestamps: the source whose name sorts first goes first
    val (df, columns) =
      if (ordered.size == 1) (ordered.head.df, ordered.head.columns)
      else (unionOfSources(ordered), StreamColumns(onNullTimestamp = ordered.head.columns.onNullTimestamp))
    val roots = ordered.map(_.roots)
    val duplicates = stores.groupBy(_.name).collect { case (n, s) if s.size > 1 => n }
    if (duplicates.nonEmpty)
      throw new KStreamsException(s"store names must be unique; declared more than once: ${duplicates.mkString(", ")}")
    if (wallClock && !df.isStreaming)
      throw new KStreamsException(
        "wall-clock punctuation runs on Spark's processing-time timers, which need a streaming " +
          "DataFrame; drop wallClock = true for a batch DataFrame")
    val resolved = columns.resolve(df)
    val keyField = df.schema.fields
      .find(_.name == columns.key)
      .getOrElse(throw StreamColumns.missing(df, columns.key, "key"))
    val valueField = df.schema.fields
      .find(_.name == columns.value)
      .getOrElse(throw StreamColumns.missing(df, columns.value, "value"))

    // a task is named by its group, the partition number (`context.partition`), in Scala as in
    // Python (arranged): no round-robin keys
    val prepared = PartitionInput.prepare(df, resolved, Nil, None, roundRobin = false)
    val schema = prepared.inputSchema
    val topicIndex = schema.fields.indexWhere(f => f.name == "topic" && f.dataType == StringType)
    val runner = new ProcessorRunner(
      nodes,
      roots,
      stores,
      prepared.layout,
      if (sources.size == 1) None else Some((schema.fieldIndex(SourceIndex), schema.fieldIndex(SourceOrder))),
      schema.fieldIndex(keyField.name),
      schema.fieldIndex(valueField.name),
      if (topicIndex >= 0) Some(topicIndex) else None
    )
    val partitionName = columns.partition.getOrElse(StreamColumns.DefaultPartition)
    val offsetName = columns.offset.getOrElse(StreamColumns.DefaultOffset)
    val forwarded = StructType(
      Seq(
        StructField(Sink, StringType, nullable = true),
        keyField.copy(nullable = true, metadata = Metadata.empty),
        valueField.copy(nullable = true, metadata = Metadata.empty),
        StructField(TimestampMicros, LongType, nullable = false),
        StructField(partitionName, IntegerType, nullable = false),
        StructField(offsetName, LongType, nullable = true)
      ))
    val timeMode = if (wallClock) TimeMode.ProcessingTime() else TimeMode.None()
    // the processors' names and stores decide what state a record meets; their code may change
    val descriptor = OperatorDescriptor
      .arrivalOrder("process", resolved)
      .setting("processors", nodes.map(_.name).mkString("[", ", ", "]"))
      .setting("stores", stores.map(_.name).mkString("[", ", ", "]"))
    val processed = Stateful.transform(prepared.grouped, runner, descriptor, timeMode)(Encoders.row(forwarded))
    processed.select(
      col(Sink),
      col(HelperColumns.quote(keyField.name)),
      col(HelperColumns.quote(valueField.name)),
      timestamp_micros(col(TimestampMicros)).as(columns.timestamp),
      col(HelperColumns.quote(partitionName)),
      col(HelperColumns.quote(offsetName))
    )
  }

  /** `sources` in one DataFrame with the default column names, plus [[SourceIndex]] (the position
    * in `sources`) and [[SourceOrder]] (the offset, or the timestamp without an offset column). */
  private def unionOfSources(sources: Seq[SourceSpec]): DataFrame = {
    val normalized = sources.zipWithIndex.map { case (s, i) =>
      val resolved = s.columns.resolve(s.df)
      Seq(s.columns.key -> "key", s.columns.value -> "value").foreach { case (n, what) =>
        if (!s.df.columns.contains(n)) throw StreamColumns.missing(s.df, n, what)
      }
      val q = (name: String) => col(HelperColumns.quote(name))
      val offset = resolved.offset.map(f => q(f.name).cast(LongType))
      val hasTopic = s.df.schema.fields.exists(f => f.name == "topic" && f.dataType == StringType)
      s.df.select(
        q(s.columns.key).as("key"),
        q(s.columns.value).as("value"),
        q(s.columns.timestamp).as("timestamp"),
        resolved.partition.map(f => q(f.name).cast(IntegerType)).getOrElse(lit(0)).as("partition"),
        offset.getOrElse(lit(null).cast(LongType)).as("offset"),
        (if (hasTopic) q("topic") else lit(null).cast(StringType)).as("topic"),
        lit(i).as(SourceIndex),
        offset.getOrElse(unix_micros(q(s.columns.timestamp))).as(SourceOrder)
      )
    }
    val first = normalized.head.schema
    normalized.zip(sources).tail.foreach { case (n, s) =>
      Seq("key", "value").foreach { c =>
        if (n.schema(c).dataType != first(c).dataType)
          throw new KStreamsException(
            s"sources must have the same key and value types: '${sources.head.name}' has $c " +
              s"${first(c).dataType.simpleString}, '${s.name}' has ${n.schema(c).dataType.simpleString}")
      }
    }
    normalized.reduce(_ unionByName _)
  }

  /** The arranged input for a Python processor, after the same checks as [[apply]]. With the
    * `processors` (names) and their `stores` that the input feeds, a streaming query over it is
    * checked against its checkpoint when planned, as [[apply]]'s operator is in its `init`. */
  def pythonInput(df: DataFrame, columns: StreamColumns, processors: Seq[String], stores: Seq[String]): DataFrame = {
    val resolved = columns.resolve(df)
    Seq(columns.key -> "key", columns.value -> "value").foreach { case (n, what) =>
      if (!df.columns.contains(n)) throw StreamColumns.missing(df, n, what)
    }
    val arranged = PartitionInput.arranged(df, resolved)
    if (processors.isEmpty) arranged
    else {
      val described = OperatorDescriptor
        .arrivalOrder("python_process", resolved)
        .setting("processors", processors.mkString("[", ", ", "]"))
        .setting("stores", stores.mkString("[", ", ", "]"))
        .render
      PlannedCheck.around(
        arranged,
        new PlannedCheck.Check {
          override def apply(): Unit = CheckpointOperators.verifyPythonProcessor(this, described)
        })
    }
  }
}

/** A processor of a DAG run in one task: where its forwards go (child node indices, and sink
  * names; a null sink is the single output of `KStream.process`). */
private[kstreams] final case class NodeSpec(
    name: String,
    supplier: ProcessorSupplier[Any, Any],
    stores: Seq[String],
    children: Seq[Int],
    sinks: Seq[String])

/** Key of a punctuation schedule in state: the node and the schedule's registration number. */
private[kstreams] final case class ScheduleKey(node: Int, number: Int)

/** Runs user [[Processor]]s (a DAG of them) per input partition inside `transformWithState`.
  *
  * Python processors run on a port of this class (`python/kstreams_spark/_processor_runtime.py`):
  * change the two together; the spec's examples run on both (`ProcessorSpec`,
  * `tests/test_processor.py`).
  *
  * State of each partition (group), all in the RocksDB state store:
  *  - `streamTime`: the partition's stream time (micros);
  *  - `punctuations`: (node, schedule number) -> next firing time (ms);
  *  - `wallClockTimer`: the processing-time timer currently registered;
  *  - one `MapState` per declared store.
  */
private[kstreams] final class ProcessorRunner(
    nodes: Seq[NodeSpec],
    roots: Seq[Seq[Int]],
    stores: Seq[StoreSpec],
    layout: PartitionInput.Layout,
    sourceColumns: Option[(Int, Int)],
    keyIndex: Int,
    valueIndex: Int,
    topicIndex: Option[Int])
    extends StatefulProcessor[Int, Row, Row] {

  @transient private var savedStreamTime: ValueState[Long] = _
  @transient private var nextPunctuation: MapState[ScheduleKey, Long] = _
  @transient private var wallClockTimer: ValueState[Long] = _
  @transient private var maps: Map[String, MapState[Any, Any]] = _
  @transient private var tasks: mutable.LinkedHashMap[Int, Task] = _
  // Whether the query was planned with wall-clock punctuation: Spark hands a processing time to a
  // processor in any time mode (the micro-batch's), so that time cannot tell; only this mode lets
  // the wall-clock timer be registered.
  @transient private var wallClockEnabled: Boolean = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    val handle = getHandle
    wallClockEnabled = timeMode == TimeMode.ProcessingTime()
    savedStreamTime = handle.getValueState[Long]("streamTime", Encoders.scalaLong, TTLConfig.NONE)
    nextPunctuation = handle.getMapState[ScheduleKey, Long](
      "punctuations",
      StateEncoders.product(Encoders.product[ScheduleKey]),
      Encoders.scalaLong,
      TTLConfig.NONE)
    wallClockTimer = handle.getValueState[Long]("wallClockTimer", Encoders.scalaLong, TTLConfig.NONE)
    maps = stores
      .map(s =>
        s.name ->
          handle.getMapState[Any, Any]("store_" + s.name, s.keyEncoder, s.valueEncoder, TTLConfig.NONE))
      .toMap
    tasks = mutable.LinkedHashMap.empty
  }

  override def handleInputRows(group: Int, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val task = taskFor(group, timerValues)
    val ordered: Iterator[(Row, Int)] = sourceColumns match {
      case None =>
        val order = new OrderCheck(layout.partitionIndex, layout.orderIndex)
        rows.map { row => order.check(row); (row, 0) }
      case Some((sourceIndex, sourceOrder)) =>
        // several sources: each in its own order, merged as one Kafka Streams task takes them
        val bySource = rows.toSeq.groupBy(_.getInt(sourceIndex))
        val queues = roots.indices.map(i => bySource.getOrElse(i, Nil).sortBy(_.getLong(sourceOrder)))
        ArrivalMerge
          .merge(queues, r => r.getLong(layout.timestampMicrosIndex))
          .iterator
          .map(r => (r, r.getInt(sourceIndex)))
    }
    ordered.flatMap { case (row, source) =>
      task.process(row, roots(source))
      task.drain()
    } ++ {
      task.saveStreamTime()
      Iterator.empty
    }
  }

  override def handleExpiredTimer(
      group: Int,
      timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo): Iterator[Row] = {
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
      val key: ScheduleKey,
      val intervalMs: Long,
      val kind: PunctuationType,
      val punctuator: Punctuator)

  /** A node's processor instance and its context inside one task. */
  private final class LiveNode(task: Task, val index: Int, val spec: NodeSpec) extends ProcessorContext[Any, Any] {
    val schedules = mutable.ArrayBuffer.empty[Schedule]
    var initializing = true
    val processor: Processor[Any, Any] = task.guard(spec.name, "creating the processor") {
      val p = spec.supplier.get()
      if (p == null) throw new KStreamsException(s"the supplier of processor '${spec.name}' returned null")
      p
    }

    def init(): Unit = {
      task.guard(spec.name, "init")(processor.init(this))
      initializing = false
    }

    override def forward(key: Any, value: Any): Unit =
      task.forward(this, key, value, task.currentTimestampMicros)
    override def forward(key: Any, value: Any, timestamp: Long): Unit =
      task.forward(this, key, value, Math.multiplyExact(timestamp, 1000L))
    override def schedule(interval: Duration, kind: PunctuationType): Unit =
      schedule(interval, kind, (t: Long) => processor.punctuate(t))
    override def schedule(interval: Duration, kind: PunctuationType, punctuator: Punctuator): Unit =
      task.schedule(this, interval, kind, punctuator)
    override def processorName: String = spec.name
    override def topic: String = task.currentTopic
    override def partition: Int = task.partition
    override def offset: Long = if (task.currentOffset == null) -1L else task.currentOffset
    override def timestamp: Long = Math.floorDiv(task.currentTimestampMicros, 1000L)
    override def streamTime: Long = task.streamTimeMs
    override def currentSystemTimeMs: Long = task.systemTimeMs
    override def getStateStore[SK, SV](storeName: String): KeyValueStore[SK, SV] =
      task.store(this, storeName).asInstanceOf[KeyValueStore[SK, SV]]
  }

  /** One input partition (a Kafka Streams task) for one micro-batch: the processors of the DAG,
    * stream time, and routing of forwarded records (synchronously, depth first, as in Kafka).
    * State accessors are bound to this group by Spark while its rows or timers are handled. */
  private final class Task(val partition: Int, startProcessingTimeMs: Long) {
    private val out = mutable.ArrayBuffer.empty[Row]
    private val storeViews = mutable.HashMap.empty[String, KeyValueStore[Any, Any]]
    private var streamTimeMicros: Long =
      if (savedStreamTime.exists()) savedStreamTime.get() else Long.MinValue
    private var streamTimeChanged = false
    var currentTopic: String = _
    var currentOffset: java.lang.Long = _
    var currentTimestampMicros: Long = 0L

    private val live: Vector[LiveNode] = nodes.zipWithIndex.map { case (spec, i) =>
      new LiveNode(this, i, spec)
    }.toVector
    live.foreach(_.init()) // in topology order, as Kafka initializes a task's processors

    def streamTimeMs: Long =
      if (streamTimeMicros == Long.MinValue) -1L else Math.floorDiv(streamTimeMicros, 1000L)

    def systemTimeMs: Long =
      if (startProcessingTimeMs >= 0) startProcessingTimeMs else System.currentTimeMillis()

    def process(row: Row, roots: Seq[Int]): Unit = {
      val ts = row.getLong(layout.timestampMicrosIndex)
      if (ts > streamTimeMicros) { streamTimeMicros = ts; streamTimeChanged = true }
      currentTopic = topicIndex.map(i => row.getString(i)).orNull
      currentOffset =
        if (layout.offsetName.isEmpty || row.isNullAt(layout.orderIndex)) null
        else java.lang.Long.valueOf(row.getLong(layout.orderIndex))
      currentTimestampMicros = ts
      val where = layout.where(row)
      roots.foreach(deliver(_, row.get(keyIndex), row.get(valueIndex), ts, where))
      fireDue(PunctuationType.StreamTime, Math.floorDiv(streamTimeMicros, 1000L), "a stream-time punctuation")
    }

    private def deliver(index: Int, key: Any, value: Any, tsMicros: Long, where: String): Unit = {
      val node = live(index)
      val record = Record[Any, Any](
        key,
        value,
        Math.floorDiv(tsMicros, 1000L),
        currentTopic,
        partition,
        if (currentOffset == null) -1L else currentOffset)
      val saved = currentTimestampMicros
      currentTimestampMicros = tsMicros
      guard(node.spec.name, s"processing the record at $where")(node.processor.process(record))
      currentTimestampMicros = saved
    }

    def forward(node: LiveNode, key: Any, value: Any, tsMicros: Long): Unit = {
      // the same words in _processor_runtime.py
      if (closing)
        throw new KStreamsException(
          s"processor '${node.spec.name}' forwarded a record in close() (partition $partition); close() runs " +
            "after the micro-batch's output is complete, so the record would be lost: forward in process() or a " +
            "punctuation")
      node.spec.sinks.foreach(sink => out += Row(sink, key, value, tsMicros, partition, currentOffset))
      if (node.spec.children.nonEmpty) {
        val where =
          if (currentOffset != null) s"partition $partition, offset $currentOffset"
          else s"partition $partition (forwarded by '${node.spec.name}' in a punctuation)"
        node.spec.children.foreach(deliver(_, key, value, tsMicros, where))
      }
    }

    def punctuateWallClock(nowMs: Long): Unit = {
      fireDue(PunctuationType.WallClockTime, nowMs, "a wall-clock punctuation")
      armWallClockTimer()
    }

    /** Kafka's PunctuationQueue: each due schedule fires once with `now`, earliest first (ties by
      * node and registration order), then moves to its first boundary after `now` (boundaries
      * jumped over are not fired one by one). */
    private def fireDue(kind: PunctuationType, now: Long, what: String): Unit = {
      val due = live
        .flatMap(_.schedules)
        .filter(s => s.kind == kind && nextPunctuation.getValue(s.key) <= now)
        .map(s => (nextPunctuation.getValue(s.key), s))
        .sortBy { case (at, s) => (at, s.key.node, s.key.number) }
      due.foreach { case (at, s) =>
        currentTopic = null
        currentOffset = null
        currentTimestampMicros = Math.multiplyExact(now, 1000L)
        guard(live(s.key.node).spec.name, s"in $what at $now ms (partition $partition)")(s.punctuator.punctuate(now))
        val next = at + s.intervalMs
        nextPunctuation.updateValue(
          s.key,
          if (now >= next) at + ((now - at) / s.intervalMs + 1) * s.intervalMs else next)
      }
    }

    private def armWallClockTimer(): Unit = {
      val wall = live.flatMap(_.schedules).filter(_.kind == PunctuationType.WallClockTime)
      if (wall.nonEmpty) {
        val at = wall.map(s => nextPunctuation.getValue(s.key)).min
        val armed = if (wallClockTimer.exists()) Some(wallClockTimer.get()) else None
        if (!armed.contains(at)) {
          armed.foreach(getHandle.deleteTimer)
          getHandle.registerTimer(at)
          wallClockTimer.update(at)
        }
      }
    }

    def schedule(node: LiveNode, interval: Duration, kind: PunctuationType, punctuator: Punctuator): Unit = {
      val name = node.spec.name
      if (!node.initializing)
        throw new KStreamsException(s"processor '$name' called schedule outside init; register schedules in init")
      if (kind == null) throw new KStreamsException(s"processor '$name': punctuation type is null")
      val ms = Intervals.micros(interval) / 1000
      if (ms <= 0)
        throw new KStreamsException(s"processor '$name': punctuation interval must be at least 1 ms, got $interval")
      if (kind == PunctuationType.WallClockTime && !wallClockEnabled)
        throw new KStreamsException(
          s"processor '$name' scheduled a wall-clock punctuation, which needs " +
            "process(..., wallClock = true) (Python: wall_clock=True)")
      val key = ScheduleKey(node.index, node.schedules.size)
      if (!nextPunctuation.containsKey(key)) {
        // Kafka aligns stream-time schedules to 0 (the first record punctuates) and wall-clock
        // schedules to the time they are first registered.
        nextPunctuation.updateValue(
          key,
          kind match {
            case PunctuationType.StreamTime => 0L
            case PunctuationType.WallClockTime => startProcessingTimeMs + ms
          })
      }
      node.schedules += new Schedule(key, ms, kind, punctuator)
      if (kind == PunctuationType.WallClockTime) armWallClockTimer()
    }

    def store(node: LiveNode, storeName: String): KeyValueStore[Any, Any] = {
      if (!node.spec.stores.contains(storeName))
        throw new KStreamsException(
          s"processor '${node.spec.name}' asked for store '$storeName', which was not declared; " +
            s"declare it in process(..., stores = Seq(Stores.keyValue(\"$storeName\"))); declared: " +
            (if (node.spec.stores.isEmpty) "none" else node.spec.stores.sorted.mkString(", ")))
      storeViews.getOrElseUpdate(storeName, new MapStateStore(storeName, maps(storeName)))
    }

    def drain(): Iterator[Row] = {
      if (out.isEmpty) Iterator.empty
      else { val rows = out.toVector; out.clear(); rows.iterator }
    }

    def saveStreamTime(): Unit = if (streamTimeChanged) {
      savedStreamTime.update(streamTimeMicros)
      streamTimeChanged = false
    }

    /** In close(): Spark has taken the micro-batch's output already. */
    private var closing = false

    def close(): Unit = {
      closing = true
      live.foreach(n => guard(n.spec.name, "close")(n.processor.close()))
    }

    /** Runs user code; a failure becomes a [[KStreamsException]] naming the processor and where. */
    def guard[T](name: String, where: String)(body: => T): T =
      try body
      catch {
        case e: KStreamsException => throw e
        case NonFatal(e) =>
          throw new KStreamsException(s"processor '$name' failed $where: ${e.getClass.getName}: ${e.getMessage}", e)
      }
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
    state
      .iterator()
      .filter { case (k, _) => ordering.gteq(k, from) && ordering.lteq(k, to) }
      .toVector
      .sortBy(_._1)
      .iterator
  override def all(): Iterator[(Any, Any)] = state.iterator()
}
