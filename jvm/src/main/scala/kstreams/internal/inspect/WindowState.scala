package kstreams
package internal
package inspect

import org.apache.spark.sql.{Column, DataFrame}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.types.StructType

import kstreams.internal.state.ClosedFloors

/** The open windows of a windowed distinct (spec section 3), per input partition: a window whose
  * first record was forwarded and that can still take records, so that a record of its key and
  * window is dropped as a duplicate. `open_until`: the largest stream time of the partition at
  * which the window is still open (past it, its records are late), as `live_until` of the dedup
  * entries: a tumbling window closes when stream time reaches end + grace, so end + grace - 1 µs;
  * a session can be joined while stream time is at most end + gap + grace. Windows closed by the
  * partition's stream time that the operator has not swept yet are left out, as are tumbling
  * windows a restart that changed the grace keeps closed (`closedBelow`,
  * `kstreams.internal.state.ClosedFloors`); the grace is the last run's.
  */
private[inspect] object WindowState {

  def tumbling(state: StateVariables, runs: Seq[Settings]): DataFrame = {
    val graces = runs.map(_.micros("grace"))
    val windows = state("openWindows").select(
      state.group,
      col("user_map_key").as("k"),
      col("user_map_key.windowStart").as("start"),
      col("user_map_value.value").as("end"))
    val openUntil = col("end") + lit(graces.last - 1)
    shown(withClosedUpTo(windows, state, graces).where(col("end") > col("closed_up_to")), keyFields(windows), openUntil)
  }

  def sessions(state: StateVariables, runs: Seq[Settings]): DataFrame = {
    val horizonMicros = runs.last.micros("gap") + runs.last.micros("grace")
    val sessions = state("sessions")
      .select(
        state.group,
        col("user_map_key").as("k"),
        explode(arrays_zip(col("user_map_value.starts"), col("user_map_value.ends"))).as("s"))
      .select(col("group"), col("k"), col("s.starts").as("start"), col("s.ends").as("end"))
    // no floor here: a session closed by one can still take a record within `gap` that ends its
    // merged session above the floor (a duplicate then), so it is shown while the grace keeps it
    shown(sessions.join(state.streamTimes, "group"), keyFields(sessions), col("end") + lit(horizonMicros))
  }

  /** `windows` with their partition's stream time and `closed_up_to`: the window end at or below
    * which a tumbling window of that partition stays closed, as the next record of a run with the
    * last grace meets it. That is the partition's stored floor or, for a group not judged since the
    * grace changed, the floor that record's judgement will set (`ClosedFloors.judge`: stream time
    * minus the smallest grace from the run that last judged it to the last one); Long.MinValue for
    * none. */
  private def withClosedUpTo(windows: DataFrame, state: StateVariables, graces: Seq[Long]): DataFrame = {
    val withTimes = windows.join(state.streamTimes, "group")
    // a checkpoint written before the grace could change has no closedBelow state
    if (!state.names.contains("closedBelow")) return withTimes.withColumn("closed_up_to", lit(Long.MinValue))
    val last = graces.size - 1
    val closedBelow = state("closedBelow")
    val isTag = col("user_map_key.value") === lit(ClosedFloors.TagKey)
    val stored = closedBelow
      .where(!isTag)
      .select(state.group, col("user_map_key.value").as("partition"), col("user_map_value.value").as("stored_floor"))
    val judged = closedBelow.where(isTag).select(state.group, col("user_map_value.value").as("judged_at"))
    val smallestBefore = typedLit((0 until last).map(i => i.toLong -> graces.slice(i, last).min).toMap)
    val judgedAt = coalesce(col("judged_at"), lit(0L))
    val pending = when(judgedAt < lit(last.toLong), col("stream_time") - element_at(smallestBefore, judgedAt))
    withTimes
      .join(stored, Seq("group", "partition"), "left")
      .join(judged, Seq("group"), "left")
      .withColumn(
        "closed_up_to",
        greatest(coalesce(col("stored_floor"), lit(Long.MinValue)), coalesce(pending, lit(Long.MinValue))))
  }

  /** The names of the key's fields: the user's key columns. */
  private def keyFields(windows: DataFrame): Seq[String] =
    windows.schema("k").dataType.asInstanceOf[StructType].fieldNames.toSeq.filter(_ != "windowStart")

  /** The windows (with their partition's stream time) still open at it, as rows. */
  private def shown(windows: DataFrame, key: Seq[String], openUntil: Column): DataFrame =
    windows
      .where(openUntil >= col("stream_time"))
      .select(Seq(col("partition")) ++ key.map(n => col("k").getField(n).as(n)) ++ Seq(
        timestamp_micros(col("start")).as("window_start"),
        timestamp_micros(col("end")).as("window_end"),
        timestamp_micros(openUntil).as("open_until"),
        timestamp_micros(col("stream_time")).as("stream_time")
      ): _*)
      .orderBy((Seq("partition", "window_start") ++ key).map(col): _*)
}
