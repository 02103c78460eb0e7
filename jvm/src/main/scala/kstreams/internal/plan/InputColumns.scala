package kstreams
package internal
package plan

import org.apache.spark.sql.{Column, DataFrame, Row}
import org.apache.spark.sql.catalyst.plans.logical.{CollectMetrics, EventTimeWatermark}
import org.apache.spark.sql.classic
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.NotNullOrFail
import org.apache.spark.sql.types._

import kstreams.internal.plan.HelperColumns.quote

/** An operator's input with the columns of spec section 1 derived from it; the one place that
  * does so, for every operator (arrival-order and per-key alike).
  *
  * @param df              the input with the operator's default watermark when it had none, and
  *                        without its null-timestamp records when the stream skips them
  * @param partition       the input partition as an int (0 without a partition column; null stays
  *                        null, see [[checkedPartition]])
  * @param offset          the offset as a long, if the stream has an offset column; a null fails
  *                        the query naming the column and partition
  * @param timestampMicros the timestamp in microseconds; a null fails the query naming the column,
  *                        partition and offset, unless the operator needs no timestamp
  */
private[kstreams] final case class InputColumns(
    df: DataFrame,
    partition: Column,
    offset: Option[Column],
    private val rawOffset: Option[Column],
    timestampMicros: Column,
    private val partitionName: Option[String]) {

  /** A record's place in its partition: the offset, or the timestamp without an offset column. */
  def order: Column = offset.getOrElse(timestampMicros)

  /** The `transformWithState` group of an arrival-order operator: one per input partition, as a
    * Kafka Streams task; a null partition gets -1 so that it reaches [[checkedPartition]]. */
  def group: Column = coalesce(partition, lit(-1))

  /** [[partition]], failing the query on a null with the column and offset: every operator's
    * partition, since a record without one belongs to no task (spec section 1). */
  def checkedPartition: Column =
    InputColumns.notNullOrFail(
      partition,
      s"null partition in column '${partitionName.getOrElse("")}' at ",
      partition,
      rawOffset,
      "; fix the source, or pass partition=None (Scala: StreamColumns(partition = None)) to read the stream as " +
        "one partition"
    )
}

private[kstreams] object InputColumns {

  /** Derives the columns of `resolved` on `df`, first checking that its session runs the RocksDB
    * state store every `transformWithState` needs ([[SparkSessionChecks.requireStateStore]]).
    *
    * @param watermarkDelayMicros the watermark an event-time operator adds to a streaming input
    *                             that has none (spec section 1, "Watermark"); None adds nothing
    */
  def apply(df: DataFrame, resolved: ResolvedColumns, watermarkDelayMicros: Option[Long]): InputColumns = {
    SparkSessionChecks.requireStateStore(df)
    val tsName = resolved.timestamp.map(_.name)
    val partition = resolved.partition match {
      case Some(f) => col(quote(f.name)).cast(IntegerType)
      case None => lit(0)
    }
    val rawOffset = resolved.offset.map(f => col(quote(f.name)).cast(LongType))
    // a null offset fails, naming where: without it the record has no place in its partition
    val offset = resolved.offset.map { f =>
      NotNullOrFail.column(
        col(quote(f.name)).cast(LongType),
        Seq(partition),
        Seq(
          s"null offset in column '${f.name}' at partition ",
          "; fix the source, or pass offset=None (Scala: StreamColumns(offset = None)) to order each partition's " +
            "records by timestamp"
        )
      )
    }
    val failOnNull = resolved.timestampRequired && resolved.names.onNullTimestamp == NullTimestamps.Fail
    val tsMicros = tsName match {
      case Some(name) if failOnNull =>
        notNullOrFail(
          unix_micros(col(quote(name))),
          s"null timestamp in column '$name' at ",
          partition,
          rawOffset,
          "; fix the producer, or pass on_null_timestamp='skip' (Scala: NullTimestamps.Skip) to skip and count " +
            "such records"
        )
      case Some(name) => unix_micros(col(quote(name)))
      case None => lit(null).cast(LongType)
    }
    InputColumns(
      prepared(df, resolved, watermarkDelayMicros),
      partition,
      offset,
      rawOffset,
      tsMicros,
      resolved.partition.map(_.name))
  }

  /** `df` with the default watermark if it has none, and, when the stream skips null timestamps,
    * without those records: they never reach a processor, and their count is the observed metric
    * `kstreams_null_timestamps` (so `skip` means the same for every operator). */
  private def prepared(df: DataFrame, resolved: ResolvedColumns, watermarkDelayMicros: Option[Long]): DataFrame = {
    val tsName = resolved.timestamp.map(_.name)
    val watermarked = (watermarkDelayMicros, tsName) match {
      case (Some(delay), Some(ts)) if df.isStreaming && !hasWatermark(df) =>
        df.withWatermark(ts, s"$delay microseconds")
      case _ => df
    }
    (resolved.names.onNullTimestamp, tsName) match {
      case (_, None) | (NullTimestamps.Fail, _) => watermarked
      case (NullTimestamps.Skip, Some(ts)) =>
        watermarked
          .observe(
            observationName(watermarked, "kstreams_null_timestamps"),
            countWhere(col(quote(ts)).isNull).as(DropReasons.NullTimestamp))
          .where(col(quote(ts)).isNotNull)
    }
  }

  /** `value`, failing the task where it is null with `before`, where the record came from
    * (`partition 3, offset 42`; `offset n/a (no offset column)` without one), then `after`. */
  private def notNullOrFail(
      value: Column,
      before: String,
      partition: Column,
      offset: Option[Column],
      after: String): Column = offset match {
    case Some(o) => NotNullOrFail.column(value, Seq(partition, o), Seq(before + "partition ", ", offset ", after))
    case None =>
      NotNullOrFail.column(value, Seq(partition), Seq(before + "partition ", ", offset n/a (no offset column)" + after))
  }

  /** The user's schema as arrival-order operators return it: the timestamp column without its
    * watermark metadata, which they strip to keep late records (see [[PartitionInput]]). */
  def userSchema(df: DataFrame, resolved: ResolvedColumns): StructType =
    StructType(df.schema.fields.map(f =>
      if (resolved.timestamp.exists(_.name == f.name)) f.copy(metadata = Metadata.empty) else f))

  def hasWatermark(df: DataFrame): Boolean =
    df.asInstanceOf[classic.Dataset[Row]]
      .queryExecution
      .logical
      .exists(_.isInstanceOf[EventTimeWatermark])

  /** The number of rows where `condition` holds, for an observed metric: `count_if`'s result
    * (a long, 0 without rows). Why not `count_if`: Spark rewrites it into a common expression,
    * which the optimizer plans as one more `Project` under the metric's `CollectMetrics`, and the
    * plan is analyzed, optimized and code-generated again every micro-batch. */
  def countWhere(condition: Column): Column = count(when(condition, lit(1)))

  /** `base`, or `base_2`, `base_3`... if the plan already observes under that name: names stay the
    * same when the same code restarts a query, and never clash inside one query. */
  def observationName(df: DataFrame, base: String): String = {
    val taken = df
      .asInstanceOf[classic.Dataset[Row]]
      .queryExecution
      .logical
      .collect { case m: CollectMetrics => m.name }
      .toSet
    (Iterator.single(base) ++ Iterator.from(2).map(i => s"${base}_$i")).find(!taken(_)).get
  }
}
