package kstreams

import java.nio.file.Files

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{DataFrame, Encoders, SparkSession}
import org.apache.spark.sql.execution.streaming.runtime.MemoryStream
import org.apache.spark.sql.functions._
import org.apache.spark.sql.streaming.{StreamingQuery, StreamingQueryException}

/** A checkpoint restarted under another operator, key, grouping or id expression (or, but for the
  * dedup stores, interval; but for windowed distinct, aggregations and joins, grace) fails before its first
  * micro-batch, naming the checkpoint's operator and the new one. */
class CheckpointReuseSpec extends SparkSuite {
  private val events = Event.numbered(Seq(Event.at("a", 1), Event.at("a", 2), Event.at("a", 3)))

  /** Runs `first` on a new checkpoint over one micro-batch, then `second` on the same checkpoint;
    * returns the output rows of `second`, or the exception its query failed with. */
  private def restart(first: DataFrame => DataFrame, second: DataFrame => DataFrame): Either[Throwable, Long] = {
    val input = MemoryStream[Event](Encoders.product[Event], spark)
    val checkpoint = Files.createTempDirectory("kstreams-reuse").toString
    var rows = 0L
    def start(op: DataFrame => DataFrame): StreamingQuery =
      op(input.toDF()).writeStream
        .option("checkpointLocation", checkpoint)
        .foreachBatch { (df: DataFrame, _: Long) => rows += df.count(); () }
        .start()
    val query = start(first)
    input.addData(events.take(2))
    query.processAllAvailable()
    query.stop()
    rows = 0
    val again = start(second)
    try {
      input.addData(events.drop(2))
      again.processAllAvailable()
      Right(rows)
    } catch { case e: StreamingQueryException => Left(e) }
    finally again.stop()
  }

  private def refused(first: DataFrame => DataFrame, second: DataFrame => DataFrame, was: String, now: String) = {
    val error = restart(first, second).swap.getOrElse(fail("the restart was not refused"))
    val cause = Iterator.iterate(error)(_.getCause).takeWhile(_ != null).collectFirst { case k: KStreamsException => k }
    val message = cause.getOrElse(fail(s"no KStreamsException in $error")).getMessage
    assert(message.contains(s"holds the state of kstreams operator #1 $was, but this query runs $now in its place"))
    assert(error.getMessage.contains(message), "the query's own error carries the message")
  }

  private val byKey = (df: DataFrame) => KStream(df).deduplicateByKey("10 s").df
  private val byKeyWas = "deduplicate_by_key(partition=partition, interval=PT10S, key=key)"

  test("the same operator restarts on its checkpoint") {
    assert(restart(byKey, byKey) == Right(0L)) // a@3 is within 10 s of a@1: dropped
  }

  test("KStream.configure commits state by changelog files; a session's own setting wins") {
    val key = internal.plan.SparkSessionChecks.ChangelogCheckpointingKey
    assert(spark.conf.get(key) == "true")
    def changelogs(checkpoint: String): Boolean =
      Files
        .walk(java.nio.file.Paths.get(checkpoint, "state"))
        .iterator()
        .asScala
        .exists(_.toString.endsWith(".changelog"))
    for (setting <- Seq("true", "false")) {
      spark.conf.set(key, setting)
      try {
        val input = MemoryStream[Event](Encoders.product[Event], spark)
        val checkpoint = Files.createTempDirectory("kstreams-changelog").toString
        val query = byKey(input.toDF()).writeStream
          .option("checkpointLocation", checkpoint)
          .format("noop")
          .start()
        input.addData(events)
        query.processAllAvailable()
        query.stop()
        assert(changelogs(checkpoint) == (setting == "true"), setting)
      } finally spark.conf.set(key, "true")
    }
  }

  test("KStream.configure keeps what spark-submit's --conf gave (a system property), sets the rest") {
    import internal.plan.SparkSessionChecks._
    def options(builder: SparkSession.Builder): collection.Map[String, String] =
      builder.getClass.getMethod("options").invoke(builder).asInstanceOf[collection.Map[String, String]]
    // spark-submit --conf spark.sql.streaming.multipleWatermarkPolicy=min (its driver's SparkConf reads it)
    sys.props(WatermarkPolicyKey) = "min"
    try {
      val configured = options(KStream.configure(SparkSession.builder()))
      assert(!configured.contains(WatermarkPolicyKey), configured)
      assert(new org.apache.spark.SparkConf(true).setAll(configured).get(WatermarkPolicyKey) == "min")
      assert(
        configured.toMap == Map(
          ProviderKey -> RocksDBProvider,
          VerifyEmptyCheckpointKey -> "false",
          ChangelogCheckpointingKey -> "true",
          CodegenCacheMaxEntriesKey -> "1000"
        ))
    } finally sys.props -= WatermarkPolicyKey
    assert(options(KStream.configure(SparkSession.builder()))(WatermarkPolicyKey) == "max")
  }

  test("deduplicateByKey, then a windowed distinct: refused, naming both") {
    refused(
      byKey,
      df => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).distinct().df,
      byKeyWas,
      "windowed_distinct(partition=partition, size=PT10S, grace=PT0S, key=key)"
    )
  }

  test("deduplicateByKey, then deduplicateBySequence: refused before Spark's time-mode check") {
    refused(
      byKey,
      df => KStream(df).deduplicateBySequence(col("offset")).df,
      byKeyWas,
      "deduplicate_by_sequence(partition=partition, sequence=offset)")
  }

  test("another interval: judged by the new one, for the per-partition and the global store") {
    // a@1 is stored, a@2 dropped, and the partition stops at stream time 2 s; then a@3:
    assert(restart(byKey, df => KStream(df).deduplicateByKey("20 s").df) == Right(0L)) // within 20 s of a@1
    assert(restart(byKey, df => KStream(df).deduplicateByKey("1 s").df) == Right(1L)) // a@1 dead at 3 s - 1 s
    def global(interval: String)(df: DataFrame) = KStream(df).deduplicate(col("key"), interval).df
    assert(restart(global("10 s"), global("20 s")) == Right(0L))
    assert(restart(global("10 s"), global("1 s")) == Right(1L)) // (what stays dead: test_restart_changes.py)
  }

  test("another key") {
    refused(
      byKey,
      df => KStream(df, StreamColumns(key = "value")).deduplicateByKey("10 s").df,
      byKeyWas,
      "deduplicate_by_key(partition=partition, interval=PT10S, key=value)"
    )
  }

  test("another grouping") {
    refused(
      byKey,
      df => KStream(df, StreamColumns(partition = None)).deduplicateByKey("10 s").df,
      byKeyWas,
      "deduplicate_by_key(partition=(none), interval=PT10S, key=key)"
    )
  }

  test("another id expression") {
    refused(
      df => KStream(df).deduplicateByKeyValue(col("value"), "10 s").df,
      df => KStream(df).deduplicateByKeyValue(upper(col("value")), "10 s").df,
      "deduplicate_by_key_value(partition=partition, interval=PT10S, key=key, id=value)",
      "deduplicate_by_key_value(partition=partition, interval=PT10S, key=key, id=upper(value))"
    )
  }

  test("another grace: judged by the new one for a windowed distinct and a windowed count") {
    def distinct(grace: String)(df: DataFrame) =
      KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeAndGrace("10 s", grace)).distinct().df
    // a@1 opens [0 s, 10 s) and a@2 is dropped; the partition stops at stream time 2 s; then a@3:
    assert(restart(distinct("0 s"), distinct("20 s")) == Right(0L)) // the window is open: a duplicate
    def count(grace: String)(df: DataFrame) =
      KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeAndGrace("10 s", grace)).count().toStream.df
    assert(restart(count("0 s"), count("20 s")) == Right(1L)) // the window is open: its count is 3
  }

  test("another window of a keyed aggregation") {
    refused(
      df => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).count().toStream.df,
      df => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("20 s")).count().toStream.df,
      "count_windowed(key=key, size=PT10S, grace=PT0S, clock=partition, groups=64)",
      "count_windowed(key=key, size=PT20S, grace=PT0S, clock=partition, groups=64)"
    )
  }
}
