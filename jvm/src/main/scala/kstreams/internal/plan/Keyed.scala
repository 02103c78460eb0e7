package kstreams
package internal
package plan

import scala.collection.mutable

import org.apache.spark.sql.{Column, DataFrame, Encoders, KeyValueGroupedDataset, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.ObservedNames
import org.apache.spark.sql.types._

import kstreams.internal.plan.HelperColumns._
import kstreams.internal.plan.HelperColumns.quote

/** Input of the per-key processors (plain aggregations, tables, table joins; the windowed ones
  * and stream-stream joins regroup it by [[TaskClocks]]): one or more streams ("sides")
  * brought to one schema and grouped by their key, so that one `transformWithState` group holds
  * everything a key needs, like a Kafka Streams store partitioned by key.
  *
  * Inside a micro-batch a group's rows are put in arrival order by [[Keyed.arrivalOrder]]: each
  * side by (partition, offset) (or timestamp without offsets), the sides merged by timestamp, ties
  * to the lower side (the left of a join).
  *
  * Results get a `timestamp` column that carries the input's watermark metadata, so a windowed
  * operator, a dedup or a Spark aggregation can follow in the same query.
  */
private[kstreams] object Keyed {
  val WatermarkDelayKey = "spark.watermarkDelayMs"

  /** Positions in the sides' rows, shared by all processors of this file's family; found by name
    * in the rows' schema, as [[PartitionInput.Layout]]'s are. */
  final case class Layout(
      sides: Int,
      keyIndex: Int,
      sideIndex: Int,
      partitionIndex: Int,
      orderIndex: Int,
      timestampMicrosIndex: Int,
      valueIndexes: IndexedSeq[Int]) {
    def valueIndex(side: Int): Int = valueIndexes(side)
  }

  object Layout {

    /** The positions of the helper columns in `schema`, rows of `sides` sides. */
    def of(schema: StructType, sides: Int): Layout = Layout(
      sides,
      keyIndex = schema.fieldIndex(Key),
      sideIndex = schema.fieldIndex(Side),
      partitionIndex = schema.fieldIndex(Partition),
      orderIndex = schema.fieldIndex(Order),
      timestampMicrosIndex = schema.fieldIndex(TimestampMicros),
      valueIndexes = (0 until sides).map(i => schema.fieldIndex(value(i)))
    )
  }

  /** The sides' rows ([[HelperColumns.Key]], [[HelperColumns.Side]], [[HelperColumns.Partition]],
    * [[HelperColumns.Order]], [[HelperColumns.TimestampMicros]], one value column per side) as
    * `rows`, and `grouped` by key for a per-key processor. ([[TaskClocks.prepare]] groups them by
    * a hash of the key instead, for processors that keep each partition's clock.) */
  final case class Input(
      rows: DataFrame,
      layout: Layout,
      keyField: StructField,
      valueTypes: Seq[DataType],
      watermarkDelayMs: Option[Long],
      streaming: Boolean,
      keyNames: Seq[String]) {

    lazy val grouped: KeyValueGroupedDataset[Row, Row] = {
      val keySchema = StructType(Seq(rows.schema(Key)))
      rows.groupBy(col(Key)).as[Row, Row](Encoders.row(keySchema), Encoders.row(rows.schema))
    }

    /** The operator's [[OperatorDescriptor]]: its grouping is each side's key column. */
    def descriptor(metricName: String): OperatorDescriptor =
      keyNames.zipWithIndex.foldLeft(OperatorDescriptor(metricName)) { case (d, (name, side)) =>
        d.column(if (keyNames.size == 1) "key" else s"key$side", Some(name))
      }
  }

  /** One side: a stream and the value it contributes (default: its value column). */
  final case class SideInput(stream: KStream, value: Option[Column] = None)

  def prepare(sides: Seq[SideInput]): Input = {
    val first = sides.head.stream
    val keyFields = sides.map(s => s.stream.columns.keyField(s.stream.df))
    keyFields.zip(sides).tail.foreach { case (f, s) =>
      if (f.dataType != keyFields.head.dataType)
        throw new KStreamsException(
          s"keys of the two sides differ in type: '${keyFields.head.name}' is " +
            s"${keyFields.head.dataType.simpleString}, '${f.name}' is ${f.dataType.simpleString}; " +
            "cast one side's key so both have the same type")
    }
    val valueColumns = sides.map { s =>
      s.value.getOrElse {
        val name = s.stream.columns.value
        if (!s.stream.df.columns.contains(name)) throw StreamColumns.missing(s.stream.df, name, "value")
        col(quote(name))
      }
    }
    val valueTypes = sides.zip(valueColumns).map { case (s, v) => KStream.resolveId(s.stream.df, v, "value") }
    val delays = sides.map(s => inputWatermarkDelayMs(s.stream))
    val streaming = first.df.isStreaming
    val selected = sides.zipWithIndex.map { case (side, index) =>
      // a streaming side without a watermark gets one of delay 0, so that windows close and state
      // is evicted; each side its own, since Spark 4.3 gives the second of two stateful operators
      // fed by one `withWatermark` a watermark of 0 (the manual, "Kafka Streams and us")
      val input = InputColumns(side.stream.df, side.stream.columns.resolve(side.stream.df), Some(0L))
      val values = sides.indices.map { i =>
        (if (i == index) valueColumns(i) else lit(null).cast(valueTypes(i))).as(value(i))
      }
      input.df.select(
        Seq(
          col(quote(keyFields(index).name)).as(Key),
          lit(index).as(Side),
          input.checkedPartition.as(Partition),
          input.order.as(Order),
          input.timestampMicros.as(TimestampMicros)
        ) ++ values: _*)
    }
    val unioned = ObservedNames.distinct(selected).reduce(_ union _)
    val defaultDelay = if (streaming) Some(0L) else None
    Input(
      unioned,
      Layout.of(unioned.schema, sides.size),
      keyFields.head,
      valueTypes,
      delays.flatten.reduceOption(_ max _).orElse(defaultDelay),
      streaming,
      keyFields.map(_.name)
    )
  }

  /** The watermark delay of the stream's timestamp column, if it has one. */
  private def inputWatermarkDelayMs(stream: KStream): Option[Long] = {
    val fields = stream.df.schema.fields
    fields
      .find(_.name == stream.columns.timestamp)
      .filter(_.metadata.contains(WatermarkDelayKey))
      .map(_.metadata.getLong(WatermarkDelayKey))
  }

  /** A group's rows of one micro-batch in arrival order (see the object's doc). */
  def arrivalOrder(rows: Iterator[Row], layout: Layout): Seq[Row] = {
    val bySide = Array.fill(layout.sides)(mutable.ArrayBuffer.empty[Row])
    rows.foreach(r => bySide(r.getInt(layout.sideIndex)) += r)
    val sorted = bySide.toSeq.map(
      _.sortBy(r =>
        (
          r.getInt(layout.partitionIndex),
          if (r.isNullAt(layout.orderIndex)) Long.MinValue else r.getLong(layout.orderIndex))).toSeq)
    ArrivalMerge.merge(
      sorted,
      r => if (r.isNullAt(layout.timestampMicrosIndex)) Long.MinValue else r.getLong(layout.timestampMicrosIndex))
  }

  /** `micros` as the result's timestamp column `name`, with the watermark metadata of the input
    * (so Spark's and kstreams' event-time operators accept it downstream). */
  def timestampColumn(micros: Column, name: String, watermarkDelayMs: Option[Long]): Column = {
    val metadata = watermarkDelayMs match {
      case Some(delay) => new MetadataBuilder().putLong(WatermarkDelayKey, delay).build()
      case None => Metadata.empty
    }
    timestamp_micros(micros).as(name, metadata)
  }
}
