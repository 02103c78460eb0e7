package kstreams
package internal
package inspect

import java.time.Duration

import com.fasterxml.jackson.databind.ObjectMapper
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.{DataFrame, Encoders, SparkSession}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.RowBytes
import org.apache.spark.sql.types.LongType

import kstreams.internal.dedup.PerPartitionDedupProcessor
import kstreams.internal.plan.{CheckpointOperators, HelperColumns}

/** The live entries of a per-partition dedup operator (`deduplicate_by_key`,
  * `deduplicate_by_key_value`) read from its checkpoint with Spark's `statestore` reader, decoded
  * the way [[PerPartitionDedupProcessor]] reads its own store, so that what is shown is what the
  * operator decides the next records by.
  *
  * Why this is what the operator would decide: the time-bucket chunks hold every entry a group
  * stored, spilled or not (a spilled group's `entries` rows are a lookup copy of them), and a key's
  * current entry is the one with the largest timestamp among them (an entry is only ever replaced
  * by one with a larger timestamp); an entry older than its partition's stream time
  * minus the interval is dead whether or not eviction has removed it yet (spec section 2's purge),
  * so it is left out. A record with this key in this partition and timestamp `t` is then a
  * duplicate iff `|t - timestamp| <= interval` while the partition's stream time stays at or below
  * `live_until` (a record that moves stream time further first kills the entry).
  */
private[kstreams] object DedupState {
  val Operators: Set[String] = Set("deduplicate_by_key", "deduplicate_by_key_value")

  /** The state variables only the per-partition dedup processor declares, together. */
  private val Variables = Set("chunks", "chunkCounts", "streamTimes", "entries", "mode", "lastRecordMs")

  def read(spark: SparkSession, checkpoint: String, operator: Int): DataFrame = {
    val recorded = CheckpointOperators.recorded(checkpoint)
    if (recorded.isEmpty)
      throw new KStreamsException(
        s"$checkpoint is not the checkpoint of a query with kstreams operators (no ${checkpoint.stripSuffix("/")}/kstreams/operators.json)")
    if (operator < 1 || operator > recorded.size)
      throw new KStreamsException(
        s"operator #$operator is not in $checkpoint: it records ${recorded.size} kstreams operator(s), " +
          recorded.zipWithIndex.map { case ((d, _), i) => s"#${i + 1} $d" }.mkString("; "))
    val (descriptor, stateKey) = recorded(operator - 1)
    val name = descriptor.takeWhile(_ != '(')
    if (!Operators.contains(name))
      throw new KStreamsException(
        s"operator #$operator of $checkpoint is $descriptor; reading state is supported for " +
          s"${Operators.toSeq.sorted.mkString(" and ")} (per-partition dedup) only")
    val intervalMicros = Intervals.micros(Duration.parse(setting(descriptor, "interval")))
    // the k-th per-partition dedup operator recorded is the k-th with its state variables in Spark's
    // state metadata: both number the operators in plan order
    val nth = recorded.take(operator).count { case (d, _) => Operators.contains(d.takeWhile(_ != '(')) }
    val operatorId = dedupOperatorIds(spark, checkpoint).lift(nth - 1).getOrElse {
      throw new KStreamsException(
        s"$checkpoint has no committed state for operator #$operator ($descriptor) yet: run its query " +
          "until a micro-batch has committed")
    }
    def variable(name: String): DataFrame =
      spark.read
        .format("statestore")
        .option("operatorId", operatorId.toLong)
        .option("stateVarName", name)
        .load(checkpoint)
    val group = col("key").getField(HelperColumns.Group).as("group")
    val fromChunks = variable("chunks")
      .select(group, col("user_map_value.value").as("chunk"))
      .as[(Int, Array[Byte])](Encoders.tuple(Encoders.scalaInt, Encoders.BINARY))
      .flatMap { case (g, chunk) =>
        val out = Vector.newBuilder[(Int, Array[Byte], Long, Long)]
        PerPartitionDedupProcessor.decode(chunk)((key, ts, offset) => out += ((g, key, ts, offset)))
        out.result()
      }(Encoders.tuple(Encoders.scalaInt, Encoders.BINARY, Encoders.scalaLong, Encoders.scalaLong))
      .toDF("group", "key_bytes", "ts", "offset")
    val current = fromChunks
      .groupBy("group", "key_bytes")
      .agg(max(struct(col("ts"), col("offset"))).as("e"))
    val streamTimes = variable("streamTimes")
      .select(group, col("user_map_key.value").as("partition"), col("user_map_value.value").as("stream_time"))
    val live = current
      .join(streamTimes, "group")
      .where(col("e.ts") >= col("stream_time") - lit(intervalMicros))
    val keyColumns = stateKey match {
      case Some(schema) =>
        val decoded = RowBytes.decodeNotNull(col("key_bytes"), schema)
        schema.fieldNames.toSeq.map(n => decoded.getField(n).as(n))
      case None => Seq(col("key_bytes")) // a checkpoint not restarted since it was written by an older release
    }
    live
      .select(
        Seq(col("partition")) ++ keyColumns ++ Seq(
          timestamp_micros(col("e.ts")).as("timestamp"),
          when(col("e.offset") =!= lit(Long.MinValue), col("e.offset")).cast(LongType).as("offset"),
          timestamp_micros(col("e.ts") + lit(intervalMicros)).as("live_until"),
          timestamp_micros(col("stream_time")).as("stream_time")
        ): _*)
      .orderBy("partition", "timestamp", "offset")
  }

  /** A setting of a rendered descriptor (`name(a=1, b=2)`). */
  private def setting(descriptor: String, key: String): String =
    descriptor
      .stripSuffix(")")
      .dropWhile(_ != '(')
      .drop(1)
      .split(", ")
      .collectFirst { case s if s.startsWith(s"$key=") => s.drop(key.length + 1) }
      .getOrElse(throw new KStreamsException(s"no $key in the recorded descriptor $descriptor"))

  /** Spark's operator ids of the checkpoint's per-partition dedup operators, in order. */
  private def dedupOperatorIds(spark: SparkSession, checkpoint: String): Seq[Int] = {
    if (!new Path(checkpoint, "state")
        .getFileSystem(spark.sparkContext.hadoopConfiguration)
        .exists(new Path(checkpoint, "state")))
      return Nil
    val mapper = new ObjectMapper()
    spark.read
      .format("state-metadata")
      .load(checkpoint)
      .select("operatorId", "operatorProperties")
      .collect()
      .toSeq
      .filter { row =>
        val names = Option(row.getString(1)).toSeq.flatMap { json =>
          val vars = mapper.readTree(json).path("stateVariables")
          (0 until vars.size).map(i => vars.get(i).path("stateName").asText())
        }
        Variables.subsetOf(names.toSet)
      }
      .map(_.getLong(0).toInt)
      .sorted
  }
}
