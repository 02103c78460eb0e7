package kstreams

import java.time.Duration

import org.apache.spark.sql.{Column, DataFrame, SparkSession}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types.DataType

/** A Kafka-Streams-style view of a DataFrame (streaming or batch).
  *
  * Operators return a new `KStream`; [[df]] is the result. Deduplication keeps the input's columns
  * and drops rows, never altering them (except that the timestamp column loses its watermark
  * metadata: call `withWatermark` again downstream if a Spark operator needs it).
  *
  * {{{
  * val deduped = KStream(kafkaDf).deduplicateByKey(Duration.ofSeconds(10)).df
  * KStream(df, StreamColumns(key = "user", timestamp = "event_time"))
  *   .deduplicateByKeyValue(col("event_id"), "1 minute")
  * }}}
  */
final class KStream(val df: DataFrame, val columns: StreamColumns) {

  /** Drops a record when a record with the same key and a timestamp at most `interval` away was
    * forwarded before on the same input partition (KIP-655 `deduplicateByKey`).
    *
    * {{{ KStream(df).deduplicateByKey(Duration.ofSeconds(10)) }}}
    */
  def deduplicateByKey(interval: Duration): KStream =
    dedupByKey(Intervals.micros(interval))

  /** [[deduplicateByKey]] with an interval such as `"10 seconds"`. */
  def deduplicateByKey(interval: String): KStream = dedupByKey(Intervals.micros(interval))

  /** Drops a record when one with the same key and the same `id` and a timestamp at most
    * `interval` away was forwarded before on the same input partition.
    *
    * {{{ KStream(df).deduplicateByKeyValue(col("event_id"), Duration.ofMinutes(1)) }}}
    */
  def deduplicateByKeyValue(id: Column, interval: Duration): KStream =
    dedupByKeyValue(id, Intervals.micros(interval))

  /** [[deduplicateByKeyValue]] with an interval such as `"10 seconds"`. */
  def deduplicateByKeyValue(id: Column, interval: String): KStream =
    dedupByKeyValue(id, Intervals.micros(interval))

  /** Drops a record when one with the same `id` and a timestamp at most `interval` away was
    * forwarded before on any partition: the store is global.
    *
    * {{{ KStream(df).deduplicate(get_json_object(col("value"), "$.id"), Duration.ofMinutes(1)) }}}
    */
  def deduplicate(id: Column, interval: Duration): KStream =
    dedupGlobal(id, Intervals.micros(interval))

  /** [[deduplicate]] with an interval such as `"10 seconds"`. */
  def deduplicate(id: Column, interval: String): KStream =
    dedupGlobal(id, Intervals.micros(interval))

  /** Forwards a record only if its sequence number is greater than the highest forwarded on its
    * input partition; a null sequence number passes (seed 001). State is one number per partition.
    *
    * {{{ KStream(df).deduplicateBySequence(col("seq")) }}}
    */
  def deduplicateBySequence(sequence: Column): KStream =
    withDf(DeduplicateBySequence(df, columns, sequence))

  /** Groups records by key for windowed operators.
    *
    * {{{ KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).distinct() }}}
    */
  def groupByKey: KGroupedStream = new KGroupedStream(this)

  /** Runs a user [[processor.Processor]] (KIP-28) on each input partition, in arrival order, with
    * the declared key-value stores; the result holds the records it forwarded: key and value
    * (the input's key and value column types), `timestamp`, `partition`, and `offset` (null when
    * forwarded from a punctuation). `name` (default: the processor's class name) appears in
    * errors; `wallClock = true` enables wall-clock punctuation (Spark processing-time timers,
    * which run a micro-batch every trigger interval).
    *
    * {{{
    * KStream(df).process(() => new Sum, stores = Seq(Stores.keyValue("sums"))).df
    * }}}
    */
  def process[K, V](
      supplier: processor.ProcessorSupplier[K, V],
      stores: Seq[processor.StoreSpec] = Nil,
      name: String = null,
      wallClock: Boolean = false): KStream =
    withDf(processor.ProcessorPlan(df, columns, supplier, stores, name, wallClock))

  private def dedupByKey(intervalMicros: Long): KStream = {
    val key = columns.keyField(df)
    withDf(Deduplicate(df, columns, Seq("key" -> col(ArrivalOrder.quote(key.name))),
      GroupScope.PerPartition, intervalMicros, "kstreams_deduplicate_by_key"))
  }

  private def dedupByKeyValue(id: Column, intervalMicros: Long): KStream = {
    val key = columns.keyField(df)
    KStream.resolveId(df, id)
    withDf(Deduplicate(df, columns, Seq("key" -> col(ArrivalOrder.quote(key.name)), "id" -> id),
      GroupScope.PerPartition, intervalMicros, "kstreams_deduplicate_by_key_value"))
  }

  private def dedupGlobal(id: Column, intervalMicros: Long): KStream = {
    KStream.resolveId(df, id)
    withDf(Deduplicate(df, columns, Seq("id" -> id),
      GroupScope.Global, intervalMicros, "kstreams_deduplicate"))
  }

  private[kstreams] def withDf(result: DataFrame) = new KStream(result, columns)
}

object KStream {
  /** A KStream over `df` with the column names of Spark's Kafka source. */
  def apply(df: DataFrame): KStream = new KStream(df, StreamColumns())

  /** A KStream over `df` with the given column names. */
  def apply(df: DataFrame, columns: StreamColumns): KStream = new KStream(df, columns)

  /** Sets on `builder` what the operators need: the RocksDB state store provider.
    * (Python's `configure_spark` also puts the bundled jar on the classpath.)
    *
    * {{{ val spark = KStream.configure(SparkSession.builder().master("local[2]")).getOrCreate() }}}
    */
  def configure(builder: SparkSession.Builder): SparkSession.Builder =
    builder.config(Sessions.ProviderKey, Sessions.RocksDBProvider)

  /** Checks that `id` resolves on `df` and returns its type, with an error that says what is
    * wrong if it does not. */
  private[kstreams] def resolveId(df: DataFrame, id: Column, what: String = "id"): DataType = {
    if (id == null) throw new KStreamsException(s"$what is null; give a column name or a Column")
    try {
      df.select(id).schema.head.dataType
    } catch {
      case e: org.apache.spark.sql.AnalysisException =>
        throw new KStreamsException(
          s"the $what expression $id does not resolve on this DataFrame (is it a column of another " +
            s"DataFrame or session?); available columns: ${df.schema.fieldNames.mkString(", ")}. " +
            s"Spark said: ${e.getMessage.linesIterator.next()}", e)
    }
  }
}
