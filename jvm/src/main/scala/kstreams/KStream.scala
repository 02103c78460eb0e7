package kstreams

import java.time.Duration

import org.apache.spark.sql.{Column, DataFrame, Row, SparkSession}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.ObservedNames
import org.apache.spark.sql.streaming.DataStreamWriter
import org.apache.spark.sql.types._

import kstreams.internal.dedup._
import kstreams.internal.join._
import kstreams.internal.plan._
import kstreams.internal.table._

/** A Kafka-Streams-style view of a DataFrame (streaming or batch).
  *
  * Operators return a new `KStream`; [[df]] is the result. Deduplication, windowed distinct and
  * sequence dedup keep the input's columns and drop rows, never altering them, except that the
  * timestamp column loses its watermark metadata (call `withWatermark` again downstream if a Spark
  * operator needs it). Aggregations, joins and tables return new rows whose timestamp column keeps
  * the input's watermark metadata, so a windowed operator or a Spark aggregation can follow.
  *
  * {{{
  * val deduped = KStream(kafkaDf).deduplicateByKey(Duration.ofSeconds(10)).df
  * KStream(df, StreamColumns(key = "user", timestamp = "event_time"))
  *   .deduplicateByKeyValue(col("event_id"), "1 minute")
  * }}}
  */
final class KStream private[kstreams] (val df: DataFrame, val columns: StreamColumns, withSide: Option[DataFrame]) {

  def this(df: DataFrame, columns: StreamColumns) = this(df, columns, None)

  /** The records the operator that made this stream routed aside (the late records of a dedup or
    * windowed distinct run with [[LateRecords.SideOutput]]), with the result's columns (a
    * windowed distinct's `window` null) and then [[LateRecords.ReasonColumn]]. A query that writes it alone runs the operator on its own
    * checkpoint; [[withSideOutput]] writes both outputs from one query.
    *
    * {{{ KStream(df).deduplicateByKey("10 minutes", LateRecords.SideOutput).sideOutput }}}
    */
  def sideOutput: DataFrame = {
    val all = withSideOutput
    all.where(col(LateRecords.ReasonColumn).isNotNull)
  }

  /** [[df]] and [[sideOutput]] in one DataFrame, [[LateRecords.ReasonColumn]] null for the
    * forwarded records: one query, one run of the operator, writes both, e.g. with
    * `foreachBatch` (the manual, "Late records").
    *
    * {{{
    * KStream(df).deduplicateByKey("10 minutes", LateRecords.SideOutput).withSideOutput
    *   .writeStream.foreachBatch { (batch: DataFrame, _: Long) =>
    *     batch.persist() // the operator runs once; each write reads the persisted rows
    *     batch.where("kstreams_reason is null").drop("kstreams_reason").write.mode("append").parquet("out")
    *     batch.where("kstreams_reason is not null").write.mode("append").parquet("late")
    *     batch.unpersist()
    *   }
    * }}}
    */
  def withSideOutput: DataFrame = withSide.getOrElse(
    throw new KStreamsException(
      "this stream has no side output: only the operator that made it can have one, when run with " +
        "late_records='side_output' (Scala: LateRecords.SideOutput)"))

  /** Drops a record when a record with the same key and a timestamp at most `interval` away was
    * forwarded before on the same input partition (KIP-655 `deduplicateByKey`). A late record
    * (older than the partition's stream time minus `interval`) that is no duplicate is forwarded
    * (spec section 2) unless `lateRecords` says otherwise.
    *
    * {{{
    * KStream(df).deduplicateByKey(Duration.ofSeconds(10))
    * KStream(df).deduplicateByKey("10 minutes", LateRecords.Drop)
    * }}}
    */
  def deduplicateByKey(interval: Duration): KStream =
    dedupByKey(Intervals.micros(interval), LateRecords.Forward)

  /** `deduplicateByKey` with a [[LateRecords]] policy. */
  def deduplicateByKey(interval: Duration, lateRecords: LateRecords): KStream =
    dedupByKey(Intervals.micros(interval), lateRecords)

  /** `deduplicateByKey` with an interval such as `"10 seconds"`. */
  def deduplicateByKey(interval: String): KStream = dedupByKey(Intervals.micros(interval), LateRecords.Forward)

  /** `deduplicateByKey` with an interval such as `"10 seconds"` and a [[LateRecords]] policy. */
  def deduplicateByKey(interval: String, lateRecords: LateRecords): KStream =
    dedupByKey(Intervals.micros(interval), lateRecords)

  /** Drops a record when one with the same key and the same `id` and a timestamp at most
    * `interval` away was forwarded before on the same input partition; late records as in
    * `deduplicateByKey`.
    *
    * {{{ KStream(df).deduplicateByKeyValue(col("event_id"), Duration.ofMinutes(1)) }}}
    */
  def deduplicateByKeyValue(id: Column, interval: Duration): KStream =
    dedupByKeyValue(id, Intervals.micros(interval), LateRecords.Forward)

  /** `deduplicateByKeyValue` with a [[LateRecords]] policy. */
  def deduplicateByKeyValue(id: Column, interval: Duration, lateRecords: LateRecords): KStream =
    dedupByKeyValue(id, Intervals.micros(interval), lateRecords)

  /** `deduplicateByKeyValue` with an interval such as `"10 seconds"`. */
  def deduplicateByKeyValue(id: Column, interval: String): KStream =
    dedupByKeyValue(id, Intervals.micros(interval), LateRecords.Forward)

  /** `deduplicateByKeyValue` with an interval such as `"10 seconds"` and a [[LateRecords]] policy. */
  def deduplicateByKeyValue(id: Column, interval: String, lateRecords: LateRecords): KStream =
    dedupByKeyValue(id, Intervals.micros(interval), lateRecords)

  /** Drops a record when one with the same `id` and a timestamp at most `interval` away was
    * forwarded before on any partition: the store is global. Late records (by the record's own
    * partition's stream time) as in `deduplicateByKey`.
    *
    * {{{ KStream(df).deduplicate(get_json_object(col("value"), "$.id"), Duration.ofMinutes(1)) }}}
    */
  def deduplicate(id: Column, interval: Duration): KStream =
    dedupGlobal(id, Intervals.micros(interval), LateRecords.Forward)

  /** `deduplicate` with a [[LateRecords]] policy. */
  def deduplicate(id: Column, interval: Duration, lateRecords: LateRecords): KStream =
    dedupGlobal(id, Intervals.micros(interval), lateRecords)

  /** `deduplicate` with an interval such as `"10 seconds"`. */
  def deduplicate(id: Column, interval: String): KStream =
    dedupGlobal(id, Intervals.micros(interval), LateRecords.Forward)

  /** `deduplicate` with an interval such as `"10 seconds"` and a [[LateRecords]] policy. */
  def deduplicate(id: Column, interval: String, lateRecords: LateRecords): KStream =
    dedupGlobal(id, Intervals.micros(interval), lateRecords)

  /** Forwards a record only if its sequence number is greater than the highest forwarded on its
    * input partition; a null sequence number passes (spec section 4). State is one number per partition.
    *
    * {{{ KStream(df).deduplicateBySequence(col("seq")) }}}
    */
  def deduplicateBySequence(sequence: Column): KStream =
    withDf(DeduplicateBySequence(df, columns, sequence))

  /** Groups records by key for aggregations and windowed operators.
    *
    * {{{ KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).distinct() }}}
    */
  def groupByKey: KGroupedStream = new KGroupedStream(this)

  /** Groups records by a new key `keySelector(key, value)` ([[selectKey]] then [[groupByKey]]).
    *
    * {{{ KStream(df).groupBy((k, v) => get_json_object(v, "$.user")).count() }}}
    */
  def groupBy(keySelector: (Column, Column) => Column): KGroupedStream = selectKey(keySelector).groupByKey

  // ---- stateless operators: each keeps the input's timestamp (spec section 5) ----

  /** Keeps the records for which `predicate` is true (null counts as false).
    * {{{ KStream(df).filter(col("value").startsWith("a")) }}} */
  def filter(predicate: Column): KStream = withDf(df.where(coalesce(predicate, lit(false))))

  /** Keeps the records for which `predicate` is false or null.
    * {{{ KStream(df).filterNot(col("value").isNull) }}} */
  def filterNot(predicate: Column): KStream = withDf(df.where(!coalesce(predicate, lit(false))))

  /** Replaces the value with `mapper(value)`. {{{ KStream(df).mapValues(v => upper(v)) }}} */
  def mapValues(mapper: Column => Column): KStream =
    withDf(df.withColumn(columns.value, mapper(valueColumn)))

  /** Replaces the key with `keySelector(key, value)`.
    * {{{ KStream(df).selectKey((k, v) => get_json_object(v, "$.user")) }}} */
  def selectKey(keySelector: (Column, Column) => Column): KStream =
    withDf(df.withColumn(columns.key, keySelector(keyColumn, valueColumn)))

  /** Replaces key and value with `mapper(key, value)`.
    * {{{ KStream(df).map((k, v) => (v, k)) }}} */
  def map(mapper: (Column, Column) => (Column, Column)): KStream = {
    val (newKey, newValue) = mapper(keyColumn, valueColumn)
    val keyed = df.withColumns(Map(KStream.NewKey -> newKey, KStream.NewValue -> newValue))
    withDf(
      keyed
        .withColumn(columns.key, col(KStream.NewKey))
        .withColumn(columns.value, col(KStream.NewValue))
        .drop(KStream.NewKey, KStream.NewValue))
  }

  /** Replaces each record by the records of `mapper(key, value)`, an array of structs with fields
    * `key` and `value` (each gets the input's other columns, timestamp included).
    * {{{ KStream(df).flatMap((k, v) => array(struct(k.as("key"), v.as("value")))) }}} */
  def flatMap(mapper: (Column, Column) => Column): KStream = {
    val exploded = df.withColumn(KStream.NewKey, explode(mapper(keyColumn, valueColumn)))
    withDf(
      exploded
        .withColumn(columns.key, col(s"${KStream.NewKey}.key"))
        .withColumn(columns.value, col(s"${KStream.NewKey}.value"))
        .drop(KStream.NewKey))
  }

  /** Replaces each record by one record per element of the array `mapper(value)`.
    * {{{ KStream(df).flatMapValues(v => split(v, " ")) }}} */
  def flatMapValues(mapper: Column => Column): KStream =
    withDf(df.withColumn(columns.value, explode(mapper(valueColumn))))

  /** Calls `action` on each record as it passes (side effects only, e.g. logging); the records
    * are unchanged. {{{ KStream(df).peek(row => println(row)) }}} */
  def peek(action: Row => Unit): KStream = {
    val all = struct(df.columns.toIndexedSeq.map(c => col(HelperColumns.quote(c))): _*)
    val call = udf((row: Row) => { action(row); true }).asNondeterministic()
    withDf(df.where(call(all)))
  }

  /** Splits the stream by predicates (Kafka's `split()`): each record goes to the first branch
    * whose predicate is true, else to the default branch.
    * {{{ KStream(df).split().branch(col("value") > 0, "positive").defaultBranch("other") }}} */
  def split(): BranchedKStream = new BranchedKStream(this, Nil)

  /** Both streams' records (same columns). {{{ KStream(a).merge(KStream(b)) }}} */
  def merge(other: KStream): KStream = {
    if (df.columns.toSet != other.df.columns.toSet)
      throw new KStreamsException(
        s"merge needs streams with the same columns; this has ${df.columns.mkString(", ")}, " +
          s"the other has ${other.df.columns.mkString(", ")}")
    // as Kafka Streams' merge, one type per column: Spark's union would widen or cast one side's
    // values silently, or fail on one value without naming the two types
    // (catalogString: a type without its nullability, which a union may differ in)
    val types = other.df.schema.fields.map(f => f.name -> f.dataType.catalogString).toMap
    df.schema.fields.map(f => f.name -> f.dataType.catalogString).find { case (n, t) => t != types(n) }.foreach {
      case (name, t) =>
        throw new KStreamsException(
          s"merge needs the same column types on both streams: '$name' is $t in this stream and " +
            s"${types(name)} in the other; cast one of them, e.g. col(\"$name\").cast(\"$t\")")
    }
    // Both sides may carry a kstreams metric of the same name (two `toTable` results): Spark
    // refuses a union of different metrics with one name, so the other side's are renamed.
    val Seq(left, right) = ObservedNames.distinct(Seq(df, other.df))
    withDf(left.unionByName(right))
  }

  /** The records as Spark's Kafka sink wants them for `topic`: `key` and `value` (strings or
    * bytes; other types as JSON), and a header `kstreams.timestamp` with the record's timestamp in
    * epoch milliseconds, since Spark's Kafka sink cannot set a record's timestamp.
    * {{{ KStream(df).to("out").option("kafka.bootstrap.servers", "...").start() }}} */
  def toKafkaRecords(topic: String): DataFrame = {
    internal.sink.TopicName.check(topic)
    def bytes(c: Column, t: DataType): Column = t match {
      case StringType | BinaryType => c
      case _: StructType | _: ArrayType | _: MapType => to_json(c)
      case _ => c.cast(StringType)
    }
    val keyType = columns.keyField(df).dataType
    val valueType = KStream.resolveId(df, valueColumn, "value")
    val tsHeader = struct(
      lit("kstreams.timestamp").as("key"),
      unix_millis(col(HelperColumns.quote(columns.timestamp))).cast(StringType).cast(BinaryType).as("value"))
    df.select(
      bytes(keyColumn, keyType).as("key"),
      bytes(valueColumn, valueType).as("value"),
      lit(topic).as("topic"),
      array(tsHeader).as("headers"))
  }

  /** Writes the stream to the Kafka topic `topic` (see [[toKafkaRecords]]); set the servers and
    * the checkpoint location on the returned writer, then `start()`. */
  def to(topic: String): DataStreamWriter[Row] =
    toKafkaRecords(topic).writeStream.format("kafka")

  /** `to`, and with `exactlyOnce` through Kafka transactions: each micro-batch's records are
    * committed once, across restarts and crashes, for consumers with `isolation.level=read_committed`
    * (the manual, "Exactly once to Kafka"; [[kstreams.internal.sink.ExactlyOnceKafkaProvider]]).
    *
    * {{{
    * KStream(df).deduplicateByKey("10 minutes").to("deduped", exactlyOnce = true)
    *   .option("kafka.bootstrap.servers", "broker:9092").option("checkpointLocation", "ckpt").start()
    * }}}
    */
  def to(topic: String, exactlyOnce: Boolean): DataStreamWriter[Row] =
    if (!exactlyOnce) to(topic)
    else {
      if (!df.isStreaming)
        throw new KStreamsException(
          "exactlyOnce is for streaming queries; a batch DataFrame is written by one job: use to(topic)")
      toKafkaRecords(topic).writeStream.format(internal.sink.ExactlyOnceKafkaProvider.Format).option("topic", topic)
    }

  /** The stream read as a table: latest value per key, a null value deletes (Kafka's
    * `toTable()`); idempotent updates are dropped (KIP-557).
    * {{{ KStream(df).toTable.join(other, (a, b) => concat(a, b)) }}} */
  def toTable: KTable = TableSource(this)

  /** Windowed inner join: records with equal keys and `|t1 - t2| <= timeDifference` give
    * `joiner(thisValue, otherValue)` at max(t1, t2).
    * {{{ left.join(right, (l, r) => concat(l, r), JoinWindows.ofTimeDifferenceWithNoGrace("100 ms")) }}} */
  def join(other: KStream, joiner: (Column, Column) => Column, windows: JoinWindows): KStream =
    StreamJoin(this, other, joiner, windows, JoinKind.Inner)

  /** [[join]], plus each record of this stream that never matched, with a null other value, when
    * its window closes. */
  def leftJoin(other: KStream, joiner: (Column, Column) => Column, windows: JoinWindows): KStream =
    StreamJoin(this, other, joiner, windows, JoinKind.Left)

  /** [[join]], plus the unmatched records of both streams when their windows close. */
  def outerJoin(other: KStream, joiner: (Column, Column) => Column, windows: JoinWindows): KStream =
    StreamJoin(this, other, joiner, windows, JoinKind.Outer)

  private def keyColumn: Column = col(HelperColumns.quote(columns.keyField(df).name))

  private def valueColumn: Column = {
    if (!df.columns.contains(columns.value)) throw StreamColumns.missing(df, columns.value, "value")
    col(HelperColumns.quote(columns.value))
  }

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
    withDf(internal.runner.ProcessorPlan(df, columns, supplier, stores, name, wallClock))

  private def dedupByKey(intervalMicros: Long, late: LateRecords): KStream = {
    val key = columns.keyField(df)
    withOutputs(
      Deduplicate(
        df,
        columns,
        Seq("key" -> col(HelperColumns.quote(key.name))),
        DedupScope.PerPartition,
        intervalMicros,
        late,
        "kstreams_deduplicate_by_key"))
  }

  private def dedupByKeyValue(id: Column, intervalMicros: Long, late: LateRecords): KStream = {
    val key = columns.keyField(df)
    KStream.resolveId(df, id)
    withOutputs(
      Deduplicate(
        df,
        columns,
        Seq("key" -> col(HelperColumns.quote(key.name)), "id" -> id),
        DedupScope.PerPartition,
        intervalMicros,
        late,
        "kstreams_deduplicate_by_key_value"))
  }

  private def dedupGlobal(id: Column, intervalMicros: Long, late: LateRecords): KStream = {
    KStream.resolveId(df, id)
    withOutputs(
      Deduplicate(df, columns, Seq("id" -> id), DedupScope.Global, intervalMicros, late, "kstreams_deduplicate"))
  }

  /** The result of an operator with a side output ([[sideOutput]]). */
  private[kstreams] def withOutputs(outputs: (DataFrame, Option[DataFrame])) =
    new KStream(outputs._1, columns, outputs._2)

  private[kstreams] def withDf(result: DataFrame) = new KStream(result, columns)
}

object KStream {
  private val NewKey = internal.plan.HelperColumns.NewKey
  private val NewValue = internal.plan.HelperColumns.NewValue

  /** A KStream over `df` with the column names of Spark's Kafka source. */
  def apply(df: DataFrame): KStream = new KStream(df, StreamColumns())

  /** A KStream over `df` with the given column names. */
  def apply(df: DataFrame, columns: StreamColumns): KStream = new KStream(df, columns)

  /** Sets on `builder` what the operators need: the RocksDB state store provider;
    * `spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart=false`, without which a query
    * killed while writing its first offset-log entry never restarts; and
    * `spark.sql.streaming.multipleWatermarkPolicy=max`, so that the watermark follows the most
    * advanced input as a Kafka Streams task's stream time does and a restarted query gets the
    * watermarks of an uninterrupted one (the manual, "Crash safety"); and RocksDB's changelog
    * checkpointing, a cheaper commit of the state every micro-batch makes (the manual, "Benchmarks");
    * and room for 1,000 generated classes in Spark's code cache
    * (`spark.sql.codegen.cache.maxEntries`, Spark's default 100), so that a query of several
    * operators does not compile its code again every micro-batch (a static setting: it counts if set
    * before the JVM first generates code). A later `.config` of any of these keys wins, and so does
    * the same key given to spark-submit (`--conf`) or as a `-Dspark...` system property. (Python's
    * `configure_spark` also puts the bundled jars, kstreams' and Spark's Kafka connector, on the
    * classpath.)
    *
    * {{{ val spark = KStream.configure(SparkSession.builder().master("local[2]")).getOrCreate() }}}
    */
  def configure(builder: SparkSession.Builder): SparkSession.Builder = {
    val withStore = builder.config(SparkSessionChecks.ProviderKey, SparkSessionChecks.RocksDBProvider)
    // spark-submit passes its --conf to the driver's JVM as system properties, which the session's
    // SparkConf reads under the builder's options: setting a default here would override the user's
    // --conf, so a key already given there keeps its value.
    SparkSessionChecks.Defaults.foldLeft(withStore) { case (b, (key, value)) =>
      if (sys.props.contains(key)) b else b.config(key, value)
    }
  }

  /** Checks that `id` resolves on `df` and returns its type, with an error that says what is
    * wrong if it does not. */
  private[kstreams] def resolveId(df: DataFrame, id: Column, what: String = "id"): DataType = {
    if (id == null) throw new KStreamsException(s"$what is null; give a column name or a Column")
    try {
      df.select(id).schema.head.dataType
    } catch {
      case e: org.apache.spark.sql.AnalysisException =>
        // the likely cause differs: a name from elsewhere, or a type Spark's function refuses
        val hint =
          if (Option(e.getCondition).exists(_.startsWith("DATATYPE_MISMATCH")))
            "a column of another type than the expression needs: cast it (Kafka's value and key " +
              "are binary: cast(value as string))"
          else "is it a column of another DataFrame or session?"
        throw new KStreamsException(
          s"the $what expression $id does not resolve on this DataFrame ($hint); available columns: " +
            s"${df.schema.fieldNames.mkString(", ")}. Spark said: ${KStreamsException.sparkSays(e)}",
          e
        )
    }
  }
}
