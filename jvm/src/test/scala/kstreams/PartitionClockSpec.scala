package kstreams

import java.sql.Timestamp

import org.apache.spark.sql.{DataFrame, Encoders, Row}

import kstreams.Event.at

/** Windows close by the stream time of each record's own input partition (spec sections 1, 5 and
  * 8): a partition that lags behind another loses nothing, and its own clock still closes its
  * windows. Each case in one micro-batch and split over several with a restart. */
class PartitionClockSpec extends SparkSuite {

  /** (key, window start in s, count, timestamp in s) of each update, in output order per key. */
  private def updates(out: Seq[Row]): Seq[(String, Long, String, Double)] =
    out
      .map { r =>
        val window = r.getAs[Row]("window")
        (
          r.getAs[String]("key"),
          (window.getAs[Timestamp]("start").getTime - Event.Base) / 1000,
          Option(r.get(r.fieldIndex("value"))).map(_.toString).orNull,
          (r.getAs[Timestamp]("timestamp").getTime - Event.Base) / 1000.0)
      }
      .sortBy(_._1) // stable: each key's updates keep their order

  private def run(batches: Seq[Seq[Event]], op: DataFrame => DataFrame, restartBefore: Set[Int] = Set.empty) = {
    val numbered = Event.numbered(batches.flatten).iterator
    val (rows, metrics) =
      streamRowsAndMetrics(batches.map(_.map(_ => numbered.next())), Encoders.product[Event], op, restartBefore)
    (updates(rows), metrics.filter(_._1.endsWith(".late_dropped")).values.sum)
  }

  private val minuteWindows =
    (df: DataFrame) => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("1 minute")).count().df

  // the issue's example: partition 1 an hour ahead of partition 0
  private val skewed = Seq(Seq(at("a", 1, partition = 0), at("b", 3600, partition = 1)), Seq(at("a", 2), at("a", 3)))

  for ((split, batches, restart) <- Seq(
      ("one micro-batch", Seq(skewed.flatten), Set.empty[Int]),
      ("two micro-batches, a restart", skewed, Set(1)))) {

    test(s"a partition an hour behind another loses nothing: a@1, 2, 3 on partition 0 count 1, 2, 3 ($split)") {
      val (got, late) = run(batches, minuteWindows, restart)
      assert(got == Seq(("a", 0L, "1", 1.0), ("a", 0L, "2", 2.0), ("a", 0L, "3", 3.0), ("b", 3600L, "1", 3600.0)))
      assert(late == 0)
    }

    test(s"session windows: a lagging partition's records still merge into its session ($split)") {
      val (got, late) = run(
        batches,
        df => KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("10 seconds")).count().df,
        restart)
      // each record extends a's session; the one it replaces gets a tombstone at its own end
      assert(
        got == Seq(
          ("a", 1L, "1", 1.0),
          ("a", 1L, null, 1.0),
          ("a", 1L, "2", 2.0),
          ("a", 1L, null, 2.0),
          ("a", 1L, "3", 3.0),
          ("b", 3600L, "1", 3600.0)))
      assert(late == 0)
    }
  }

  // partition 0's own clock closes [0, 60) at a@100; partition 1 stays at 0 s
  private val ownClock =
    Seq(Seq(at("a", 1), at("a", 100), at("c", 0, partition = 1)), Seq(at("a", 2), at("c", 1, partition = 1)))

  for ((split, batches, restart) <- Seq(
      ("one micro-batch", Seq(ownClock.flatten), Set.empty[Int]),
      ("two micro-batches, a restart", ownClock, Set(1)))) {
    test(s"a record is late by its own partition's clock, not by a slower partition's ($split)") {
      val (got, late) = run(batches, minuteWindows, restart)
      assert(got == Seq(("a", 0L, "1", 1.0), ("a", 60L, "1", 100.0), ("c", 0L, "1", 0.0), ("c", 0L, "2", 1.0)))
      assert(late == 1)
    }
  }

  test("a partition idle for longer than spark.kstreams.partitionIdleTimeout is not waited for") {
    // partition 0 delivers a@1, then nothing while partition 1 moves an hour on; with no idle time
    // allowed, a's window goes with partition 1's clock, and a@2 on partition 0 later starts anew
    val batches = Seq(
      Seq(at("a", 1), at("b", 0, partition = 1)),
      Seq(at("b", 3600, partition = 1)),
      Seq(at("b", 3601, partition = 1)),
      Seq(at("a", 2)))
    spark.conf.set("spark.kstreams.partitionIdleTimeout", "0 seconds")
    val (idle, _) =
      try run(batches, minuteWindows)
      finally spark.conf.unset("spark.kstreams.partitionIdleTimeout")
    assert(idle.filter(_._1 == "a") == Seq(("a", 0L, "1", 1.0), ("a", 0L, "1", 2.0)))
    // by default (10 minutes) partition 0 is waited for: its window is still there
    val (waited, _) = run(batches, minuteWindows)
    assert(waited.filter(_._1 == "a") == Seq(("a", 0L, "1", 1.0), ("a", 0L, "2", 2.0)))
  }

  // ---- the dedup operators: no eviction by another partition's progress ----

  /** Values forwarded, in output order. */
  private def values(batches: Seq[Seq[Event]], op: DataFrame => DataFrame, restart: Set[Int] = Set.empty) =
    stream(batches, op, restart)

  test("deduplicate_by_key: a partition an hour behind keeps its entries when the watermark sweeps") {
    // partition 1 moves the watermark an hour on; partition 0's sweep timer fires (batch 3), but
    // partition 0 delivered moments ago, so y@5 stays live for y@6 (by partition 0's clock: 6 s)
    val batches = Seq(
      Seq(at("y", 5, partition = 0, value = "y5"), at("x", 0, partition = 1, value = "x0")),
      Seq(at("z", 3600, partition = 1, value = "z3600")),
      Seq(at("w", 3601, partition = 1, value = "w3601")),
      Seq(at("y", 6, partition = 0, value = "y6"))
    )
    val op = (df: DataFrame) => KStream(df).deduplicateByKey("10 seconds").df
    assert(values(batches, op) == Seq("y5", "x0", "z3600", "w3601"))
    assert(values(batches, op, Set(2, 3)) == Seq("y5", "x0", "z3600", "w3601"))
  }

  test("deduplicate (global): a partition that delivers later is waited for: y@5 is y@15's duplicate") {
    // the issue's example: partition 1 at 15-31 s first, then partition 0 at 0-7 s, interval 10 s
    val batches = Seq(
      Seq(15, 20, 31).map(t => at(if (t == 15) "y" else s"k$t", t, partition = 1, value = s"p1@$t")),
      Seq(0, 5, 7).map(t => at(if (t == 5) "y" else s"j$t", t, partition = 0, value = s"p0@$t"))
    )
    val op = (df: DataFrame) => KStream(df).deduplicate(org.apache.spark.sql.functions.col("key"), "10 seconds").df
    for (restart <- Seq(Set.empty[Int], Set(1)))
      assert(values(batches, op, restart) == Seq("p0@0", "p0@7", "p1@15", "p1@20", "p1@31"), restart)
    // in one micro-batch the lower partition meets the store first (the manual): y@5 stays, y@15 goes
    assert(values(Seq(batches.flatten), op) == Seq("p0@0", "p0@5", "p0@7", "p1@20", "p1@31"))
  }

  test("windowed distinct: a partition an hour behind keeps its open windows when the watermark sweeps") {
    // partition 1 moves the watermark an hour on and the sweep timers fire (batch 3); partition 0
    // delivered moments ago, so its window [0, 60 s) of a stays open: a@6 is not a first record
    val batches = Seq(
      Seq(at("a", 5, partition = 0, value = "a5"), at("x", 0, partition = 1, value = "x0")),
      Seq(at("z", 3600, partition = 1, value = "z3600")),
      Seq(at("w", 3601, partition = 1, value = "w3601")),
      Seq(at("a", 6, partition = 0, value = "a6"))
    )
    val op =
      (df: DataFrame) => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("1 minute")).distinct().df
    assert(values(batches, op) == Seq("a5", "x0", "z3600", "w3601"))
    assert(values(batches, op, Set(2, 3)) == Seq("a5", "x0", "z3600", "w3601"))
  }

  // ---- stream-stream joins: each task's clock (partition p of both sides) ----

  /** (key, value, timestamp in ms) of a left join of the records whose value starts with "L"
    * against those whose value starts with "R", 10 ms, no grace, in output order. */
  private def leftJoined(batches: Seq[Seq[Event]], restart: Set[Int]): Seq[(String, String, Long)] = {
    val op = (df: DataFrame) => {
      def side(prefix: String) = KStream(df.where(org.apache.spark.sql.functions.col("value").startsWith(prefix)))
      side("L")
        .leftJoin(
          side("R"),
          (l, r) => org.apache.spark.sql.functions.concat_ws("+", l, r),
          JoinWindows.ofTimeDifferenceWithNoGrace("10 milliseconds"))
        .df
    }
    val numbered = Event.numbered(batches.flatten).iterator
    streamRows(batches.map(_.map(_ => numbered.next())), Encoders.product[Event], op, restart).map(r =>
      (r.getAs[String]("key"), r.getAs[String]("value"), r.getAs[Timestamp]("timestamp").getTime - Event.Base))
  }

  private def ms(key: String, millis: Long, partition: Int, value: String) =
    at(key, millis / 1000.0, partition = partition, value = value)

  test("left join: a partition an hour ahead does not close a slower partition's window") {
    // partition 1 is an hour on; a@1 on partition 0 still joins a@5 of its own partition, and is
    // never emitted unmatched (its task's stream time never passes its window)
    val batches = Seq(Seq(ms("a", 1, 0, "L1"), ms("b", 3600000, 1, "Lb")), Seq(ms("a", 5, 0, "R5")))
    for ((split, restart) <- Seq(Seq(batches.flatten) -> Set.empty[Int], batches -> Set(1)))
      assert(leftJoined(split, restart) == Seq(("a", "L1+R5", 5L)), split)
  }

  test("left join: a record that comes after its partition's stream time passed the store's retention finds nothing") {
    // one partition: l25@92 leaves the left store once the left side is at 186 (retention 20 ms),
    // and is emitted unmatched once the task passed 102; r44@98 comes after w@190 on its side
    val records = Seq(ms("k", 92, 0, "L25"), ms("z", 186, 0, "Lz"), ms("w", 190, 0, "Rw"), ms("k", 98, 0, "R44"))
    for ((split, restart) <- Seq(Seq(records) -> Set.empty[Int], Seq(records.take(3), records.drop(3)) -> Set(1)))
      assert(leftJoined(split, restart) == Seq(("k", "L25", 92L)), split)
  }

  test("a bad spark.kstreams.partitionIdleTimeout is refused naming the setting and the value") {
    spark.conf.set("spark.kstreams.partitionIdleTimeout", "soon")
    try {
      val e = intercept[KStreamsException](minuteWindows(batch(Seq(at("a", 1)))))
      assert(
        e.getMessage.contains("spark.kstreams.partitionIdleTimeout") && e.getMessage.contains("soon"),
        e.getMessage)
    } finally spark.conf.unset("spark.kstreams.partitionIdleTimeout")
  }
}
