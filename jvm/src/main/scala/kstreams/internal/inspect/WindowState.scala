package kstreams
package internal
package inspect

import org.apache.spark.sql.{Column, DataFrame}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.types.StructType

import kstreams.internal.window.WindowProcessor

/** The open windows of a windowed distinct (spec section 3), per input partition: a window whose
  * first record was forwarded and that can still take records, so that a record of its key and
  * window is dropped as a duplicate. `open_until`: the largest stream time of the partition at
  * which the window is still open (past it, its records are late), as `live_until` of the dedup
  * entries: a tumbling window closes when stream time reaches end + grace, so end + grace - 1 µs;
  * a session can be joined while stream time is at most end + gap + grace. Windows closed by the
  * partition's stream time that the operator has not swept yet are left out, as are those a
  * restart that changed the grace keeps closed (`closedBelow`, [[kstreams.internal.window.WindowProcessor]]);
  * the grace is the last run's.
  */
private[inspect] object WindowState {

  def tumbling(state: StateVariables, runs: Seq[Settings]): DataFrame = {
    val graceMicros = runs.last.micros("grace")
    val windows = state("openWindows").select(
      state.group,
      col("user_map_key").as("k"),
      col("user_map_key.windowStart").as("start"),
      col("user_map_value.value").as("end"))
    shown(windows, keyFields(windows), col("end") + lit(graceMicros - 1), col("end") > col("closed_up_to"), state)
  }

  def sessions(state: StateVariables, runs: Seq[Settings]): DataFrame = {
    val horizonMicros = runs.last.micros("gap") + runs.last.micros("grace")
    val sessions = state("sessions")
      .select(
        state.group,
        col("user_map_key").as("k"),
        explode(arrays_zip(col("user_map_value.starts"), col("user_map_value.ends"))).as("s"))
      .select(col("group"), col("k"), col("s.starts").as("start"), col("s.ends").as("end"))
    shown(sessions, keyFields(sessions), col("end") + lit(horizonMicros), col("end") >= col("closed_up_to"), state)
  }

  /** The names of the key's fields: the user's key columns. */
  private def keyFields(windows: DataFrame): Seq[String] =
    windows.schema("k").dataType.asInstanceOf[StructType].fieldNames.toSeq.filter(_ != "windowStart")

  private def shown(
      windows: DataFrame,
      key: Seq[String],
      openUntil: Column,
      aboveFloor: Column,
      state: StateVariables): DataFrame = {
    // a checkpoint written before the grace could change has no closedBelow state
    val floors =
      if (!state.names.contains("closedBelow")) None
      else
        Some(
          state("closedBelow")
            .where(col("user_map_key.value") =!= lit(WindowProcessor.TagKey))
            .select(
              state.group,
              col("user_map_key.value").as("partition"),
              col("user_map_value.value").as("closed_up_to")))
    val withTimes = windows.join(state.streamTimes, "group")
    floors
      .fold(withTimes.withColumn("closed_up_to", lit(Long.MinValue)))(f =>
        withTimes
          .join(f, Seq("group", "partition"), "left")
          .withColumn("closed_up_to", coalesce(col("closed_up_to"), lit(Long.MinValue))))
      .where(openUntil >= col("stream_time") && aboveFloor)
      .select(Seq(col("partition")) ++ key.map(n => col("k").getField(n).as(n)) ++ Seq(
        timestamp_micros(col("start")).as("window_start"),
        timestamp_micros(col("end")).as("window_end"),
        timestamp_micros(openUntil).as("open_until"),
        timestamp_micros(col("stream_time")).as("stream_time")
      ): _*)
      .orderBy((Seq("partition", "window_start") ++ key).map(col): _*)
  }
}
