package kstreams
package internal
package inspect

import org.apache.spark.sql.{DataFrame, Encoders}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.types.{LongType, StructType}

import kstreams.internal.dedup.{PerPartitionDedupProcessor, PerPartitionGroupValues, TimeBucketChunks}

/** The live entries of a per-partition dedup operator (`deduplicate_by_key`,
  * `deduplicate_by_key_value`), decoded the way [[PerPartitionDedupProcessor]] reads its own
  * store, so that what is shown is what the operator decides the next records by.
  *
  * Why this is what the operator would decide: the time-bucket chunks hold every entry a group
  * stored, spilled or not (a spilled group's `entries` rows are a lookup copy of them), and a key's
  * current entry is the one with the largest timestamp among them (an entry is only ever replaced
  * by one with a larger timestamp); an entry older than its partition's stream time minus the
  * interval (after restarts that changed the interval: the smallest since the run that last judged
  * the partition, see `read`) is dead whether or not eviction has removed it yet (spec section 2's
  * purge), so it is left out. A record with this key in this partition and timestamp `t` is then a duplicate iff
  * `|t - timestamp| <= interval` while the partition's stream time stays at or below `live_until`
  * (a record that moves stream time further first kills the entry).
  */
private[inspect] object DedupState {

  def read(state: StateVariables, runs: Seq[Settings], keyTypes: Option[StructType]): DataFrame = {
    // the intervals of the checkpoint's runs that changed it, first to last; a group's tag is the
    // index of the run that last judged it (none: the first), and its entries dead at the end of
    // any run since then stay dead (PerPartitionDedupProcessor.judgeUnderThisInterval): what the
    // next run with the last interval meets is `ts >= stream_time - min(intervals from the tag on)`
    val intervals = runs.map(_.micros("interval"))
    val smallestFrom = typedLit(intervals.indices.map(i => i.toLong -> intervals.drop(i).min).toMap)
    val lastMicros = lit(intervals.last)
    val chunks = state("chunks")
    val mapKey = col("user_map_key.value")
    val judgedAt = chunks
      .where(mapKey === lit(TimeBucketChunks.TagKey))
      .select(state.group, conv(hex(col("user_map_value.value")), 16, 10).cast(LongType).as("judged_at")) // 8 bytes
    val deadBelowGap = element_at(smallestFrom, coalesce(col("judged_at"), lit(0L)))
    // a checkpoint of layout 1 has a `streamTimes` variable; layout 2 keeps them in `chunks`
    val streamTimes = if (state.names.contains("streamTimes")) state.streamTimes else packedStreamTimes(state)
    val entries = chunks
      .where(mapKey >= lit(TimeBucketChunks.ReservedBelow))
      .select(state.group, col("user_map_value.value").as("chunk"))
      .as[(Int, Array[Byte])](Encoders.tuple(Encoders.scalaInt, Encoders.BINARY))
      .flatMap { case (g, chunk) =>
        val out = Vector.newBuilder[(Int, Array[Byte], Long, Long)]
        PerPartitionDedupProcessor.decode(chunk)((key, ts, offset) => out += ((g, key, ts, offset)))
        out.result()
      }(Encoders.tuple(Encoders.scalaInt, Encoders.BINARY, Encoders.scalaLong, Encoders.scalaLong))
      .toDF("group", "key_bytes", "ts", "offset")
    val current = entries.groupBy("group", "key_bytes").agg(max(struct(col("ts"), col("offset"))).as("e"))
    val live = current
      .join(streamTimes, "group")
      .join(judgedAt, Seq("group"), "left")
      .where(col("e.ts") >= col("stream_time") - deadBelowGap)
    live
      .select(
        Seq(col("partition")) ++ StateVariables.keyColumns(keyTypes) ++ Seq(
          timestamp_micros(col("e.ts")).as("timestamp"),
          when(col("e.offset") =!= lit(Long.MinValue), col("e.offset")).cast(LongType).as("offset"),
          timestamp_micros(col("e.ts") + lastMicros).as("live_until"),
          timestamp_micros(col("stream_time")).as("stream_time")
        ): _*)
      .orderBy("partition", "timestamp", "offset")
  }

  /** (group, partition, stream_time) from layout 2's packed values (PerPartitionGroupValues.Packed);
    * a group whose partition has no stream time yet has no row, as in layout 1. */
  private def packedStreamTimes(state: StateVariables): DataFrame =
    state("chunks")
      .where(col("user_map_key.value") === lit(TimeBucketChunks.MetaKey))
      .select(state.group, col("user_map_value.value"))
      .as[(Int, Array[Byte])](Encoders.tuple(Encoders.scalaInt, Encoders.BINARY))
      .flatMap { case (g, bytes) =>
        val p = PerPartitionGroupValues.Packed.decode(bytes)
        if (p.partition == -1) None else Some((g, p.partition, p.streamTimeMicros))
      }(Encoders.tuple(Encoders.scalaInt, Encoders.scalaInt, Encoders.scalaLong))
      .toDF("group", "partition", "stream_time")
}
