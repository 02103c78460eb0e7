package kstreams
package internal
package table

import scala.collection.mutable

import org.apache.spark.sql.{Column, Encoders, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

import kstreams.internal.join._
import kstreams.internal.plan._

/** KTable-KTable join (spec section 5): state is each side's current value and timestamp per key;
  * every change of either side re-evaluates the key's result, timestamped with the later of the
  * two rows (a delete: the later of the delete and the other row). Within a micro-batch each
  * table's changes are applied in the order the table made them; the two tables' changes are
  * merged by timestamp, ties to the left. */
private[kstreams] object TableJoin {
  val Tombstone = HelperColumns.Tombstone

  def apply(left: KTable, right: KTable, joiner: (Column, Column) => Column, kind: JoinKind): KTable = {
    val input = Keyed.prepare(Seq(Keyed.SideInput(left.changeStream), Keyed.SideInput(right.changeStream)))
    val outputSchema = Stateful.outputSchema(
      Seq(
        input.keyField.copy(name = HelperColumns.Key, nullable = true),
        StructField(HelperColumns.value(0), input.valueTypes(0)),
        StructField(HelperColumns.value(1), input.valueTypes(1)),
        StructField(Tombstone, BooleanType),
        StructField(HelperColumns.TimestampMicros, LongType)
      ))
    val cols = left.columns
    val joined = joiner(col(HelperColumns.value(0)), col(HelperColumns.value(1)))
    val name = kind match {
      case JoinKind.Inner => "kstreams_table_join"
      case JoinKind.Left => "kstreams_table_left_join"
      case JoinKind.Outer => "kstreams_table_outer_join"
    }
    val result = Stateful
      .run(
        input.grouped,
        new TableJoinProcessor(input.layout, kind, input.valueTypes, new DropMarker(outputSchema)),
        input.descriptor(name),
        TimeMode.None(),
        outputSchema,
        Seq(DropReasons.NullKey)
      )
      .select(
        col(HelperColumns.Key).as(cols.key),
        when(col(Tombstone), lit(null)).otherwise(joined).as(cols.value),
        Keyed.timestampColumn(col(HelperColumns.TimestampMicros), cols.timestamp, input.watermarkDelayMs)
      )
    KTable(result, cols)
  }
}

/** One key's rows of both tables; emits the join result of each change. */
private[kstreams] final class TableJoinProcessor(
    layout: Keyed.Layout,
    kind: JoinKind,
    valueTypes: Seq[DataType],
    drop: DropMarker)
    extends StatefulProcessor[Row, Row, Row] {

  /** value0, ts0, value1, ts1: a side without a row has null value and timestamp. */
  @transient private var current: ValueState[Row] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    val schema = StructType(
      Seq(
        StructField("value0", valueTypes(0)),
        StructField("ts0", LongType),
        StructField("value1", valueTypes(1)),
        StructField("ts1", LongType)))
    current = getHandle.getValueState[Row]("current", Encoders.row(schema), TTLConfig.NONE)
  }

  override def handleInputRows(key: Row, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val ordered = Keyed.arrivalOrder(rows, layout)
    val keyValue = key.get(0)
    val values = Array[Any](null, null)
    val times = Array[Any](null, null)
    Option(current.get()).foreach { s =>
      values(0) = s.get(0); times(0) = s.get(1); values(1) = s.get(2); times(1) = s.get(3)
    }
    val out = mutable.ArrayBuffer.empty[Row]
    ordered.foreach { r =>
      if (keyValue == null) out += drop(DropReasons.NullKey)
      else {
        val side = r.getInt(layout.sideIndex)
        val other = 1 - side
        val ts = r.getLong(layout.timestampMicrosIndex)
        val hadRow = values(side) != null
        val value = r.get(layout.valueIndex(side))
        values(side) = value
        times(side) = if (value == null) null else ts
        val otherPresent = values(other) != null
        val resultTs = if (otherPresent) Math.max(ts, times(other).asInstanceOf[Long]) else ts
        def emit(tombstone: Boolean): Unit =
          out += Row(keyValue, values(0), values(1), tombstone, resultTs, null)
        // As Kafka Streams 4.3's KTableKTable*Join processors: a change is joined with the other
        // side's current row whenever the side that decides the result has one, even a delete of a
        // key this side never had (the inner join then forwards a tombstone); with no such row a
        // delete of an absent key changes nothing.
        val deleteOfAbsent = value == null && !hadRow
        kind match {
          case JoinKind.Inner => if (otherPresent) emit(tombstone = value == null)
          case JoinKind.Left =>
            if (side == 0) { if (!(deleteOfAbsent && !otherPresent)) emit(tombstone = value == null) }
            else if (values(0) != null) emit(tombstone = false)
          case JoinKind.Outer =>
            if (!(deleteOfAbsent && !otherPresent)) emit(tombstone = values(0) == null && values(1) == null)
        }
      }
    }
    if (values(0) == null && values(1) == null) current.clear()
    else current.update(Row(values(0), times(0), values(1), times(1)))
    out.iterator
  }
}
