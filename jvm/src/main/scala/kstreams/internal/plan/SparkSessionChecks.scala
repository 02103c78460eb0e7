package kstreams
package internal
package plan

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.kstreams.OperatorMetrics

/** Checks on the Spark session an operator runs in. */
private[kstreams] object SparkSessionChecks {
  val ProviderKey = "spark.sql.streaming.stateStore.providerClass"
  val RocksDBProvider =
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

  /** Spark refuses to start a query whose checkpoint has no offset-log entry yet but a non-empty
    * offsets folder. A process killed while writing the first entry leaves exactly that (a hidden
    * `.0.<uuid>.tmp`), so the query could never restart: `KStream.configure` turns the check off. */
  val VerifyEmptyCheckpointKey = "spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart"

  /** With several watermark operators in a query (each operator on an input without a watermark
    * adds one), Spark's default "min" policy makes results depend on restarts: Spark keeps each
    * operator's watermark only in memory, and after a restart one that has seen no record since
    * counts as 0, holding the global watermark back where the uninterrupted run moved it on. "max"
    * is what Kafka Streams does (a task's stream time is the largest timestamp over its
    * partitions), and it gives a restarted query the watermarks of an uninterrupted one. */
  val WatermarkPolicyKey = "spark.sql.streaming.multipleWatermarkPolicy"

  /** RocksDB's changelog checkpointing: a commit writes the micro-batch's changes to a changelog
    * file, and snapshots of the database's files are made in the background, where by default each
    * commit flushes and checkpoints them. Every operator commits its state once per state partition
    * and micro-batch, so this is on the path of every batch: 0.92x the time per micro-batch at 1M live
    * keys in `bench.py --tune` (the manual, "Benchmarks"); Spark's real-time mode turns it on by itself. A
    * checkpoint written without it restarts with it (and back), so it is a default, not a
    * requirement. */
  val ChangelogCheckpointingKey = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"

  /** How many generated classes (whole-stage code, projections) a JVM keeps compiled: Spark's
    * default is 100, shared by every query and task of the JVM. Each state variable of a
    * `transformWithState` operator brings its own encoder projections (a stream-stream join holds 14
    * state variables), so a query of a few operators needs more than 100: the least recently used
    * are then evicted and compiled again in every micro-batch, by every task. Measured on
    * `ConformanceSpec`'s three no-grace joins in one query (2026-11-28): 6,328 compilations over 185
    * micro-batches with 100 entries, 122 with more (122 distinct classes, 2.2 KB of bytecode each on
    * average), and about half of the tasks' time was compiling. The crash harness's 26 operators in
    * one query need 732 (with 100: 500-890 compilations and 11-22 s a micro-batch, with 1,000: none
    * after the second micro-batch and 8-16 s). Spark's metrics system shows it as
    * `CodeGenerator.compilationTime`'s count: one that grows every micro-batch asks for a larger
    * cache. A static setting: Spark reads it once per JVM, when the JVM first generates code, and
    * `spark.conf.set` refuses it; so `KStream.configure` sets it on the builder, and a session that ran
    * anything before in the same JVM keeps the size it had then. */
  val CodegenCacheMaxEntriesKey = "spark.sql.codegen.cache.maxEntries"
  val CodegenCacheMaxEntries = "1000"

  /** The four Spark defaults `KStream.configure` changes (a user's own setting wins). Python's
    * `configure_spark` runs before any JVM exists, so `kstreams_spark.session.DEFAULT_SETTINGS`
    * writes them out again; `tests/test_bad_input.py` checks that the two agree. */
  val Defaults: Seq[(String, String)] = Seq(
    VerifyEmptyCheckpointKey -> "false",
    WatermarkPolicyKey -> "max",
    ChangelogCheckpointingKey -> "true",
    CodegenCacheMaxEntriesKey -> CodegenCacheMaxEntries
  )

  /** `transformWithState` only runs on the RocksDB state store; say so before Spark fails late.
    * (Every operator passes here with its DataFrame, whose session, if it is streaming, so publishes
    * its queries' counters through Spark's metrics system: [[OperatorMetrics]].) */
  def requireStateStore(df: DataFrame): Unit = {
    val session = df.sparkSession
    if (session.sparkContext.isStopped)
      throw new KStreamsException(
        "the DataFrame belongs to a SparkSession whose SparkContext is stopped; " +
          "build the DataFrame from the active session")
    // a streaming DataFrame's session starts its queries (a batch's, say in foreachBatch, none)
    if (df.isStreaming) OperatorMetrics.publishFrom(session)
    val provider = session.conf.getOption(ProviderKey).getOrElse("(default: HDFS-backed)")
    if (provider != RocksDBProvider)
      throw new KStreamsException(
        s"kstreams-spark operators need the RocksDB state store, but $ProviderKey is $provider. " +
          s"Set $ProviderKey=$RocksDBProvider on the session " +
          "(Python: kstreams_spark.configure_spark(SparkSession.builder); " +
          "Scala: kstreams.KStream.configure(builder))")
  }
}
