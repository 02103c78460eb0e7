package kstreams
package internal
package table

import scala.collection.mutable

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.ValueSerializer
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

import kstreams.internal.plan._

/** `KStream.toTable` (spec section 6): plans [[TableSourceProcessor]] over the stream. */
private[kstreams] object TableSource {

  /** `stream` read as a table (Kafka's `toTable()`): the latest value per key in arrival order, a
    * null value deletes. An update equal (serialized) to the stored value with a timestamp not
    * older than the stored one changes nothing and is dropped and counted as
    * `idempotent-updates-dropped` (KIP-557); a null key is dropped and counted. */
  def apply(stream: KStream): KTable = {
    val input = Keyed.prepare(Seq(Keyed.SideInput(stream)))
    val valueType = input.valueTypes.head
    val outputSchema = Stateful.outputSchema(
      Seq(
        input.keyField.copy(name = HelperColumns.Key, nullable = true),
        StructField(HelperColumns.value(0), valueType),
        StructField(HelperColumns.TimestampMicros, LongType)
      ))
    val cols = stream.columns
    val result = Stateful
      .run(
        input.grouped,
        new TableSourceProcessor(input.layout, valueType, new DropMarker(outputSchema)),
        input.descriptor("kstreams_to_table").withStateTypes(StructType(Seq(StructField("value", valueType)))),
        TimeMode.None(),
        outputSchema,
        Seq(DropReasons.NullKey, DropReasons.Idempotent)
      )
      .select(
        col(HelperColumns.Key).as(cols.key),
        col(HelperColumns.value(0)).as(cols.value),
        Keyed.timestampColumn(col(HelperColumns.TimestampMicros), cols.timestamp, input.watermarkDelayMs)
      )
    KTable(result, cols)
  }
}

/** Keeps one key's current (serialized value, timestamp) and forwards the changes. */
private[kstreams] final class TableSourceProcessor(layout: Keyed.Layout, valueType: DataType, drop: DropMarker)
    extends StatefulProcessor[Row, Row, Row]
    with RealTimeCapable {
  @transient private var current: ValueState[Row] = _
  private val valueIndex = layout.valueIndex(0)
  private val serialize = new ValueSerializer(valueType)

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    val schema = StructType(Seq(StructField("bytes", BinaryType), StructField("ts", LongType)))
    current = getHandle.getValueState[Row]("current", Encoders.row(schema), TTLConfig.NONE)
  }

  override def handleInputRows(key: Row, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val keyValue = key.get(0)
    val out = mutable.ArrayBuffer.empty[Row]
    var stored: Option[Row] = Option(current.get())
    Keyed.arrivalOrder(rows, layout).foreach { r =>
      if (keyValue == null) out += drop(DropReasons.NullKey)
      else {
        val ts = r.getLong(layout.timestampMicrosIndex)
        val value = r.get(valueIndex)
        if (value == null) {
          stored = None
          out += Row(keyValue, null, ts, null)
        } else {
          val bytes = serialize(value)
          val idempotent =
            stored.exists(s => ts >= s.getLong(1) && java.util.Arrays.equals(bytes, s.getAs[Array[Byte]](0)))
          if (idempotent) out += drop(DropReasons.Idempotent)
          else {
            stored = Some(Row(bytes, ts))
            out += Row(keyValue, value, ts, null)
          }
        }
      }
    }
    stored match {
      case Some(s) => current.update(s)
      case None => current.clear()
    }
    out.iterator
  }
}
