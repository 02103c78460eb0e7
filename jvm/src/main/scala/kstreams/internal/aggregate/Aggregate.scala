package kstreams
package internal
package aggregate

import scala.collection.mutable

import org.apache.spark.sql.{Column, Encoders, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.ColumnFunction
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

import kstreams.internal.plan._
import kstreams.internal.window.WindowedDistinct

/** `groupByKey.count() / reduce(adder) / aggregate(initializer, adder)`, optionally over tumbling
  * or session windows (spec section 5): a table of running results, emitted as an update stream
  * (key, [window,] value, timestamp). The result timestamp is the largest timestamp folded in
  * (KIP-258); updates that change neither value nor make the timestamp older are dropped and
  * counted as `idempotent-updates-dropped` (KIP-557, spec section 6).
  *
  * Records are folded per key in arrival order ([[Keyed.arrivalOrder]]); records with a null key
  * are skipped and counted, and so are null values of plain (not windowed) aggregations (as Kafka
  * Streams 4.3 does). A window closes when the query's
  * event-time watermark reaches `end + grace`; a record of a closed window is late: dropped
  * (`late_dropped`) or, with [[LateRecords.SideOutput]], routed unchanged to the table's
  * [[KTable.sideOutput]] (`late_side_output`), see [[LateRows]].
  */
private[kstreams] object Aggregate {

  /** Names the adder's inputs have: the running aggregate and the record's value. */
  val AggInput = "__kstreams_agg"
  val ValueInput = "__kstreams_value"
  val WindowStart = "__kstreams_window_start"
  val WindowEnd = "__kstreams_window_end"
  val Result = "__kstreams_result"
  val ResultTs = "__kstreams_result_ts"

  /** The processor's output column with a late record routed to the side output ([[LateRows]]). */
  val LateRecord = "__kstreams_late_record"

  /** How to fold: `initializer` None means "the first value" (reduce). `merger` combines two
    * aggregates (given as the adder's two inputs) when session windows merge; reduce merges with
    * its adder. */
  final case class Fold(name: String, initializer: Option[Column], adder: Column, merger: Option[Column])

  def count: Fold =
    Fold("kstreams_count", Some(lit(0L)), col(AggInput) + lit(1L), Some(col(AggInput) + col(ValueInput)))

  /** What an aggregation is computed over. */
  sealed trait Windowing
  case object Unwindowed extends Windowing
  final case class Tumbling(windows: TimeWindows) extends Windowing
  final case class Sessions(windows: SessionWindows) extends Windowing

  def run(stream: KStream, fold: Fold, windowing: Windowing): KTable = run(stream, fold, windowing, LateRecords.Drop)

  /** The aggregation, with `lateRecords` for the records of closed windows (windowed only). */
  def run(stream: KStream, fold: Fold, windowing: Windowing, lateRecords: LateRecords): KTable = {
    // a closed window's result was emitted already and its state is gone: its late records can be
    // dropped or routed, not forwarded (windowed distinct refuses "forward" for the same reason)
    val routed = lateRecords match {
      case LateRecords.Drop => false
      case LateRecords.SideOutput => true
      case LateRecords.Forward =>
        throw new KStreamsException(
          s"a windowed ${fold.name.stripPrefix("kstreams_")} cannot forward a record of a closed window " +
            "(its window's result was emitted): late_records must be 'drop' (the default) or 'side_output'")
    }
    val input = Keyed.prepare(Seq(LateRows.sideInput(stream, routed)))
    val spark = stream.df.sparkSession
    val valueType = LateRows.valueType(input.valueTypes.head, routed)
    val (initial, aggType) = fold.initializer match {
      case Some(init) => val (v, t) = ColumnFunction.constant(spark, init); (Some(v), t)
      case None => (None, valueType)
    }
    val operator = fold.name.stripPrefix("kstreams_")

    /** `expression` over (aggregate, second input), with an error saying what did not resolve. */
    def resolve(what: String, secondType: DataType, expression: Column): ColumnFunction = try {
      ColumnFunction(spark, Seq(AggInput -> aggType, ValueInput -> secondType), expression, Some(aggType))
    } catch {
      case e: org.apache.spark.sql.AnalysisException =>
        throw new KStreamsException(
          s"the $what of $operator does not resolve over the aggregate (${aggType.simpleString}) and " +
            s"the ${if (what == "adder") "value" else "other aggregate"} (${secondType.simpleString}): " +
            KStreamsException.sparkSays(e),
          e
        )
    }
    val adder = resolve("adder", valueType, fold.adder)
    val windowed = windowing != Unwindowed
    val outputSchema = Stateful.outputSchema(
      Seq(
        input.keyField.copy(name = HelperColumns.Key, nullable = true),
        StructField(WindowStart, LongType),
        StructField(WindowEnd, LongType),
        StructField(Result, aggType),
        StructField(ResultTs, LongType)
      ) ++ (if (routed) Seq(StructField(LateRecord, input.valueTypes.head)) else Nil))
    val drop = new DropMarker(outputSchema)
    val late = new LateRows(drop, routed)
    val processor = windowing match {
      case Unwindowed => new AggregateProcessor(input.layout, initial, adder, None, input.streaming, drop, late)
      case Tumbling(windows) =>
        new AggregateProcessor(input.layout, initial, adder, Some(windows), input.streaming, drop, late)
      case Sessions(windows) =>
        val merger = resolve("session merger", aggType, fold.merger.getOrElse(fold.adder))
        new SessionAggregateProcessor(input.layout, initial, adder, merger, windows, input.streaming, drop, late)
    }
    val name = windowing match {
      case Unwindowed => fold.name
      case Tumbling(_) => fold.name + "_windowed"
      case Sessions(_) => fold.name + "_session_windowed"
    }
    val descriptor = windowing match {
      case Unwindowed => input.descriptor(name)
      case Tumbling(w) => input.descriptor(name).windows(w)
      case Sessions(w) => input.descriptor(name).windows(w)
    }
    val all = Stateful.runAll(
      input.grouped,
      processor,
      descriptor,
      if (windowed) Stateful.eventTime(input.streaming) else TimeMode.None(),
      outputSchema,
      name,
      Seq(DropReasons.NullKey, DropReasons.NullValue, late.reason, DropReasons.Idempotent)
    )
    val cols = stream.columns
    val window = struct(timestamp_micros(col(WindowStart)).as("start"), timestamp_micros(col(WindowEnd)).as("end"))
    def tableColumns(window: Column): Seq[Column] =
      Seq(col(HelperColumns.Key).as(cols.key)) ++ (if (windowed) Seq(window.as("window")) else Nil) ++ Seq(
        col(Result).as(cols.value),
        Keyed.timestampColumn(col(ResultTs), cols.timestamp, input.watermarkDelayMs))
    // the table's updates and its late input records in one DataFrame of one plan (KTable.withSideOutput)
    val withSideOutput =
      if (!routed) None
      else
        Some(
          Stateful
            .forwardedOrRouted(all)
            .select(
              // a routed row's window is null, not a struct of nulls (its table columns are null)
              tableColumns(when(col(HelperColumns.Dropped).isNull, window)) ++ Seq(
                Stateful.sideOutputReason(WindowedDistinct.WindowClosedReason),
                col(s"$LateRecord.record").as(KTable.LateRecordColumn)): _*))
    KTable(Stateful.forwardedOnly(all).select(tableColumns(window): _*), cols, withSideOutput)
  }
}

/** Folds one key's records; state is one (aggregate, timestamp) per window start (0 when not
  * windowed), plus an event-time timer per window that removes it once the window has closed. */
private[kstreams] final class AggregateProcessor(
    layout: Keyed.Layout,
    initial: Option[Any],
    adder: ColumnFunction,
    windows: Option[TimeWindows],
    streaming: Boolean,
    drop: DropMarker,
    late: LateRows)
    extends StatefulProcessor[Row, Row, Row] {

  @transient private var results: MapState[Long, Row] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    val stateSchema = StructType(Seq(StructField("aggregate", adder.dataType), StructField("ts", LongType)))
    results = getHandle.getMapState[Long, Row]("results", Encoders.scalaLong, Encoders.row(stateSchema), TTLConfig.NONE)
  }

  override def handleInputRows(key: Row, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val watermarkMicros =
      if (windows.isDefined && streaming) timerValues.getCurrentWatermarkInMs() * 1000L else Long.MinValue
    val keyValue = key.get(0)
    val valueIndex = layout.valueIndex(0)
    val out = mutable.ArrayBuffer.empty[Row]
    Keyed.arrivalOrder(rows, layout).foreach { r =>
      if (keyValue == null) out += drop(DropReasons.NullKey)
      // Kafka Streams 4.3 skips a null value in plain aggregations only (KStreamAggregate); its
      // windowed aggregation (KStreamWindowAggregate) folds it in (spec section 5)
      else if (late.value(r, valueIndex) == null && windows.isEmpty) out += drop(DropReasons.NullValue)
      else {
        val ts = r.getLong(layout.tsIndex)
        val (start, end) = windows match {
          case Some(w) => val s = Math.floorDiv(ts, w.sizeMicros) * w.sizeMicros; (s, s + w.sizeMicros)
          case None => (0L, 0L)
        }
        val closeMicros = end + windows.map(_.graceMicros).getOrElse(0L)
        if (windows.isDefined && closeMicros <= watermarkMicros) out += late(r, valueIndex)
        else {
          // a null aggregate is no aggregate, as in Kafka's stores (a put of null deletes): the
          // next record starts from the initializer again (reduce: from its own value)
          val old =
            if (results.containsKey(start)) Some(results.getValue(start)).filter(!_.isNullAt(0))
            else None
          val value = late.value(r, valueIndex)
          val folded = old match {
            case Some(o) => adder(o.get(0), value)
            case None => initial.map(i => adder(i, value)).getOrElse(value)
          }
          val newTs = old.map(o => Math.max(o.getLong(1), ts)).getOrElse(ts)
          val idempotent = old.exists(o =>
            newTs >= o.getLong(1) &&
              java.util.Arrays.equals(adder.serialize(folded), adder.serialize(o.get(0))))
          if (idempotent) out += drop(DropReasons.Idempotent)
          else {
            if (old.isEmpty && windows.isDefined && streaming)
              getHandle.registerTimer(Math.floorDiv(closeMicros + 999L, 1000L))
            results.updateValue(start, Row(folded, newTs))
            out += (if (windows.isDefined) late.update(keyValue, start, end, folded, newTs)
                    else late.update(keyValue, null, null, folded, newTs))
          }
        }
      }
    }
    out.iterator
  }

  override def handleExpiredTimer(
      key: Row,
      timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo): Iterator[Row] = {
    val watermarkMicros = timerValues.getCurrentWatermarkInMs() * 1000L
    val grace = windows.map(_.graceMicros).getOrElse(0L)
    val size = windows.map(_.sizeMicros).getOrElse(0L)
    val closed = results.keys().filter(start => start + size + grace <= watermarkMicros).toList
    closed.foreach(results.removeKey)
    Iterator.empty
  }
}

/** Session-windowed aggregation (Kafka's `SessionWindowedKStream`): a record joins every session
  * of its key that it is within `gap` of (inclusive); those sessions merge into one whose
  * aggregate is the merged aggregates plus the record. Unless the record is a session of its own,
  * each session it touches gets a tombstone (null value, timestamped with that session's end) and
  * the merged session its result, timestamped with its latest record (Kafka Streams 4.3). A record
  * whose merged session ends before `watermark - grace - gap` is late. State: one
  * (end, aggregate, timestamp) per session start, removed by a timer once no record can reach it.
  */
private[kstreams] final class SessionAggregateProcessor(
    layout: Keyed.Layout,
    initial: Option[Any],
    adder: ColumnFunction,
    merger: ColumnFunction,
    windows: SessionWindows,
    streaming: Boolean,
    drop: DropMarker,
    late: LateRows)
    extends StatefulProcessor[Row, Row, Row] {

  @transient private var sessions: MapState[Long, Row] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    val schema = StructType(
      Seq(StructField("end", LongType), StructField("aggregate", adder.dataType), StructField("ts", LongType)))
    sessions = getHandle.getMapState[Long, Row]("sessions", Encoders.scalaLong, Encoders.row(schema), TTLConfig.NONE)
  }

  /** The watermark from which on no record can reach a session ending at `end`. */
  private def expiry(end: Long): Long = end + windows.gapMicros + windows.graceMicros

  override def handleInputRows(key: Row, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val watermarkMicros = if (streaming) timerValues.getCurrentWatermarkInMs() * 1000L else Long.MinValue
    val keyValue = key.get(0)
    val valueIndex = layout.valueIndex(0)
    val out = mutable.ArrayBuffer.empty[Row]
    Keyed.arrivalOrder(rows, layout).foreach { r =>
      // a null value is folded in, as Kafka's KStreamSessionWindowAggregate does (spec section 5)
      if (keyValue == null) out += drop(DropReasons.NullKey)
      else {
        val ts = r.getLong(layout.tsIndex)
        val touching = sessions
          .iterator()
          .filter { case (start, s) =>
            ts >= start - windows.gapMicros && ts <= s.getLong(0) + windows.gapMicros
          }
          .toList
          .sortBy(_._1)
        val start = (ts :: touching.map(_._1)).min
        val end = (ts :: touching.map(_._2.getLong(0))).max
        // Kafka's rule (KStreamSessionWindowAggregate) with the watermark for stream time: late when
        // the merged session ends before `streamTime - grace - gap`
        if (end + windows.graceMicros + windows.gapMicros < watermarkMicros)
          out += late(r, valueIndex)
        else {
          // As Kafka: the touched sessions' aggregates are merged into a fresh initial aggregate
          // (reduce has none: the first session's aggregate starts it)
          val aggregates = touching.map(_._2.get(1))
          val merged =
            if (aggregates.isEmpty) None
            else
              Some(
                initial
                  .map(i => aggregates.foldLeft(i)((a, b) => merger(a, b)))
                  .getOrElse(aggregates.reduce((a, b) => merger(a, b))))
          val value = late.value(r, valueIndex)
          val folded = merged match {
            case Some(agg) => adder(agg, value)
            case None => initial.map(i => adder(i, value)).getOrElse(value)
          }
          val newTs = (ts :: touching.map(_._2.getLong(2))).max
          // As Kafka: unless the record is a session of its own ([ts, ts]), every session it
          // touches is removed with a tombstone timestamped with that session's own end, even one
          // the record lands inside without changing it; then the merged session is written.
          val alone = start == ts && end == ts
          val same = alone && folded != null && touching.exists { case (_, old) =>
            !old.isNullAt(1) && newTs >= old.getLong(2) &&
            java.util.Arrays.equals(adder.serialize(folded), adder.serialize(old.get(1)))
          }
          if (same) out += drop(DropReasons.Idempotent)
          else {
            if (!alone) touching.foreach { case (oldStart, old) =>
              sessions.removeKey(oldStart)
              out += late.update(keyValue, oldStart, old.getLong(0), null, old.getLong(0))
            }
            // a null aggregate deletes the session, as a put of null does in Kafka's session store
            if (folded == null) sessions.removeKey(start)
            else {
              sessions.updateValue(start, Row(end, folded, newTs))
              if (streaming) getHandle.registerTimer(Math.floorDiv(expiry(end), 1000L) + 1)
            }
            out += late.update(keyValue, start, end, folded, newTs)
          }
        }
      }
    }
    out.iterator
  }

  override def handleExpiredTimer(
      key: Row,
      timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo): Iterator[Row] = {
    val watermarkMicros = timerValues.getCurrentWatermarkInMs() * 1000L
    sessions
      .iterator()
      .filter { case (_, s) => expiry(s.getLong(0)) < watermarkMicros }
      .map(_._1)
      .toList
      .foreach(sessions.removeKey)
    Iterator.empty
  }
}

/** The one place the aggregation processors handle a record of a closed window, and where they
  * find a record's value.
  *
  * Dropped ([[LateRecords.Drop]]): a [[DropMarker]] with [[DropReasons.Late]]. Routed
  * ([[LateRecords.SideOutput]]): the side output wants the input record unchanged, but the
  * per-key input ([[Keyed.prepare]]) carries only the value; so the value becomes
  * `struct(value, record)` ([[LateRows.sideInput]]), the adder reads its first field, and a late
  * record leaves as a marker with [[DropReasons.LateSideOutput]] that also holds that struct in
  * [[Aggregate.LateRecord]] (the extra output column). Only a routed run pays for carrying the
  * whole record through the shuffle.
  */
private[kstreams] final class LateRows(drop: DropMarker, routed: Boolean) extends Serializable {

  /** The drop reason a late record is counted under. */
  val reason: String = if (routed) DropReasons.LateSideOutput else DropReasons.Late

  /** The record's value (the adder's input). */
  def value(row: Row, valueIndex: Int): Any =
    if (!routed) row.get(valueIndex) else row.getStruct(valueIndex).get(0)

  /** The output row for the late input row `row`: the marker, routed with its record. */
  def apply(row: Row, valueIndex: Int): Row = {
    val marker = drop(reason)
    if (!routed) marker else Row.fromSeq(marker.toSeq.updated(marker.size - 2, row.get(valueIndex)))
  }

  /** A forwarded output row: an update of the table (the record column, if any, and the drop
    * column null). */
  def update(key: Any, start: Any, end: Any, result: Any, ts: Long): Row =
    if (routed) Row(key, start, end, result, ts, null, null) else Row(key, start, end, result, ts, null)
}

private[kstreams] object LateRows {

  /** The aggregation's input: the stream's value, or with `routed` `struct(value, record)`, the
    * record being the stream's columns as they are (the timestamp without the watermark metadata
    * the operator adds, as windowed distinct's side output has it). */
  def sideInput(stream: KStream, routed: Boolean): Keyed.SideInput =
    if (!routed) Keyed.SideInput(stream)
    else {
      val df = stream.df
      val name = stream.columns.value
      if (!df.columns.contains(name)) throw StreamColumns.missing(df, name, "value")
      val record = df.columns.toIndexedSeq.map(c => col(HelperColumns.quote(c)).as(c, Metadata.empty))
      Keyed.SideInput(stream, Some(struct(col(HelperColumns.quote(name)).as("value"), struct(record: _*).as("record"))))
    }

  /** The adder's value type: the input's, or the first field of `struct(value, record)`. */
  def valueType(inputValue: DataType, routed: Boolean): DataType =
    if (!routed) inputValue else inputValue.asInstanceOf[StructType].fields(0).dataType
}
