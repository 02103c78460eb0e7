package kstreams
package internal
package operate

import java.nio.charset.StandardCharsets

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.ObjectMapper
import org.apache.hadoop.fs.{FileSystem, Path}
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.streaming.sinks.{FileStreamSinkLog, SinkFileStatus}
import org.apache.spark.sql.execution.streaming.state.OfflineStateRepartitionRunner
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.RunningQueries

import kstreams.internal.dedup.DedupCaches
import kstreams.internal.inspect.StateVariables
import kstreams.internal.plan.CheckpointOperators

/** Moves a stopped query's state to another number of state partitions (the manual, "Operating a
  * query"), with Spark's offline repartitioner (`OfflineStateRepartitionRunner`, Spark 4.3), which
  * re-hashes every state row of every stateful operator by its grouping key, writes the new stores
  * as one more micro-batch of the checkpoint, and records the new `spark.sql.shuffle.partitions`
  * in its offset log, which the restarted query then takes whatever its session says.
  *
  * Why that keeps every kstreams operator exact: each `transformWithState` group is found again by
  * the hash of its grouping key. An arrival-order operator groups on keys whose hash is the group
  * number ([[org.apache.spark.sql.kstreams.GroupPlacement]]), so group `i` lands in state
  * partition `i mod N` for any `N`, which is where the restarted query sends its records; the
  * per-key operators group on the user's key, which Spark hashes alike on both sides. The state is
  * copied row for row, so every entry, stream time and timer stays as it was. The in-memory maps
  * the dedup processors keep in this JVM are dropped ([[DedupCaches.clear]]): they would match the
  * moved state, but nothing should rest on a map that outlived its store. After the move, every
  * `transformWithState` state row is read back and checked to sit in the partition its key hashes
  * to.
  *
  * Spark's repartitioner knows nothing of the query's sink: the micro-batch it adds has no entry in
  * a file sink's log (`_spark_metadata`), and a log with a gap cannot be read (by `spark.read` of
  * the output, or by the sink's own compaction every 10 micro-batches). So the file sinks the
  * caller names get an empty entry for it; a file sink's log must end at the checkpoint's last
  * committed micro-batch, as the query's own does.
  *
  * What is refused, before anything is written (Spark writes the new micro-batch's offsets before
  * its own checks, so a refusal of Spark's would leave a checkpoint half moved): a path that is
  * not a kstreams checkpoint, a query running on it in this driver, a last micro-batch planned but
  * not committed (a query running elsewhere, or one stopped by a failure), no committed
  * micro-batch, the count the checkpoint already has, and a state store other than RocksDB.
  */
private[kstreams] object Repartition {
  private val ShufflePartitions = "spark.sql.shuffle.partitions"
  private val Provider = "spark.sql.streaming.stateStore.providerClass"
  private val FormatVersion = "spark.sql.streaming.stateStore.checkpointFormatVersion"
  private val RocksDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
  private val TransformWithState =
    Set("transformWithStateExec", "transformWithStateInPandasExec", "transformWithStateInPySparkExec")
  private val mapper = new ObjectMapper()

  /** Moves `checkpoint`'s state to `partitions` state partitions; returns how many it had.
    * `fileSinks`: the output paths of the query's file sinks, whose logs get the added
    * micro-batch. */
  def apply(spark: SparkSession, checkpoint: String, partitions: Int, fileSinks: Seq[String]): Int = {
    if (partitions < 1)
      throw new KStreamsException(s"the number of state partitions must be at least 1, got $partitions")
    val root = new Path(checkpoint)
    val fs = root.getFileSystem(spark.sparkContext.hadoopConfiguration)
    if (!fs.exists(root)) throw new KStreamsException(s"no checkpoint at $checkpoint")
    if (!CheckpointOperators.isKStreams(checkpoint))
      throw new KStreamsException(
        s"$checkpoint is not the checkpoint of a query with kstreams operators (no " +
          s"${checkpoint.stripSuffix("/")}/kstreams/operators.json); Spark's own operators can be moved " +
          "with Spark's offline repartitioner")
    val qualified = fs.makeQualified(root).toString
    RunningQueries.onCheckpoint(qualified).headOption.foreach { q =>
      throw new KStreamsException(
        s"query ${Option(q.name).getOrElse(q.id)} is running on $checkpoint: stop it (query.stop()) " +
          "before moving its state")
    }
    val logs = new Logs(fs, root)
    val committed = logs.last("commits").getOrElse {
      throw new KStreamsException(
        s"$checkpoint has no committed micro-batch: there is no state to move; start its query with " +
          s"$ShufflePartitions=$partitions instead")
    }
    val current = logs.shufflePartitions(committed)
    logs.last("offsets").filter(_ > committed).foreach { planned =>
      val pending = logs.shufflePartitions(planned)
      // a repartition cut short (it writes its offsets first): Spark resumes it for the same count
      val interruptedMove = planned == committed + 1 && pending != current
      if (!interruptedMove)
        throw new KStreamsException(
          s"micro-batch $planned of $checkpoint was planned but not committed: a query may still be " +
            "running on it in another process, or it stopped on a failure or a kill. Start the query " +
            "until it commits a micro-batch, stop it, then move its state")
      if (pending != partitions)
        throw new KStreamsException(
          s"a move of $checkpoint to $pending state partitions was cut short: run it again with " +
            s"$pending partitions first (then move again if you want another count)")
    }
    if (current == partitions && logs.last("offsets").forall(_ == committed))
      throw new KStreamsException(s"$checkpoint already has $partitions state partitions")
    val provider = logs.conf(committed).getOrElse(Provider, "the HDFS-backed default")
    if (provider != RocksDB)
      throw new KStreamsException(
        s"$checkpoint keeps its state in $provider; only RocksDB state (which kstreams needs) can be moved")
    val sinkLogs = fileSinks.map { path =>
      val log =
        new FileStreamSinkLog(FileStreamSinkLog.VERSION, spark, new Path(path, "_spark_metadata").toString, None)
      val last = log.getLatestBatchId()
      if (!last.exists(_ >= committed))
        throw new KStreamsException(
          s"$path is not the file sink of the query of $checkpoint: its log ends at micro-batch " +
            s"${last.map(_.toString).getOrElse("(none)")}, the checkpoint's last committed one is $committed")
      log
    }
    val added = preservingSettings(spark) {
      spark.conf.set(FormatVersion, logs.formatVersion(committed).toString)
      new OfflineStateRepartitionRunner(spark, checkpoint, partitions, true).run()
    }
    sinkLogs.foreach { log =>
      if (!log.getLatestBatchId().exists(_ >= added)) log.add(added, Array.empty[SinkFileStatus])
    }
    DedupCaches.clear()
    checkPlacement(spark, checkpoint, partitions)
    current
  }

  /** Fails if a `transformWithState` state row of the checkpoint's last version is not in the
    * partition its grouping key hashes to among `partitions` (where the restarted query looks). */
  private def checkPlacement(spark: SparkSession, checkpoint: String, partitions: Int): Unit = {
    val operators = StateVariables.ofOperators(spark, checkpoint).filter { case (_, name, _) =>
      TransformWithState.contains(name)
    }
    for ((operatorId, _, names) <- operators) {
      for (name <- names) {
        val misplaced = spark.read
          .format("statestore")
          .option("operatorId", operatorId)
          .option("stateVarName", name)
          .load(checkpoint)
          .where(col("partition_id") =!= pmod(hash(col("key")), lit(partitions)))
          .count()
        if (misplaced > 0)
          throw new KStreamsException(
            s"kstreams internal error: after moving $checkpoint to $partitions state partitions, " +
              s"$misplaced row(s) of state '$name' of operator $operatorId are not in the " +
              "partition their key hashes to. Please report this; the checkpoint's previous state is " +
              "still there (restore it by deleting the last offsets and commits files)")
      }
    }
  }

  /** `body` with the session's settings put back after it, every one: Spark's repartitioner runs in
    * the caller's session and sets in it the settings the checkpoint recorded (its state format
    * among them), which would then hold for the session's next queries: over Spark Connect, a
    * real-time query started after a move failed on the checkpoint format version it had left. */
  private def preservingSettings[T](spark: SparkSession)(body: => T): T = {
    val before = spark.conf.getAll
    try body
    finally {
      spark.conf.getAll.keys.filterNot(before.contains).foreach(spark.conf.unset)
      before.foreach { case (key, value) =>
        if (spark.conf.getOption(key).forall(_ != value)) spark.conf.set(key, value)
      }
    }
  }

  /** The checkpoint's offset and commit logs, read as files (`offsets/<batch>`: a version line,
    * then the metadata JSON with the session settings the query runs with). */
  private final class Logs(fs: FileSystem, root: Path) {
    def last(log: String): Option[Long] = {
      val dir = new Path(root, log)
      if (!fs.exists(dir)) None
      else
        fs.listStatus(dir).map(_.getPath.getName).filter(n => n.nonEmpty && n.forall(_.isDigit)).map(_.toLong).maxOption
    }

    private def lines(log: String, batch: Long): Seq[String] = {
      val in = fs.open(new Path(new Path(root, log), batch.toString))
      try new String(in.readAllBytes(), StandardCharsets.UTF_8).split("\n").toSeq
      finally in.close()
    }

    def conf(batch: Long): Map[String, String] = {
      val metadata =
        try mapper.readTree(lines("offsets", batch)(1))
        catch {
          case NonFatal(e) =>
            throw new KStreamsException(s"cannot read micro-batch $batch's offsets in $root: ${e.getMessage}")
        }
      metadata.path("conf").properties().asScala.map(e => e.getKey -> e.getValue.asText()).toMap
    }

    def shufflePartitions(batch: Long): Int =
      conf(batch).get(ShufflePartitions).map(_.toInt).getOrElse {
        throw new KStreamsException(s"micro-batch $batch's offsets in $root do not say $ShufflePartitions")
      }

    /** Spark's state checkpoint format: 2 when the commit records the stores' unique ids. */
    def formatVersion(batch: Long): Int = if (lines("commits", batch).exists(_.contains("stateUniqueIds"))) 2 else 1
  }
}
