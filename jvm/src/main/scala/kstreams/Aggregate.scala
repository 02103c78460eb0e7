package kstreams

import scala.collection.mutable

import org.apache.spark.sql.{Column, DataFrame, Encoders, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.ColumnFunction
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

/** `groupByKey.count() / reduce(adder) / aggregate(initializer, adder)`, optionally over tumbling
  * windows (spec section 5): a table of running results, emitted as an update stream
  * (key, [window,] value, timestamp). The result timestamp is the largest timestamp folded in
  * (KIP-258); updates that change neither value nor make the timestamp older are dropped and
  * counted as `idempotent-updates-dropped` (KIP-557, spec section 6).
  *
  * Records are folded per key in arrival order ([[Keyed.arrivalOrder]]); records with a null key
  * or value are skipped and counted (as Kafka Streams does). A window closes when the query's
  * event-time watermark reaches `end + grace`; a record of a closed window is dropped as late.
  */
private[kstreams] object Aggregate {
  /** Names the adder's inputs have: the running aggregate and the record's value. */
  val AggInput = "__kstreams_agg"
  val ValueInput = "__kstreams_value"
  val WindowStart = "__kstreams_window_start"
  val WindowEnd = "__kstreams_window_end"
  val Result = "__kstreams_result"
  val ResultTs = "__kstreams_result_ts"

  /** How to fold: `initializer` None means "the first value" (reduce). */
  final case class Fold(name: String, initializer: Option[Column], adder: Column)

  def count: Fold = Fold("kstreams_count", Some(lit(0L)), col(AggInput) + lit(1L))

  def run(stream: KStream, fold: Fold, windows: Option[TimeWindows]): KTable = {
    val input = Keyed.prepare(Seq(Keyed.SideInput(stream)))
    val spark = stream.df.sparkSession
    val valueType = input.valueTypes.head
    val (initial, aggType) = fold.initializer match {
      case Some(init) => val (v, t) = ColumnFunction.constant(spark, init); (Some(v), t)
      case None => (None, valueType)
    }
    val adder = try {
      ColumnFunction(spark, Seq(AggInput -> aggType, ValueInput -> valueType), fold.adder, Some(aggType))
    } catch {
      case e: org.apache.spark.sql.AnalysisException => throw new KStreamsException(
        s"the adder of ${fold.name.stripPrefix("kstreams_")} does not resolve over the aggregate " +
          s"(${aggType.simpleString}) and the value (${valueType.simpleString}): " +
          e.getMessage.linesIterator.next(), e)
    }
    val windowed = windows.isDefined
    val timeMode = if (windowed && input.streaming) TimeMode.EventTime() else TimeMode.None()
    val outputSchema = StructType(Seq(
      input.keyField.copy(name = Keyed.Key, nullable = true),
      StructField(WindowStart, LongType), StructField(WindowEnd, LongType),
      StructField(Result, aggType), StructField(ResultTs, LongType),
      StructField(ArrivalOrder.Dropped, StringType)))
    val processed = input.grouped.transformWithState(
      new AggregateProcessor(input.layout, initial, adder, windows, input.streaming),
      timeMode, OutputMode.Append())(Encoders.row(outputSchema))
    val name = if (windowed) fold.name + "_windowed" else fold.name
    val finished = ArrivalOrder.finish(processed, name, KeyedReasons.Aggregate)
    val cols = stream.columns
    val window =
      if (windowed) Seq(struct(timestamp_micros(col(WindowStart)).as("start"),
        timestamp_micros(col(WindowEnd)).as("end")).as("window"))
      else Nil
    val result = finished.select(Seq(col(Keyed.Key).as(cols.key)) ++ window ++ Seq(
      col(Result).as(cols.value),
      Keyed.timestampColumn(col(ResultTs), cols.timestamp, input.watermarkDelayMs)): _*)
    KTable(result, cols)
  }
}

/** Folds one key's records; state is one (aggregate, timestamp) per window start (0 when not
  * windowed), plus an event-time timer per window that removes it once the window has closed. */
private[kstreams] final class AggregateProcessor(
    layout: Keyed.Layout,
    initial: Option[Any],
    adder: ColumnFunction,
    windows: Option[TimeWindows],
    streaming: Boolean) extends StatefulProcessor[Row, Row, Row] {

  @transient private var results: MapState[Long, Row] = _
  private val width = 6

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    val stateSchema = StructType(Seq(StructField("aggregate", adder.dataType), StructField("ts", LongType)))
    results = getHandle.getMapState[Long, Row](
      "results", Encoders.scalaLong, Encoders.row(stateSchema), TTLConfig.NONE)
  }

  private def marker(reason: String): Row = Keyed.marker(width, reason)

  override def handleInputRows(key: Row, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val watermarkMicros =
      if (windows.isDefined && streaming) timerValues.getCurrentWatermarkInMs() * 1000L else Long.MinValue
    val keyValue = key.get(0)
    val valueIndex = layout.valueIndex(0)
    val out = mutable.ArrayBuffer.empty[Row]
    Keyed.arrivalOrder(rows, layout).foreach { r =>
      if (keyValue == null) out += marker(KeyedReasons.NullKey)
      else if (r.isNullAt(layout.tsIndex)) out += marker(KeyedReasons.NullTimestamp)
      else if (r.isNullAt(valueIndex)) out += marker(KeyedReasons.NullValue)
      else {
        val ts = r.getLong(layout.tsIndex)
        val (start, end) = windows match {
          case Some(w) => val s = Math.floorDiv(ts, w.sizeMicros) * w.sizeMicros; (s, s + w.sizeMicros)
          case None => (0L, 0L)
        }
        val closeMicros = end + windows.map(_.graceMicros).getOrElse(0L)
        if (windows.isDefined && closeMicros <= watermarkMicros) out += marker(ArrivalOrder.Reasons.Late)
        else {
          val old = if (results.containsKey(start)) Some(results.getValue(start)) else None
          val value = r.get(valueIndex)
          val folded = old match {
            case Some(o) => adder(o.get(0), value)
            case None => initial.map(i => adder(i, value)).getOrElse(value)
          }
          val newTs = old.map(o => Math.max(o.getLong(1), ts)).getOrElse(ts)
          val idempotent = old.exists(o => newTs >= o.getLong(1) &&
            java.util.Arrays.equals(adder.serialize(folded), adder.serialize(o.get(0))))
          if (idempotent) out += marker(KeyedReasons.Idempotent)
          else {
            if (old.isEmpty && windows.isDefined && streaming)
              getHandle.registerTimer(Math.floorDiv(closeMicros + 999L, 1000L))
            results.updateValue(start, Row(folded, newTs))
            out += (if (windows.isDefined) Row(keyValue, start, end, folded, newTs, null)
              else Row(keyValue, null, null, folded, newTs, null))
          }
        }
      }
    }
    out.iterator
  }

  override def handleExpiredTimer(
      key: Row, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo): Iterator[Row] = {
    val watermarkMicros = timerValues.getCurrentWatermarkInMs() * 1000L
    val grace = windows.map(_.graceMicros).getOrElse(0L)
    val size = windows.map(_.sizeMicros).getOrElse(0L)
    val closed = results.keys().filter(start => start + size + grace <= watermarkMicros).toList
    closed.foreach(results.removeKey)
    Iterator.empty
  }
}
