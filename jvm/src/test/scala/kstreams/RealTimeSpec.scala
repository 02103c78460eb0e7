package kstreams

import java.nio.file.Files
import java.util.concurrent.ConcurrentLinkedQueue

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{DataFrame, Encoders, ForeachWriter, Row, SparkSession}
import org.apache.spark.sql.execution.streaming.sources.LowLatencyMemoryStream
import org.apache.spark.sql.functions.{col, concat, greatest, lit}
import org.apache.spark.sql.streaming.{StreamingQuery, StreamingQueryException, Trigger}

/** What [[RealTimeSinkWriter]] received, in arrival order (local mode: one JVM). */
object RealTimeSink {
  val rows = new ConcurrentLinkedQueue[Row]()
}

/** A sink Spark allows in real-time mode (foreach): each row as it arrives. */
final class RealTimeSinkWriter extends ForeachWriter[Row] {
  override def open(partitionId: Long, epochId: Long): Boolean = true
  override def process(row: Row): Unit = RealTimeSink.rows.add(row)
  override def close(errorOrNull: Throwable): Unit = ()
}

/** Spec section 8's trigger modes: the per-partition dedup operators in a real-time query
  * (`trigger(realTime=...)`), records added one by one to a real-time source, each partition's
  * output read back in the order it arrived; every other stateful operator refused by name. */
class RealTimeSpec extends SparkSuite {
  import Event.at

  // Short batches only to save time: a step waits for a batch that has read its records to commit (below)
  private val BatchMillis = 300

  // a real-time query holds a task slot per source partition and per state partition at once
  override lazy val spark: SparkSession = KStream
    .configure(SparkSession.builder().master("local[6]").appName(getClass.getSimpleName))
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.session.timeZone", "UTC")
    .config("spark.sql.streaming.realTimeMode.minBatchDuration", BatchMillis.toString)
    .config(TestSpeed.settings)
    .getOrCreate()

  /** Runs `op` in a real-time query with `BatchMillis` batches over a real-time memory source of
    * `partitions` partitions. Each step's records are added one at a time, each to its own
    * partition, in the order given; the step is done when the output holds `totals(step)` rows
    * and a committed batch has read all its records (so a restart replays none of them, and its
    * records are in earlier batches than the next step's). Before the steps in `restartBefore` the query is stopped and started again from
    * its checkpoint, running `restartedOps(i)` from there on if given (a setting a restart may
    * change). Returns each partition's output values in arrival order. */
  private def realTime(
      steps: Seq[Seq[Event]],
      op: DataFrame => DataFrame,
      totals: Seq[Int],
      restartBefore: Set[Int] = Set.empty,
      partitions: Int = 2,
      restartedOps: Map[Int, DataFrame => DataFrame] = Map.empty): Map[Int, Seq[String]] =
    realTimeRows(steps, op, totals, restartBefore, partitions, restartedOps)
      .groupBy(_.getAs[Int]("partition"))
      .map { case (p, rows) => p -> rows.map(_.getAs[String]("value")) }

  /** [[realTime]]'s run, returning every output row in the order it arrived; after each step,
    * `stateRows` gets the state's row count (`numRowsTotal`) of the newest progress once the batch
    * that committed the step has reported (that batch's, or a later one's). */
  private def realTimeRows(
      steps: Seq[Seq[Event]],
      op: DataFrame => DataFrame,
      totals: Seq[Int],
      restartBefore: Set[Int],
      partitions: Int,
      restartedOps: Map[Int, DataFrame => DataFrame] = Map.empty,
      stateRows: Option[collection.mutable.Buffer[Long]] = None): Seq[Row] = {
    val input = LowLatencyMemoryStream[Event](partitions)(Encoders.product[Event], spark.sqlContext)
    val checkpoint = Files.createTempDirectory("kstreams-real-time").toString
    RealTimeSink.rows.clear()
    def start(run: DataFrame => DataFrame): StreamingQuery = run(input.toDF()).writeStream
      .outputMode("update")
      .option("checkpointLocation", checkpoint)
      .trigger(Trigger.RealTime(s"$BatchMillis milliseconds"))
      .foreach(new RealTimeSinkWriter)
      .start()
    // the newest batch in the checkpoint's commit log
    def newestCommitted(): Long = Option(new java.io.File(checkpoint, "commits").list()).toSeq.flatten
      .filter(_.forall(_.isDigit))
      .map(_.toLong)
      .maxOption
      .getOrElse(-1L)
    // Records a committed batch has read, per source partition: a real-time batch's entry in the
    // offset log is written when it ends and holds its end offsets, the source's as the JSON
    // `{"0":5,"1":3}` on the entry's last line.
    def committedEnd(): Map[Int, Int] = newestCommitted() match {
      case -1 => Map.empty
      case batch =>
        val lines = Files.readAllLines(new java.io.File(checkpoint, s"offsets/$batch").toPath).asScala
        "\"(\\d+)\":(\\d+)".r.findAllMatchIn(lines.last).map(m => m.group(1).toInt -> m.group(2).toInt).toMap
    }
    var added = Map.empty[Int, Int] // records added so far, per source partition
    var running = op
    var query = start(running)
    try {
      steps.zip(totals).zipWithIndex.foreach { case ((events, total), i) =>
        if (restartBefore.contains(i)) {
          query.stop()
          running = restartedOps.getOrElse(i, running)
          query = start(running)
        }
        events.foreach(e => added += e.partition -> (added.getOrElse(e.partition, 0) + 1))
        events.foreach(e => input.addData(e.partition, Seq(e)))
        // The step is done once a committed batch has read every record added, so a restart
        // replays none of them. Under load the source reads each record by an RPC call and a
        // batch can end before it reaches records added long before its end (its time is up),
        // so no fixed number of batches after the records is enough: waiting for the newest
        // planned batch + 2 to commit let a restart replay records of a third batch when both
        // lanes of `make test` started beside this suite.
        def covered = { val end = committedEnd(); added.forall { case (p, n) => end.getOrElse(p, 0) >= n } }
        val deadline = System.nanoTime() + 90L * 1000 * 1000 * 1000
        while ((RealTimeSink.rows.size < total || !covered) && System.nanoTime() < deadline) {
          query.exception.foreach(e => throw e)
          Thread.sleep(50)
        }
        assert(RealTimeSink.rows.size >= total, s"step $i: ${RealTimeSink.rows.size} rows out of $total in 90 s")
        assert(covered, s"step $i: committed batches read ${committedEnd()} of $added records in 90 s")
        stateRows.foreach { rows =>
          val committed = newestCommitted()
          while (Option(query.lastProgress).forall(_.batchId < committed) && System.nanoTime() < deadline)
            Thread.sleep(20)
          val progress = Option(query.lastProgress).filter(_.batchId >= committed)
          assert(progress.nonEmpty, s"step $i: no progress of batch $committed in 90 s")
          rows += progress.get.stateOperators.head.numRowsTotal
        }
      }
    } finally query.stop()
    RealTimeSink.rows.asScala.toSeq
  }

  // SEMANTICS.md section 2's examples, interval 10 s unless stated: (input, forwarded indices)
  private val T = 100.0
  private val examples: Seq[(String, Seq[(String, Double)], Seq[Int])] = Seq(
    ("10 seconds", Seq("a" -> T, "a" -> (T + 8), "a" -> (T + 11)), Seq(0, 2)),
    ("10 seconds", Seq("a" -> T, "a" -> (T - 8), "a" -> (T - 11)), Seq(0, 2)),
    ("10 seconds", Seq("a" -> 5.0, "a" -> 15.0, "a" -> 16.0), Seq(0, 2)),
    ("10 seconds", Seq("a" -> 15.0, "a" -> 5.0, "a" -> 4.0), Seq(0, 2)),
    ("0 seconds", Seq("a" -> 5.0, "a" -> 5.0, "a" -> 6.0), Seq(0, 2)),
    ("10 seconds", Seq("k" -> 20.0, "k" -> 25.0, "k" -> 11.0, "k" -> 9.0), Seq(0, 3)),
    ("10 seconds", Seq("k1" -> 10.0, "k2" -> 20.0, "k1" -> 9.0), Seq(0, 1)),
    ("10 seconds", Seq("k1" -> 10.0, "k2" -> 21.0, "k1" -> 9.0), Seq(0, 1, 2)),
    ("100 milliseconds", Seq("k1" -> 0.150, "x" -> 0.200, "k1" -> 0.060), Seq(0, 1)),
    ("100 milliseconds", Seq("x" -> 0.200, "k1" -> 0.050, "k1" -> 0.010), Seq(0, 1, 2))
  )

  for (interval <- examples.map(_._1).distinct) {
    val ofInterval = examples.filter(_._1 == interval)
    test(s"deduplicateByKey, interval $interval: every example of spec section 2, record by record, restarted") {
      // The examples one after another on two partitions, each 1,000 s after the one before on its
      // partition and with keys of its own: its first record takes its partition's stream time
      // past everything before, so each behaves as on a fresh partition (as in Kafka).
      val laid = ofInterval.zipWithIndex.map { case ((_, records, forwarded), i) =>
        val (partition, shift) = (i % 2, 1000.0 * (i / 2 + 1))
        val events = records.zipWithIndex.map { case ((key, seconds), j) =>
          at(s"e$i-$key", shift + seconds, partition = partition, value = s"e$i-r$j")
        }
        (events, forwarded.map(j => s"e$i-r$j"))
      }
      val numbered = Event.numbered(laid.flatMap(_._1)).iterator
      val steps = laid.map(_._1.map(_ => numbered.next())).grouped(math.max(1, laid.size / 2)).map(_.flatten).toSeq
      val want = laid.zipWithIndex.groupBy(_._2 % 2).map { case (p, ls) => p -> ls.flatMap(_._1._2) }
      val forwarded = want.values.flatten.toSet
      val totals = steps.map(_.count(e => forwarded.contains(e.value))).scanLeft(0)(_ + _).tail
      val got = realTime(
        steps,
        df => KStream(df).deduplicateByKey(interval).df,
        totals,
        restartBefore = if (steps.size > 1) Set(1) else Set.empty)
      assert(got == want.filter(_._2.nonEmpty))
    }
  }

  // SEMANTICS.md sections 3 and 4: (operator, op, the records' seconds or sequence numbers, forwarded)
  private val Section3 = Seq(4.0, 5, 6, 23, 22, 24, 34, 33, 32, 7, 22, 35)
  private val others: Seq[(String, DataFrame => DataFrame, Seq[Double], Seq[Int])] = Seq(
    (
      "windowed distinct, tumbling 10 s",
      df => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 seconds")).distinct().df,
      Section3,
      Seq(0, 3, 6)),
    (
      "windowed distinct, session gap 10 s",
      df => KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("10 seconds")).distinct().df,
      Section3,
      Seq(0, 3)),
    (
      "windowed distinct, session gap 9 s",
      df => KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("9 seconds")).distinct().df,
      Section3,
      Seq(0, 3, 6)),
    (
      "deduplicateBySequence",
      // the sequence number in the value; every record at the same time
      df => KStream(df).deduplicateBySequence(col("value").cast("long")).df,
      Seq(1.0, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7, 8, 9, 10, 11),
      (0 to 6) ++ (11 to 14))
  )

  for ((name, op, numbers, forwarded) <- others)
    test(s"$name in real-time mode: the spec's example, record by record, restarted half-way") {
      val sequence = name == "deduplicateBySequence"
      val events = Event.numbered(numbers.zipWithIndex.map { case (n, j) =>
        if (sequence) at("k", 100, value = n.toLong.toString) else at("k", n, value = s"r$j")
      })
      val want = forwarded.map(events(_).value)
      val half = events.size / 2
      val steps = Seq(events.take(half), events.drop(half))
      val totals = Seq(forwarded.count(_ < half), forwarded.size)
      assert(realTime(steps, op, totals, restartBefore = Set(1)) == Map(0 -> want))
    }

  /** Each key's output (value as a string, timestamp in seconds) in arrival order. */
  private def byKey(rows: Seq[Row]): Map[String, Seq[(String, Double)]] =
    rows.groupBy(_.getAs[String]("key")).map { case (k, rs) =>
      k -> rs.map(r =>
        (
          String.valueOf(r.getAs[Any]("value")),
          (r.getAs[java.sql.Timestamp]("timestamp").getTime - Event.Base) / 1000.0))
    }

  /** `events` numbered ([[Event.numbered]]), then each value [[Null]] made null. */
  private def withNulls(events: Seq[Event]): Seq[Event] =
    Event.numbered(events).map(e => if (e.value == Null) e.copy(value = null) else e)
  private val Null = "<null>"

  // SEMANTICS.md section 5's example (key "1" at 5, 3, 10: results at 5, 5, 10), then a null key
  // and a null value (skipped by plain aggregations, spec section 5), a record of another key and
  // one more of "1"; the query restarted before the second half
  private val Section5 = Seq(
    at("1", 5, value = "a"),
    at("1", 3, value = "b"),
    at(null, 4, value = "x"),
    at("1", 10, value = "c"),
    at("1", 11, value = Null),
    at("2", 7, value = "d"),
    at("1", 6, value = "e"))
  // (operator, op, key "1"'s results, key "2"'s result)
  private val aggregations: Seq[(String, DataFrame => DataFrame, Seq[String], String)] = Seq(
    ("count", df => KStream(df).groupByKey.count().df, Seq("1", "2", "3", "4"), "1"),
    ("reduce", df => KStream(df).groupByKey.reduce((agg, v) => concat(agg, v)).df, Seq("a", "ab", "abc", "abce"), "d"),
    (
      "aggregate",
      df => KStream(df).groupByKey.aggregate(lit("<"), (agg, v) => concat(agg, v)).df,
      Seq("<a", "<ab", "<abc", "<abce"),
      "<d")
  )

  for ((name, op, results, other) <- aggregations)
    test(s"$name in real-time mode: spec section 5's example, record by record, restarted half-way") {
      val events = withNulls(Section5)
      val steps = Seq(events.take(4), events.drop(4))
      val got = byKey(realTimeRows(steps, op, Seq(3, 5), restartBefore = Set(1), partitions = 1))
      assert(got == Map("1" -> results.zip(Seq(5.0, 5.0, 10.0, 10.0)), "2" -> Seq(other -> 7.0)))
    }

  test("toTable in real-time mode: spec section 6's example, a delete and a null key, record by record, restarted") {
    // A=1@10, B=2@11, A=1@12, B=3@13, A=1@9 -> A=1@10, B=2@11, B=3@13, A=1@9 (A=1@12 is idempotent);
    // then A deleted @14 (forwarded as a null value) and A=1@15 again (new after the delete)
    val events = withNulls(
      Seq(
        at("A", 10, value = "1"),
        at("B", 11, value = "2"),
        at("A", 12, value = "1"),
        at(null, 12, value = "9"),
        at("B", 13, value = "3"),
        at("A", 9, value = "1"),
        at("A", 14, value = Null),
        at("A", 15, value = "1")
      ))
    val steps = Seq(events.take(4), events.drop(4))
    val got = byKey(realTimeRows(steps, df => KStream(df).toTable.toStream.df, Seq(2, 6), Set(1), partitions = 1))
    assert(
      got == Map(
        "A" -> Seq("1" -> 10.0, "1" -> 9.0, "null" -> 14.0, "1" -> 15.0),
        "B" -> Seq("2" -> 11.0, "3" -> 13.0)))
  }

  test(
    "count and a max-reduce in real-time mode: an independent model's output, per key in order, 4 steps, a restart") {
    // each key lives on one of 3 partitions (as Kafka places keys), so its records reach the
    // processor in offset order and the model's per-key sequence is exact; some timestamps go
    // back in time and some values are null (skipped)
    val rng = new scala.util.Random(31)
    val events = (0 until 3).flatMap { p =>
      (0 until 240).map { i =>
        val value = if (rng.nextInt(20) == 0) null else f"${rng.nextInt(100)}%02d"
        at(s"p$p-k${rng.nextInt(40)}", 1000 + i - rng.nextInt(30), partition = p, offset = i, value = value)
      }
    }
    val steps = events.groupBy(_.offset / 60).toSeq.sortBy(_._1).map(_._2.sortBy(e => (e.partition, e.offset)))
    // the model: per key in offset order, skip null values; the result's timestamp is the largest
    // folded into the stored row (spec section 5); count always changes, so every record is
    // forwarded; an unchanged max is an idempotent update (its timestamp is never older), dropped
    // with the stored row left as it was, timestamp included (spec section 6)
    def model(step: Int, max: Boolean): Map[String, Seq[(String, Double)]] =
      steps
        .take(step + 1)
        .flatten
        .groupBy(_.key)
        .map { case (k, es) =>
          var stored = Option.empty[(String, Long)]
          var n = 0L
          val forwarded = es.sortBy(_.offset).filter(_.value != null).flatMap { e =>
            n += 1
            val ts = stored.fold(e.timestamp.getTime)(_._2.max(e.timestamp.getTime))
            val v = if (max) stored.map(_._1).filter(_ >= e.value).getOrElse(e.value) else n.toString
            if (stored.exists(_._1 == v)) None else { stored = Some(v -> ts); stored }
          }
          k -> forwarded.map { case (v, ts) => v -> (ts - Event.Base) / 1000.0 }
        }
        .filter(_._2.nonEmpty)
    for ((max, op) <- Seq(
        false -> ((df: DataFrame) => KStream(df).groupByKey.count().df),
        true -> ((df: DataFrame) => KStream(df).groupByKey.reduce((a, v) => greatest(a, v)).df))) {
      val totals = steps.indices.map(i => model(i, max).values.map(_.size).sum)
      val got = byKey(realTimeRows(steps, op, totals, restartBefore = Set(2), partitions = 3))
      val want = model(steps.size - 1, max)
      assert(got.keySet == want.keySet)
      want.foreach { case (k, w) => assert(got(k) == w, s"key $k (max: $max)") }
    }
  }

  test("count over tumbling windows in real-time mode: spec section 5's example, a late record, a lagging partition") {
    // window [0,10) holding records at 1, 2, 5, 8 then a late 3 -> result at 8 (section 5); then,
    // after a restart, 12 opens [10,20) and makes partition 0's 4 late (dropped), while partition
    // 1, whose own clock is at 3, still counts its 3 into [0,10) (sections 1 and 5)
    val events = Event.numbered(
      Seq(
        at("k", 1),
        at("k", 2),
        at("k", 5),
        at("k", 8),
        at("k", 3),
        at("k", 12),
        at("k", 4),
        at("k", 3, partition = 1)))
    val steps = Seq(events.take(5), events.drop(5))
    val rows = realTimeRows(
      steps,
      df => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 seconds")).count().df,
      Seq(5, 7),
      restartBefore = Set(1),
      partitions = 2)
    val byWindow =
      rows.groupBy(r => (r.getAs[Row]("window").getAs[java.sql.Timestamp]("start").getTime - Event.Base) / 1000).map {
        case (start, rs) =>
          start -> rs.map(r =>
            (r.getAs[Long]("value"), (r.getAs[java.sql.Timestamp]("timestamp").getTime - Event.Base) / 1000.0))
      }
    assert(
      byWindow == Map(
        0L -> Seq(1L -> 1.0, 2L -> 2.0, 3L -> 5.0, 4L -> 8.0, 5L -> 8.0, 6L -> 8.0),
        10L -> Seq(1L -> 12.0)))
  }

  test("count over session windows in real-time mode: a merge, a new session, a late record, restarted") {
    // gap 10 s, no grace: 1 opens [1,1]; 5 merges it into [1,5] (Kafka Streams, caching off:
    // a tombstone for the replaced session, then the merged one); after a restart 30 opens
    // [30,30] and puts stream time past [1,5]'s close, so 4 is late and dropped
    val events = Event.numbered(Seq(at("k", 1), at("k", 5), at("k", 30), at("k", 4)))
    val rows = realTimeRows(
      Seq(events.take(2), events.drop(2)),
      df => KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("10 seconds")).count().df,
      Seq(3, 4),
      restartBefore = Set(1),
      partitions = 1
    )
    def seconds(t: java.sql.Timestamp) = (t.getTime - Event.Base) / 1000
    val got = rows.map { r =>
      val w = r.getAs[Row]("window")
      (
        seconds(w.getAs[java.sql.Timestamp]("start")),
        seconds(w.getAs[java.sql.Timestamp]("end")),
        Option(r.get(r.fieldIndex("value"))))
    }
    assert(got == Seq((1L, 1L, Some(1L)), (1L, 1L, None), (1L, 5L, Some(2L)), (30L, 30L, Some(1L))))
  }

  test(
    "an idle partition's entries are swept by the watermark in real-time mode, after it took records in two batches") {
    // As DeduplicateSpec's micro-batch test: partition 0 moves on by 200 s a step; partition 1 gets
    // a record in each of the first two steps (two batches, so its sweep timer is put back after a
    // batch it took records in, which waits its timer out) and goes idle (at once:
    // spark.kstreams.partitionIdleTimeout 0 s). Its entries must go once the watermark passes the
    // timer its last batch armed (that batch's watermark + 10 minutes, so when partition 0 is
    // 600-800 s on): compare with the same run whose partition 1 gets nothing.
    val busy = (0 to 7).map(i => Seq(at(s"k$i", i * 200.0, offset = i, value = s"v$i")))
    val idle = Seq(
      at("idle0", 0, partition = 1, offset = 0, value = "i0"),
      at("idle1", 1, partition = 1, offset = 1, value = "i1"))
    def run(withIdle: Boolean): Seq[Long] = {
      val steps = busy.zipWithIndex.map { case (b, i) => b ++ (if (withIdle && i < 2) Seq(idle(i)) else Nil) }
      val totals = steps.map(_.size).scanLeft(0)(_ + _).tail
      val rows = collection.mutable.Buffer.empty[Long]
      realTimeRows(
        steps,
        df => KStream(df).deduplicateByKey("5 seconds").df,
        totals,
        Set.empty,
        2,
        stateRows = Some(rows))
      rows.toSeq
    }
    spark.conf.set("spark.kstreams.partitionIdleTimeout", "0 seconds")
    val (withIdle, without) =
      try (run(withIdle = true), run(withIdle = false))
      finally spark.conf.unset("spark.kstreams.partitionIdleTimeout")
    val runs = s"state rows with an idle partition: $withIdle, without: $without"
    // while the watermark is short of that timer (partition 0 at 400 s), partition 1 holds its
    // chunk, its chunk count and its values (one row in layout 2)
    assert(withIdle(2) >= without(2) + 3, runs)
    // swept: only its values are left
    assert(withIdle.last == without.last + 1, runs)
  }

  test("a restart may change the dedup interval in real-time mode (30 s, 5 s, then 30 s)") {
    // as in test_restart_changes.py. Run 1 (30 s): partition 0 stores a@0, b@10, c@20, partition
    // 1 x@0 and y@10. Run 2 (5 s), records on partition 0 only: a@22 and b@26 forwarded, c@24
    // dropped; partition 1 gets none, but x@0 is dead under 5 s at its stream time 10. Run 3
    // (30 s): c@27 forwarded (c@20 died in run 2), a@40 dropped (a@22 live); on partition 1 x@20
    // forwarded (x@0 died in run 2 and stays dead, though the partition never opened there and
    // its entry is still stored) and y@12 dropped.
    val events = Event.numbered(
      Seq(at("a", 0), at("b", 10), at("c", 20), at("x", 0, partition = 1), at("y", 10, partition = 1)) ++
        Seq(at("a", 22), at("c", 24), at("b", 26)) ++
        Seq(at("c", 27), at("a", 40), at("x", 20, partition = 1), at("y", 12, partition = 1)))
    def dedup(interval: String) = (df: DataFrame) => KStream(df).deduplicateByKey(interval).df
    val got = realTime(
      Seq(events.take(5), events.slice(5, 8), events.drop(8)),
      dedup("30 seconds"),
      Seq(5, 7, 9),
      restartBefore = Set(1, 2),
      restartedOps = Map(1 -> dedup("5 seconds"), 2 -> dedup("30 seconds"))
    )
    assert(got == Map(0 -> Seq("v0", "v1", "v2", "v5", "v7", "v8"), 1 -> Seq("v3", "v4", "v10")))
  }

  test("a restart may change a windowed count's grace in real-time mode (0 s, then 20 s)") {
    // as in test_restart_changes.py: 10 s windows; at the stop stream time is 25 s, [0,10) and
    // [10,20) closed; afterwards a@5, b@15 and d@8 stay late (their results were emitted), c@28
    // counts 2 in [20,30), which 20 s of grace keeps open past f@35, so a@26 counts there too
    val events = Event.numbered(
      Seq(at("a", 1), at("b", 12), at("c", 25)) ++
        Seq(at("a", 5), at("b", 15), at("c", 28), at("d", 8), at("e", 22), at("f", 35), at("a", 26)))
    def counts(grace: String) =
      (df: DataFrame) => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeAndGrace("10 seconds", grace)).count().df
    val rows = realTimeRows(
      Seq(events.take(3), events.drop(3)),
      counts("0 seconds"),
      Seq(3, 7),
      restartBefore = Set(1),
      partitions = 1,
      restartedOps = Map(1 -> counts("20 seconds")))
    // each key's updates in arrival order (keys are spread over both state partitions' tasks)
    val got = rows.groupBy(_.getAs[String]("key")).map { case (key, updates) =>
      key -> updates.map(r =>
        (
          (r.getAs[Row]("window").getAs[java.sql.Timestamp]("start").getTime - Event.Base) / 1000,
          r.getAs[Long]("value")))
    }
    assert(
      got == Map(
        "a" -> Seq(0L -> 1L, 20L -> 1L),
        "b" -> Seq(10L -> 1L),
        "c" -> Seq(20L -> 1L, 20L -> 2L),
        "e" -> Seq(20L -> 1L),
        "f" -> Seq(30L -> 1L)))
  }

  private val operators: Seq[(String, DataFrame => DataFrame, Event => Option[Any])] = Seq(
    ("deduplicateByKey", df => KStream(df).deduplicateByKey("30 seconds").df, e => Option(e.key)),
    (
      "deduplicateByKeyValue",
      df => KStream(df).deduplicateByKeyValue(col("offset") % 3, "30 seconds").df,
      e => Option(e.key).map(k => (k, e.offset % 3)))
  )

  for ((name, op, key) <- operators)
    test(s"$name in real-time mode: the oracle's output, per partition in order, over 4 steps with a restart") {
      // out-of-order, late and duplicate records and a re-delivered run on 3 partitions; each step's
      // records in arrival order ((partition, offset) within a micro-batch of the oracle)
      val batches = DedupOracle.randomBatches(seed = 23, keys = 200, perPartition = 300, batches = 4)
      val steps = batches.map(_.sortBy(e => (e.partition, e.offset)))
      val want = DedupOracle.forwarded(steps, key, 30.0)
      val totals = steps.indices.map(i => DedupOracle.forwarded(steps.take(i + 1), key, 30.0).size)
      val got = realTime(steps, op, totals, restartBefore = Set(2), partitions = 3)
      val wantByPartition = want.groupBy(v => v.drop(1).takeWhile(_ != '-').toInt)
      assert(got.keySet == wantByPartition.keySet)
      got.foreach { case (p, values) =>
        val same = values == wantByPartition(p)
        val at = values.zip(wantByPartition(p)).indexWhere(x => x._1 != x._2)
        assert(same, s"partition $p, ${values.size} rows against ${wantByPartition(p).size}: first difference at $at")
      }
    }

  test("a partition's records out of order in a real-time batch fail the query, naming the partition") {
    // the pipelined shuffle keeps a source task's order (one task per Kafka partition); were that
    // ever to change, the processor's check must stop the query rather than decide out of order
    val message = failure(
      df => KStream(df).deduplicateByKey("10 seconds").df,
      input => input.addData(0, Seq(at("a", 10, offset = 5, value = "v5"), at("b", 11, offset = 3, value = "v3"))))
    assert(message.contains("partition 0 arrived out of order (3 after 5)"), message)
  }

  test("a windowed aggregation whose input partition is not one source task's run stops, saying why") {
    // one source task delivering partitions 0, 1, 0 (as a merge of two topics would): partition
    // 0's clock cannot be computed in the task, and the query says what real-time mode needs
    val message = failure(
      df => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 seconds")).count().df,
      input =>
        input.addData(
          0,
          Seq(at("a", 1, offset = 0), at("b", 2, partition = 1, offset = 0), at("c", 3, offset = 1)).map(e =>
            e.copy(value = "v")))
    )
    assert(
      message.contains(
        "input partition 0 did not reach a windowed aggregation or join as one run in its order: in real-time mode " +
          "each input partition must be read by one source task"),
      message
    )
  }

  /** The messages of the error a real-time query of `op` fails with (after `feed`), outermost first. */
  private def failure(op: DataFrame => DataFrame, feed: LowLatencyMemoryStream[Event] => Unit = _ => ()): String = {
    val input = LowLatencyMemoryStream[Event](1)(Encoders.product[Event], spark.sqlContext)
    val query = op(input.toDF()).writeStream
      .outputMode("update")
      .option("checkpointLocation", Files.createTempDirectory("kstreams-real-time").toString)
      .trigger(Trigger.RealTime(s"$BatchMillis milliseconds"))
      .foreach(new RealTimeSinkWriter)
      .start()
    try {
      feed(input)
      val e = intercept[StreamingQueryException](query.awaitTermination(30000))
      Iterator.iterate[Throwable](e)(_.getCause).takeWhile(_ != null).map(_.getMessage).mkString(" | ")
    } finally query.stop()
  }

  private val refused: Seq[(String, DataFrame => DataFrame)] = Seq(
    "deduplicate" -> (df => KStream(df).deduplicate(col("value"), "10 seconds").df)
  )

  for ((operator, op) <- refused)
    test(s"$operator is refused in real-time mode, by name, before a record is read") {
      val message = failure(op)
      assert(message.contains(s"$operator cannot run in real-time mode"), message)
      assert(!message.contains("STREAMING_REAL_TIME_MODE"), message)
    }

  test("the exactly-once Kafka sink is refused in real-time mode when the query starts, naming the sink") {
    // It commits once per batch (a read_committed consumer would wait a whole batch duration) and
    // has no update mode: Spark's allowlist refuses it in start() (the manual, "Real-time mode")
    val input = LowLatencyMemoryStream[Event](1)(Encoders.product[Event], spark.sqlContext)
    val refused = intercept[Exception](
      KStream(input.toDF())
        .deduplicateByKey("10 seconds")
        .df
        .selectExpr("key", "value")
        .writeStream
        .format("kstreams-kafka-eos")
        .outputMode("update")
        .option("topic", "out")
        .option("kafka.bootstrap.servers", "127.0.0.1:9") // never reached
        .option("checkpointLocation", Files.createTempDirectory("kstreams-real-time").toString)
        .trigger(Trigger.RealTime(s"$BatchMillis milliseconds"))
        .start())
    assert(refused.getMessage.contains("ExactlyOnceKafkaTable$ is not in the sink allowlist"), refused.getMessage)
  }
}
