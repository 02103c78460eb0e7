package kstreams
package internal
package dedup

import org.apache.spark.sql.{Column, DataFrame, Encoders, Row}
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

import kstreams.internal.plan._
import kstreams.internal.state.OrderCheck

/** Sequence-number deduplication (spec section 4): per input partition, a record is
  * forwarded only if its sequence number is greater than the highest forwarded on that partition.
  * A null sequence number is forwarded and leaves the high-water mark unchanged.
  */
private[kstreams] object DeduplicateBySequence {
  val Sequence = HelperColumns.Sequence

  def apply(df: DataFrame, columns: StreamColumns, sequence: Column): DataFrame = {
    val resolved = columns.resolve(df, timestampRequired = false)
    KStream.resolveId(df, sequence, "sequence") match {
      case LongType | IntegerType | ShortType | ByteType =>
      case other =>
        throw new KStreamsException(
          s"sequence expression $sequence has type ${other.simpleString}; it must be an integer " +
            "(cast it, e.g. col('seq').cast('long'))")
    }
    val prepared =
      PartitionInput.prepare(
        df,
        resolved,
        Seq(Sequence -> sequence.cast(LongType)),
        watermarkDelayMicros = None,
        roundRobin = true)
    val processor = new SequenceProcessor(prepared.layout, prepared.layout.extraIndex(Sequence))
    Stateful.run(
      prepared.grouped,
      processor,
      OperatorDescriptor.arrivalOrder("kstreams_deduplicate_by_sequence", resolved).expression("sequence", sequence),
      TimeMode.None(),
      prepared.outputSchema(),
      Seq(DropReasons.Duplicate)
    )
  }
}

/** Keeps one number per input partition: the highest sequence number forwarded, written at the
  * end of each call (in a real-time query each record comes in a call of its own: one state write
  * per forwarded record). */
private[kstreams] final class SequenceProcessor(layout: PartitionInput.Layout, sequenceIndex: Int)
    extends StatefulProcessor[Int, Row, Row]
    with RealTimeCapable {

  private val output = new PartitionInput.Output(layout, extraWidth = 0)
  @transient private var highWater: MapState[Int, Long] = _
  @transient private lazy val order = new OrderCheck(layout.partitionIndex, layout.orderIndex)

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit =
    highWater = getHandle.getMapState[Int, Long]("highWater", Encoders.scalaInt, Encoders.scalaLong, TTLConfig.NONE)

  override def handleInputRows(group: Int, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val marks = scala.collection.mutable.HashMap.empty[Int, Long]
    val changed = scala.collection.mutable.HashSet.empty[Int]
    rows.map { row =>
      order.check(row)
      if (row.isNullAt(sequenceIndex)) output.forward(row)
      else {
        val partition = row.getInt(layout.partitionIndex)
        val sequence = row.getLong(sequenceIndex)
        val mark = marks.getOrElseUpdate(
          partition,
          if (highWater.containsKey(partition)) highWater.getValue(partition) else Long.MinValue)
        if (sequence > mark) {
          marks(partition) = sequence
          changed += partition
          output.forward(row)
        } else output.drop(row, DropReasons.Duplicate)
      }
    } ++ {
      changed.foreach(p => highWater.updateValue(p, marks(p)))
      Iterator.empty
    }
  }
}
