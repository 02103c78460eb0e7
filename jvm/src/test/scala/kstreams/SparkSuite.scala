package kstreams

import java.nio.file.Files
import java.sql.Timestamp

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{DataFrame, Encoder, Encoders, Row, SparkSession}
import org.apache.spark.sql.execution.streaming.runtime.MemoryStream
import org.apache.spark.sql.streaming.StreamingQuery
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

/** A record as the spec writes it: `key@seconds`, on a partition at an offset. */
final case class Event(key: String, value: String, timestamp: Timestamp, partition: Int, offset: Long)

object Event {
  val Base: Long = Timestamp.valueOf("2026-01-01 00:00:00").getTime

  def at(key: String, seconds: Double, partition: Int = 0, offset: Long = -1, value: String = null) =
    Event(key, value, new Timestamp(Base + math.round(seconds * 1000)), partition, offset)

  /** Numbers records without an offset per partition in list order; values default to v<index>. */
  def numbered(events: Seq[Event]): Seq[Event] = {
    val next = mutable.Map.empty[Int, Long].withDefaultValue(0L)
    events.zipWithIndex.map { case (e, i) =>
      val offset = if (e.offset >= 0) e.offset else next(e.partition)
      next(e.partition) = math.max(next(e.partition), offset + 1)
      e.copy(offset = offset, value = Option(e.value).getOrElse(s"v$i"))
    }
  }
}

/** Three Spark settings that only make the suites faster (the first two halve the Scala suite's time
  * on 2 cores; measured with JFR on DslSpec: 137 s with Spark's defaults, 88 s with both). None
  * touches what the tests check: the operators, their state and the checkpoint's contents are the
  * same.
  *  - The checkpoint's files through Hadoop's `FileSystem` API instead of `FileContext`: on a local
  *    disk without Hadoop's native library, each `FileContext` rename runs a `readlink` process
  *    and each create a `chmod`, thousands per suite. Spark uses this manager itself where
  *    `FileContext` is missing; the crash tests (tests/test_crash.py, tests/test_cluster.py) keep
  *    the default, as users run it.
  *  - No artifact isolation (PySpark's default; a Scala session's default is on): with it every
  *    class janino's generated code looks up, found or not, goes through a per-session class
  *    loader that searches every jar of the test classpath again.
  *  - Local files through [[NioLocalFileSystem]]: permissions set in the JVM, not by a `chmod`
  *    process per file (the Python tests' `spark` fixture names the same class). */
object TestSpeed {
  val settings: Map[String, String] = Map(
    "spark.sql.streaming.checkpointFileManagerClass" ->
      "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "spark.sql.artifact.isolation.enabled" -> "false",
    "spark.hadoop.fs.file.impl" -> classOf[NioLocalFileSystem].getName
  )

  /** Spark's interpreted evaluation instead of generated code, for the suites that do not override
    * [[SparkSuite.runsGeneratedCode]]: a test's queries are new plans over a handful of rows, so
    * generating and compiling their code (each state variable's encoders in every task and
    * micro-batch, then each projection) costs more than it saves. Three suites (DeduplicateSpec,
    * DslSpec, WindowedAndSequenceSpec) took 168 CPU-seconds instead of 194, sbt's JVM included;
    * the pytest session does the same (tests/conftest.py). The interpreted evaluator is Spark's
    * own, with the same results. `ConformanceSpec` and `RealTimeSpec` keep generated code, as users
    * run it, and so do the processes the crash, CLI, cluster and Connect tests start; the crash
    * test's uninterrupted reference runs in the interpreted pytest session, so it compares the two
    * row for row for every stateful operator. */
  val interpreted: Map[String, String] = Map(
    "spark.sql.codegen.factoryMode" -> "NO_CODEGEN",
    "spark.sql.codegen.wholeStage" -> "false"
  )
}

/** A real local Spark session with the RocksDB state store, and helpers to run streams. */
trait SparkSuite extends AnyFunSuite with BeforeAndAfterAll {

  /** Whether the suite's queries run Spark's generated code (its default) or its interpreted
    * evaluation ([[TestSpeed.interpreted]]). */
  protected def runsGeneratedCode: Boolean = false

  lazy val spark: SparkSession = KStream
    .configure(SparkSession.builder().master("local[2]").appName(getClass.getSimpleName))
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.session.timeZone", "UTC")
    .config(TestSpeed.settings)
    .config(if (runsGeneratedCode) Map.empty[String, String] else TestSpeed.interpreted)
    .getOrCreate()

  override def beforeAll(): Unit = spark.sparkContext.setLogLevel("ERROR")
  override def afterAll(): Unit = spark.stop()

  def batch(events: Seq[Event]): DataFrame =
    spark.createDataFrame(Event.numbered(events)).toDF()

  /** Runs `op` over a MemoryStream, one micro-batch per element of `batches`, restarting the query
    * from its checkpoint before the batches whose index is in `restartBefore`. Returns the values
    * forwarded, in (partition, offset) order. */
  def stream(batches: Seq[Seq[Event]], op: DataFrame => DataFrame, restartBefore: Set[Int] = Set.empty): Seq[String] =
    eventRows(batches, op, restartBefore)
      .sortBy(r => (r.getAs[Int]("partition"), r.getAs[Long]("offset")))
      .map(_.getAs[String]("value"))

  /** [[stream]]'s output rows, in micro-batch order. */
  def eventRows(batches: Seq[Seq[Event]], op: DataFrame => DataFrame, restartBefore: Set[Int] = Set.empty): Seq[Row] = {
    val numbered = Event.numbered(batches.flatten).iterator
    val numberedBatches = batches.map(b => b.map(_ => numbered.next()))
    streamRows(numberedBatches, Encoders.product[Event], op, restartBefore)
  }

  /** `body` with the session setting `key` set to `value`, restored after. */
  def withSetting[T](key: String, value: String)(body: => T): T = {
    val before = spark.conf.getOption(key)
    spark.conf.set(key, value)
    try body
    finally before.fold(spark.conf.unset(key))(spark.conf.set(key, _))
  }

  /** Runs `op` over a MemoryStream of `T`, one micro-batch per element of `batches`, restarting
    * from the checkpoint before the batches whose index is in `restartBefore`; returns the output
    * rows in micro-batch order. */
  def streamRows[T](
      batches: Seq[Seq[T]],
      encoder: Encoder[T],
      op: DataFrame => DataFrame,
      restartBefore: Set[Int] = Set.empty,
      afterBatch: Int => Unit = _ => ()): Seq[Row] =
    streamRowsAndMetrics(batches, encoder, op, restartBefore, afterBatch)._1

  /** [[streamRows]] and the observed metrics of every micro-batch that read input, summed by
    * `metric.field` (e.g. `kstreams_count_windowed.late_dropped`). `afterBatch(i)` runs once the
    * query has processed the `i`-th element of `batches`. */
  def streamRowsAndMetrics[T](
      batches: Seq[Seq[T]],
      encoder: Encoder[T],
      op: DataFrame => DataFrame,
      restartBefore: Set[Int] = Set.empty,
      afterBatch: Int => Unit = _ => ()): (Seq[Row], Map[String, Long]) = {
    val metrics = mutable.Map.empty[String, Long].withDefaultValue(0L)
    def collect(q: StreamingQuery): Unit = q.recentProgress.filter(_.numInputRows > 0).foreach { p =>
      p.observedMetrics.asScala.foreach { case (name, row) =>
        row.schema.fieldNames.foreach { f =>
          row.get(row.fieldIndex(f)) match {
            case n: java.lang.Long => metrics(s"$name.$f") += n
            case _ =>
          }
        }
      }
    }
    val input = MemoryStream[T](encoder, spark)
    val checkpoint = Files.createTempDirectory("kstreams-checkpoint").toString
    val output = mutable.TreeMap.empty[Long, Seq[Row]]
    def start(): StreamingQuery = op(input.toDF()).writeStream
      .option("checkpointLocation", checkpoint)
      .foreachBatch { (df: DataFrame, batchId: Long) =>
        // keyed by batch id: a replayed batch replaces its earlier output (exactly once)
        output.synchronized { output(batchId) = df.collect().toSeq }
        ()
      }
      .start()
    var query = start()
    try {
      batches.zipWithIndex.foreach { case (events, i) =>
        if (restartBefore.contains(i)) { query.stop(); collect(query); query = start() }
        input.addData(events)
        query.processAllAvailable()
        afterBatch(i)
      }
    } finally { query.stop(); collect(query) }
    (output.values.flatten.toSeq, metrics.toMap)
  }
}
