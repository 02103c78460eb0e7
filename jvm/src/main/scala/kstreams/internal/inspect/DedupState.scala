package kstreams
package internal
package inspect

import org.apache.spark.sql.{DataFrame, Encoders}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.types.{LongType, StructType}

import kstreams.internal.dedup.{PerPartitionDedupProcessor, TimeBucketChunks}

/** The live entries of a per-partition dedup operator (`deduplicate_by_key`,
  * `deduplicate_by_key_value`), decoded the way [[PerPartitionDedupProcessor]] reads its own
  * store, so that what is shown is what the operator decides the next records by.
  *
  * Why this is what the operator would decide: the time-bucket chunks hold every entry a group
  * stored, spilled or not (a spilled group's `entries` rows are a lookup copy of them), and a key's
  * current entry is the one with the largest timestamp among them (an entry is only ever replaced
  * by one with a larger timestamp); an entry older than its partition's stream time minus the
  * interval is dead whether or not eviction has removed it yet (spec section 2's purge), so it is
  * left out. A record with this key in this partition and timestamp `t` is then a duplicate iff
  * `|t - timestamp| <= interval` while the partition's stream time stays at or below `live_until`
  * (a record that moves stream time further first kills the entry).
  */
private[inspect] object DedupState {

  def read(state: StateVariables, settings: Settings, keyTypes: Option[StructType]): DataFrame = {
    val chunks = state("chunks")
    val isTag = col("user_map_key.value") === lit(TimeBucketChunks.TagKey)
    // the interval each group's entries were last judged under: its tag after a restart that
    // changed the interval, the checkpoint's recorded one otherwise (PerPartitionDedupProcessor)
    val intervals = chunks
      .where(isTag)
      .select(
        state.group,
        conv(hex(col("user_map_value.value")), 16, 10).cast(LongType).as("interval")
      ) // 8 bytes, big-endian
    val intervalMicros = coalesce(col("interval"), lit(settings.micros("interval")))
    val entries = chunks
      .where(!isTag)
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
      .join(state.streamTimes, "group")
      .join(intervals, Seq("group"), "left")
      .where(col("e.ts") >= col("stream_time") - intervalMicros)
    live
      .select(
        Seq(col("partition")) ++ StateVariables.keyColumns(keyTypes) ++ Seq(
          timestamp_micros(col("e.ts")).as("timestamp"),
          when(col("e.offset") =!= lit(Long.MinValue), col("e.offset")).cast(LongType).as("offset"),
          timestamp_micros(col("e.ts") + intervalMicros).as("live_until"),
          timestamp_micros(col("stream_time")).as("stream_time")
        ): _*)
      .orderBy("partition", "timestamp", "offset")
  }
}
