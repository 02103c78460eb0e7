package kstreams
package internal
package inspect

import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.{Column, DataFrame, Encoders}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.types.{LongType, StructType}

import kstreams.internal.dedup.{GlobalLog, SpreadRecord}

/** The live entries of `deduplicate`'s global store (spec section 2: one entry per id over all
  * partitions, judged by each record's own partition's stream time), read the way
  * [[kstreams.internal.dedup.GlobalDedupProcessor]] reads its own store, so that what is shown is what the operator decides
  * the next records by.
  *
  * Why this is what the operator would decide: a group kept in memory holds its ids in its log
  * (`logChunks`): an id's entry is its highest-numbered write that no tombstone voids, exactly as
  * the processor rebuilds its map; a spilled group holds them as `entries` rows. A record of
  * partition `p` with that id and timestamp `t` is a duplicate iff the entry is live for `p` (its
  * timestamp at least `p`'s stream time minus the interval) and `|t - timestamp| <= interval`. So
  * each entry is shown with the partitions it is live for (`live_for_partitions`, by the stream
  * times the group knows), and entries live for none are left out, removed or not: the answer never
  * depends on when eviction ran.
  *
  * After a restart that changed the interval, the interval is the last run's, and an entry is also
  * dead for the partitions its mark in `deadFor` names ([[kstreams.internal.dedup.EarlierDeaths]]),
  * or, in a group not judged since the change, for those its judgement will name: `ts` below the
  * partition's stream time minus the smallest interval from the run that last judged the group to
  * the last one.
  */
private[inspect] object GlobalDedupState {

  def read(state: StateVariables, runs: Seq[Settings], keyTypes: Option[StructType]): DataFrame = {
    val intervals = runs.map(_.micros("interval"))
    val intervalMicros = intervals.last
    // The id group (0-63) from the store's grouping key: the group's placement key, whose hash is
    // the group ([[org.apache.spark.sql.kstreams.GroupPlacement]]), or, in a checkpoint from before
    // the placement, the group itself (none of 0-63 hashes into 0-63, so the two never mix up).
    val group = {
      val hashed = hash(col("key.group"))
      when(hashed >= 0 && hashed < lit(SpreadRecord.Groups), hashed).otherwise(col("key.group")).as("group")
    }
    // a group of the spread store without a mode was written before the in-memory mode: spilled
    val inMemory = state("storeMode").where(!col("value.spilled")).select(group)
    val logged = state("logChunks")
      .select(group, col("user_map_value.value").as("chunk"))
      .join(inMemory, "group")
      .as[(Int, Array[Byte])](Encoders.tuple(Encoders.scalaInt, Encoders.BINARY))
      .groupByKey(_._1)(Encoders.scalaInt)
      .flatMapGroups((group, chunks) => replay(group, chunks.map(_._2)))(
        Encoders.tuple(Encoders.scalaInt, Encoders.BINARY, Encoders.scalaLong, Encoders.scalaInt, Encoders.scalaLong))
      .toDF("group", "key_bytes", "ts", "stored_partition", "offset")
    val spilled = state("entries")
      .select(
        group,
        col("user_map_key.value").as("key_bytes"),
        col("user_map_value.timestampMicros").as("ts"),
        col("user_map_value.partition").as("stored_partition"),
        col("user_map_value.offset").as("offset")
      )
      .join(inMemory, Seq("group"), "left_anti")
    val clocks = state("partitionClocks").select(
      group,
      col("user_map_key.value").as("clock_partition"),
      col("user_map_value.streamTimeMicros").as("stream_time"))
    val live = logged
      .unionByName(spilled)
      .join(clocks, "group")
      .where(col("ts") >= col("stream_time") - lit(intervalMicros))
      .transform(aliveAfterRestarts(state, group, intervals))
      .groupBy("group", "key_bytes", "ts", "stored_partition", "offset")
      .agg(array_sort(collect_list(col("clock_partition"))).as("live_for_partitions"))
    live
      .select(
        Seq(col("group")) ++ StateVariables.keyColumns(keyTypes) ++ Seq(
          timestamp_micros(col("ts")).as("timestamp"),
          col("stored_partition").as("partition"),
          when(col("offset") =!= lit(Long.MinValue), col("offset")).cast(LongType).as("offset"),
          timestamp_micros(col("ts") + lit(intervalMicros)).as("live_until"),
          col("live_for_partitions")
        ): _*)
      .orderBy("timestamp", "partition", "offset")
  }

  /** `entries` (one row per entry and partition clock) without the rows whose entry a restart
    * that changed the interval found dead for that partition, or will find dead when the group
    * is next judged ([[kstreams.internal.dedup.EarlierDeaths.judge]]). */
  private def aliveAfterRestarts(state: StateVariables, group: Column, intervals: Seq[Long])(
      entries: DataFrame): DataFrame =
    if (intervals.size == 1) entries // never changed: nothing judged under another interval
    else {
      val last = intervals.size - 1
      val smallestBefore = typedLit((0 until last).map(i => i.toLong -> intervals.slice(i, last).min).toMap)
      // a checkpoint whose run with the change has not committed yet has no deadFor state
      val (marks, judged) =
        if (!state.names.contains("deadFor")) (None, None)
        else {
          val deadFor = state("deadFor")
          val isTag = length(col("user_map_key.value")) === 0
          val marks = deadFor
            .where(!isTag)
            .select(
              group,
              col("user_map_key.value").as("key_bytes"),
              col("user_map_value.timestampMicros").as("mark_ts"),
              col("user_map_value.partition").as("mark_partition"),
              col("user_map_value.offset").as("mark_offset"),
              col("user_map_value.partitions").as("dead_for")
            )
          val judged = deadFor.where(isTag).select(group, col("user_map_value.timestampMicros").as("judged_at"))
          (Some(marks), Some(judged))
        }
      val withMarks = marks.fold(entries.withColumn("dead_for", lit(null).cast("array<int>")))(m =>
        entries
          .join(m, Seq("group", "key_bytes"), "left")
          .withColumn(
            "dead_for",
            when(
              col("mark_ts") === col("ts") && col("mark_partition") === col("stored_partition") &&
                col("mark_offset") === col("offset"),
              col("dead_for")))
          .drop("mark_ts", "mark_partition", "mark_offset"))
      val withJudged = judged.fold(withMarks.withColumn("judged_at", lit(0L)))(j =>
        withMarks.join(j, Seq("group"), "left").withColumn("judged_at", coalesce(col("judged_at"), lit(0L))))
      val markedDead = coalesce(array_contains(col("dead_for"), col("clock_partition")), lit(false))
      val pendingDead = col("judged_at") < lit(last.toLong) &&
        col("ts") < col("stream_time") - element_at(smallestBefore, col("judged_at"))
      withJudged.where(!markedDead && !coalesce(pendingDead, lit(false))).drop("dead_for", "judged_at")
    }

  /** The ids of one in-memory group as its log says (as the processor's `readLog`): per id its
    * highest-numbered write, unless a tombstone voids the writes numbered below its own number. */
  private def replay(group: Int, chunks: Iterator[Array[Byte]]): Iterator[(Int, Array[Byte], Long, Int, Long)] = {
    val latest = mutable.HashMap.empty[ByteBuffer, (Long, Long, Int, Long)] // seq, ts, partition, offset
    val voidBelow = mutable.HashMap.empty[ByteBuffer, Long]
    chunks.foreach(chunk =>
      GlobalLog.decodeLog(chunk) { rec =>
        val k = ByteBuffer.wrap(rec.key)
        if (rec.isTombstone) voidBelow(k) = math.max(voidBelow.getOrElse(k, Long.MinValue), rec.seq)
        else if (latest.get(k).forall(_._1 < rec.seq))
          latest(k) = (rec.seq, rec.timestampMicros, rec.partition, rec.offset)
      })
    latest.iterator.collect {
      case (k, (seq, ts, partition, offset)) if voidBelow.get(k).forall(seq >= _) =>
        (group, k.array(), ts, partition, offset)
    }
  }
}
