package kstreams
package internal
package plan

import org.apache.spark.sql.{DataFrame, Encoder, Encoders, KeyValueGroupedDataset, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.streaming.{OutputMode, StatefulProcessor, TimeMode}
import org.apache.spark.sql.types.{StringType, StructField, StructType}

import kstreams.internal.plan.HelperColumns.{Dropped, DroppedCount}

/** The one place a kstreams operator meets `transformWithState`: its time mode, output mode and
  * encoder, the counting of what the processor forwarded and dropped, and the check that a
  * restarted query runs the operator its checkpoint was written by ([[OperatorDescriptor]]). (The
  * RocksDB check comes earlier, with the input: [[InputColumns]].) */
private[kstreams] object Stateful {

  /** Event-time timers on a streaming input. A batch input has no watermark; its processors close
    * what is open at the end of their input instead. */
  def eventTime(streaming: Boolean): TimeMode = if (streaming) TimeMode.EventTime() else TimeMode.None()

  /** Runs `processor` over `grouped`; its output rows have `outputSchema`, whose last column is
    * [[HelperColumns.Dropped]] (see [[DropMarker]]). Returns the forwarded rows without that column,
    * counted (forwarded, and each of `reasons`) in the observed metric the descriptor names
    * ([[OperatorDescriptor.metricName]]: a call site names its operator once). */
  def run[K](
      grouped: KeyValueGroupedDataset[K, Row],
      processor: StatefulProcessor[K, Row, Row],
      descriptor: OperatorDescriptor,
      timeMode: TimeMode,
      outputSchema: StructType,
      reasons: Seq[String]): DataFrame =
    forwardedOnly(runAll(grouped, processor, descriptor, timeMode, outputSchema, reasons))

  /** [[run]] with every row the processor emitted, [[Dropped]] included: the forwarded ones (null),
    * the dropped ones and those routed aside (e.g. [[DropReasons.LateSideOutput]]), counted. */
  def runAll[K](
      grouped: KeyValueGroupedDataset[K, Row],
      processor: StatefulProcessor[K, Row, Row],
      descriptor: OperatorDescriptor,
      timeMode: TimeMode,
      outputSchema: StructType,
      reasons: Seq[String]): DataFrame = {
    require(outputSchema.last.name == Dropped, s"the last output column must be $Dropped")
    count(
      transform(grouped, processor, descriptor, timeMode)(Encoders.row(outputSchema)),
      descriptor.metricName,
      reasons)
  }

  /** Runs a processor that counts its drops itself ([[CompactOutput]]): every row it emitted, the
    * forwarded ones ([[Dropped]] null), the count rows, and the records it routed aside (e.g.
    * [[DropReasons.LateSideOutput]]); pick the forwarded ones with [[forwardedOnly]]. Each reason
    * of `reasons` is counted in the operator's metric ([[OperatorDescriptor.metricName]]). */
  def runCountedAll[K, V](
      grouped: KeyValueGroupedDataset[K, V],
      processor: StatefulProcessor[K, V, CompactOutput],
      descriptor: OperatorDescriptor,
      timeMode: TimeMode,
      reasons: Seq[String]): DataFrame = {
    val processed =
      transform(grouped, processor, descriptor, timeMode)(Encoders.product[CompactOutput]).toDF()
    val dropped = col(Dropped)
    val counts = InputColumns.countWhere(dropped.isNull).as("forwarded") +: reasons.map(r =>
      coalesce(sum(when(dropped === lit(r), col(DroppedCount))), lit(0L)).as(r))
    processed.observe(InputColumns.observationName(processed, descriptor.metricName), counts.head, counts.tail: _*)
  }

  /** The rows of [[runAll]] or [[runCountedAll]] that were forwarded or routed to the side output
    * ([[DropReasons.LateSideOutput]]), with the drop columns; [[sideOutputReason]] tells them apart. */
  def forwardedOrRouted(all: DataFrame): DataFrame =
    all.where(col(Dropped).isNull || col(Dropped) === lit(DropReasons.LateSideOutput))

  /** [[LateRecords.ReasonColumn]] of [[forwardedOrRouted]]'s rows: `reason` for a routed row, null
    * for a forwarded one. */
  def sideOutputReason(reason: String): org.apache.spark.sql.Column =
    when(col(Dropped) === lit(DropReasons.LateSideOutput), lit(reason)).as(LateRecords.ReasonColumn)

  /** The forwarded rows of [[runAll]] or [[runCountedAll]], without the drop columns. */
  def forwardedOnly(all: DataFrame): DataFrame = all.where(col(Dropped).isNull).drop(Dropped, DroppedCount)

  /** `transformWithState` without the counting, for a processor whose output has no drop column
    * (the processor API's runner, whose drops are the user's choice). */
  def transform[K, V, O: Encoder](
      grouped: KeyValueGroupedDataset[K, V],
      processor: StatefulProcessor[K, V, O],
      descriptor: OperatorDescriptor,
      timeMode: TimeMode): org.apache.spark.sql.Dataset[O] =
    grouped.transformWithState(new DescribedProcessor(processor, descriptor), timeMode, OutputMode.Append())

  /** Counts forwarded and dropped rows (by reason) as the observed metric `name` of the query
    * progress. A processor emits one [[DropMarker]] row per dropped record, so the counts are
    * exact in every micro-batch and visible in `lastProgress.observedMetrics`. */
  private def count(processed: DataFrame, name: String, reasons: Seq[String]): DataFrame = {
    val dropped = col(Dropped)
    val counts = InputColumns.countWhere(dropped.isNull).as("forwarded") +:
      reasons.map(r => InputColumns.countWhere(dropped === lit(r)).as(r))
    processed.observe(InputColumns.observationName(processed, name), counts.head, counts.tail: _*)
  }

  /** `fields` followed by the drop column: the output schema of a processor run by [[run]]. */
  def outputSchema(fields: Seq[StructField]): StructType = StructType(fields :+ StructField(Dropped, StringType))
}

/** The output row a processor emits for a record it drops: nulls but the reason, as wide as the
  * output schema it is built from, so no processor counts columns. */
private[kstreams] final class DropMarker(outputSchema: StructType) extends Serializable {
  private val width = outputSchema.size
  require(outputSchema.last.name == Dropped, s"the last output column must be $Dropped")

  def apply(reason: String): Row = {
    val values = new Array[Any](width)
    values(width - 1) = reason
    Row.fromSeq(values.toSeq)
  }
}
