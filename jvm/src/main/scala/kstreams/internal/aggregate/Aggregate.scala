package kstreams
package internal
package aggregate

import scala.collection.mutable

import org.apache.spark.sql.{Column, DataFrame, Encoders, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.ColumnFunction
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

import kstreams.internal.plan._
import kstreams.internal.state.PartitionClocks
import kstreams.internal.window.WindowedDistinct

/** `groupByKey.count() / reduce(adder) / aggregate(initializer, adder)`, optionally over tumbling
  * or session windows (spec section 5): a table of running results, emitted as an update stream
  * (key, [window,] value, timestamp). The result timestamp is the largest timestamp folded in
  * (KIP-258); updates that change neither value nor make the timestamp older are dropped and
  * counted as `idempotent-updates-dropped` (KIP-557, spec section 6).
  *
  * Records are folded per key in arrival order; records with a null key are skipped and counted,
  * and so are null values of plain (not windowed) aggregations (as Kafka Streams 4.3 does). A
  * window closes when the stream time of the record's own input partition reaches `end + grace`
  * ([[WindowedAggregateProcessor]], over [[TaskClocks]] input); a record of a closed window is
  * late: dropped (`late_dropped`) or, with [[LateRecords.SideOutput]], routed unchanged to the
  * table's [[KTable.sideOutput]] (`late_side_output`), see [[LateRows]].
  */
private[kstreams] object Aggregate {

  /** Names the adder's inputs have: the running aggregate and the record's value. */
  val AggInput = HelperColumns.AggregateSoFar
  val ValueInput = HelperColumns.AggregateValue
  val WindowStart = HelperColumns.WindowStart
  val WindowEnd = HelperColumns.WindowEnd
  val Result = HelperColumns.AggregateResult
  val ResultTs = HelperColumns.AggregateResultTs

  /** The processor's output column with a late record routed to the side output ([[LateRows]]). */
  val LateRecord = HelperColumns.LateRecord

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
    // one metric shape for every aggregation, whether or not a reason can occur in it
    val reasons = Seq(DropReasons.NullKey, DropReasons.NullValue, late.reason, DropReasons.Idempotent)
    val idleMs = PartitionClocks.idleTimeoutMs(spark)
    // a batch DataFrame has no checkpoint, so no grace of an earlier run
    val streaming = stream.df.isStreaming
    def spread = TaskClocks.prepare(input, join = false)
    val keyType = input.keyField.dataType

    /** A windowed aggregation, its descriptor with its windows; a restart may change their grace
      * (the windows closed under the old one stay closed: [[kstreams.internal.state.ClosedFloors]]). */
    def windowedRun(
        name: String,
        withWindows: OperatorDescriptor => OperatorDescriptor,
        processor: WindowedAggregateProcessor): DataFrame =
      Stateful.runAll(
        spread.grouped,
        processor,
        TaskClocks.describe(withWindows(input.descriptor(name)).mayChangeOnRestart("grace")),
        TimeMode.None(),
        outputSchema,
        reasons)

    val all = windowing match {
      case Unwindowed =>
        Stateful.runAll(
          input.grouped,
          new AggregateProcessor(input.layout, initial, adder, drop),
          input.descriptor(fold.name),
          TimeMode.None(),
          outputSchema,
          reasons
        )
      case Tumbling(windows) =>
        windowedRun(
          fold.name + "_windowed",
          _.windows(windows),
          new TumblingAggregateProcessor(
            spread.layout,
            keyType,
            initial,
            adder,
            windows,
            idleMs,
            streaming,
            drop,
            late))
      case Sessions(windows) =>
        val merger = resolve("session merger", aggType, fold.merger.getOrElse(fold.adder))
        windowedRun(
          fold.name + "_session_windowed",
          _.windows(windows),
          new SessionAggregateProcessor(
            spread.layout,
            keyType,
            initial,
            adder,
            merger,
            windows,
            idleMs,
            streaming,
            drop,
            late)
        )
    }
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

/** A plain (not windowed) aggregation: folds one key's records in arrival order into one
  * (aggregate, timestamp); nothing is ever late and nothing expires, so it needs no clock and
  * keeps one group per key. */
private[kstreams] final class AggregateProcessor(
    layout: Keyed.Layout,
    initial: Option[Any],
    adder: ColumnFunction,
    drop: DropMarker)
    extends StatefulProcessor[Row, Row, Row]
    with RealTimeCapable {

  // one entry under window start 0: the state layout of the checkpoints written when windowed
  // aggregations shared this processor, which a restart keeps reading
  @transient private var results: MapState[Long, Row] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    val stateSchema = StructType(Seq(StructField("aggregate", adder.dataType), StructField("ts", LongType)))
    results = getHandle.getMapState[Long, Row]("results", Encoders.scalaLong, Encoders.row(stateSchema), TTLConfig.NONE)
  }

  override def handleInputRows(key: Row, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val keyValue = key.get(0)
    val valueIndex = layout.valueIndex(0)
    val out = mutable.ArrayBuffer.empty[Row]
    Keyed.arrivalOrder(rows, layout).foreach { r =>
      if (keyValue == null) out += drop(DropReasons.NullKey)
      // Kafka Streams 4.3 skips a null value in plain aggregations only (KStreamAggregate); its
      // windowed aggregations fold it in (spec section 5)
      else if (r.isNullAt(valueIndex)) out += drop(DropReasons.NullValue)
      else {
        val ts = r.getLong(layout.timestampMicrosIndex)
        // a null aggregate is no aggregate, as in Kafka's stores (a put of null deletes): the
        // next record starts from the initializer again (reduce: from its own value)
        val old = (if (results.containsKey(0L)) Some(results.getValue(0L)) else None).filter(!_.isNullAt(0))
        val value = r.get(valueIndex)
        val folded = old match {
          case Some(o) => adder(o.get(0), value)
          case None => initial.map(i => adder(i, value)).getOrElse(value)
        }
        val newTs = old.map(o => Math.max(o.getLong(1), ts)).getOrElse(ts)
        val idempotent = old.exists(o =>
          newTs >= o.getLong(1) && java.util.Arrays.equals(adder.serialize(folded), adder.serialize(o.get(0))))
        if (idempotent) out += drop(DropReasons.Idempotent)
        else {
          results.updateValue(0L, Row(folded, newTs))
          out += Row(keyValue, null, null, folded, newTs, null)
        }
      }
    }
    out.iterator
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
