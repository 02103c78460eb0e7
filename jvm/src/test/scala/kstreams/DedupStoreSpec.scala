package kstreams

import java.nio.file.Files

import scala.collection.mutable

import org.apache.spark.sql.{DataFrame, Encoders}
import org.apache.spark.sql.execution.streaming.runtime.MemoryStream
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.streaming.StreamingQueryException

import kstreams.internal.dedup._

/** The dedup stores (per partition and global) at every memory setting: kept in memory between
  * micro-batches, spilled to one RocksDB row per key early, and spilling in the middle of a stream,
  * each against an oracle written from SEMANTICS.md section 2 (not from the processor), in one
  * micro-batch and in many with restarts; a kept in-memory map must never outlive a micro-batch
  * that did not commit; and the global store's map rebuilt from its log must equal the kept one. */
class DedupStoreSpec extends SparkSuite {
  private val Interval = 30.0 // seconds

  private def randomBatches(seed: Int, keys: Int, perPartition: Int, batches: Int): Seq[Seq[Event]] =
    DedupOracle.randomBatches(seed, keys, perPartition, batches)

  private def oracle(batches: Seq[Seq[Event]], dedupKey: Event => Option[Any], global: Boolean = false): Seq[String] =
    DedupOracle.forwarded(batches, dedupKey, Interval, global)

  private def withMemory[T](setting: Option[String])(body: => T): T = {
    setting.foreach(spark.conf.set(DedupCaches.MemoryConf, _))
    try body
    finally spark.conf.unset(DedupCaches.MemoryConf)
  }

  private val operators: Seq[(String, DataFrame => DataFrame, Event => Option[Any], Boolean)] = Seq(
    ("deduplicateByKey", df => KStream(df).deduplicateByKey(s"$Interval seconds").df, e => Option(e.key), false),
    (
      "deduplicateByKeyValue",
      df => KStream(df).deduplicateByKeyValue(col("offset") % 3, s"$Interval seconds").df,
      e => Option(e.key).map(k => (k, e.offset % 3)),
      false),
    (
      "deduplicate (global, by key)",
      df => KStream(df).deduplicate(col("key"), s"$Interval seconds").df,
      e => Option(e.key),
      true)
  )

  // in memory; spilled from the first record (an empty map is over 1 KB); spilling part-way
  // (about a thousand entries of a partition fill 150 KB)
  private val memories = Seq("in memory" -> None, "spilled" -> Some("1k"), "spills part-way" -> Some("150k"))

  for ((opName, op, key, global) <- operators; (memoryName, memory) <- memories) {
    val batches = randomBatches(seed = 11, keys = 1500, perPartition = 1200, batches = 8)
    // arrival order is (micro-batch, offset): the "-dup" records' high offsets put them at the end
    // of their micro-batch, so each split has its own expected output
    test(s"$opName, $memoryName: the oracle's output in one micro-batch") {
      val got = withMemory(memory)(eventRows(Seq(batches.flatten), op)).map(_.getAs[String]("value"))
      assertSame(got, oracle(Seq(batches.flatten), key, global))
    }
    test(s"$opName, $memoryName: the oracle's output over 8 micro-batches with 2 restarts") {
      val got = withMemory(memory)(eventRows(batches, op, restartBefore = Set(3, 6)))
        .map(_.getAs[String]("value"))
      assertSame(got, oracle(batches, key, global))
    }
  }

  // a checkpoint of an earlier release (or one written with spark.kstreams.dedup.stateLayout=1)
  // runs the per-partition store in layout 1, its seven state variables: the same oracle
  for ((opName, op, key, _) <- operators.filterNot(_._4))
    test(s"$opName, spills part-way, layout 1: the oracle's output over 8 micro-batches with 2 restarts") {
      val batches = randomBatches(seed = 11, keys = 1500, perPartition = 1200, batches = 8)
      spark.conf.set(PerPartitionDedupProcessor.StateLayoutConf, "1")
      val got =
        try withMemory(Some("150k"))(eventRows(batches, op, restartBefore = Set(3, 6))).map(_.getAs[String]("value"))
        finally spark.conf.unset(PerPartitionDedupProcessor.StateLayoutConf)
      assertSame(got, oracle(batches, key))
    }

  private def assertSame(got: Seq[String], want: Seq[String]): Unit =
    assert(
      got.sorted == want.sorted,
      s"forwarded but not by the oracle: ${got.diff(want).take(10)}; missing: ${want.diff(got).take(10)}")

  /** Whether the query died of the planned sink failure (Spark wraps foreachBatch's exception). */
  private def plannedSinkFailure(e: StreamingQueryException): Boolean =
    Iterator.iterate[Throwable](e)(_.getCause).takeWhile(_ != null).exists(_.isInstanceOf[PlannedSinkFailure])

  private val keptMapOperators: Seq[(String, DataFrame => DataFrame, Boolean)] = Seq(
    (
      "deduplicateByKey",
      df => KStream(df, StreamColumns(offset = None)).deduplicateByKey(s"$Interval seconds").df,
      false),
    (
      "deduplicate (global)",
      df => KStream(df, StreamColumns(offset = None)).deduplicate(col("key"), s"$Interval seconds").df,
      true)
  )

  for ((opName, op, global) <- keptMapOperators)
    test(s"$opName: a kept in-memory map is not used after a micro-batch that did not commit") {
      // No offset column, so a record met again is a duplicate, not a re-delivery: a map that still
      // held the failed micro-batch's entries would drop that micro-batch's records when it re-runs.
      val batches = (0 until 5).map(b =>
        (0 until 40).map(i =>
          Event.at(
            s"k$b-${i % 25}",
            100.0 + b * 5 + i * 0.01,
            partition = i % 2,
            offset = b * 100L + i,
            value = s"b$b-$i")))
      val want = oracle(batches, e => Option(e.key), global)
      val input = MemoryStream[Event](Encoders.product[Event], spark)
      val deduped = op(input.toDF())
      val checkpoint = Files.createTempDirectory("kept-map").toString
      val output = mutable.TreeMap.empty[Long, Seq[String]]
      var failOnce = true
      def start() = deduped.writeStream
        .option("checkpointLocation", checkpoint)
        .foreachBatch { (df: DataFrame, batchId: Long) =>
          val rows = df.collect().map(_.getAs[String]("value")).toSeq
          if (batchId == 2 && failOnce) { failOnce = false; throw new PlannedSinkFailure }
          output.synchronized { output(batchId) = rows }
          ()
        }
        .start()
      var query = start()
      var restarts = 0
      try {
        batches.foreach { b =>
          input.addData(b)
          // only the planned failure (the sink's, after the state was written) restarts the
          // query; any other exception propagates and fails the test
          try query.processAllAvailable()
          catch {
            case e: StreamingQueryException if plannedSinkFailure(e) =>
              restarts += 1
              query.stop(); query = start(); query.processAllAvailable()
          }
        }
      } finally query.stop()
      assert(!failOnce, "the sink never failed")
      assert(restarts == 1, s"$restarts restarts for one planned failure")
      assertSame(output.values.flatten.toSeq, want)
    }

  // deduplicate's in-memory store rebuilt from its log (its maps dropped before every micro-batch)
  // must hold what the kept maps hold: the log's tombstones are what keeps a replaced, purged or
  // evicted entry from coming back when another bucket of the id is dropped first. Interval 10 s,
  // buckets of 10 s; `p`: partition, the records' offsets count up per partition.
  private val rebuildCases: Seq[(String, Seq[Seq[(String, Double, Int)]], Seq[String])] = Seq(
    (
      "an entry replaced by one of an older bucket, which is dropped first",
      // x@80 on the slow partition 1 replaces x@100 (20 s apart, not a duplicate); at 100 s on
      // both partitions x@80's bucket is dropped and x evicted: x@105 is new
      Seq(Seq(("x", 100, 0)), Seq(("x", 80, 1)), Seq(("z", 100, 1)), Seq(("b", 101, 0)), Seq(("x", 105, 0))),
      Seq("x@100", "x@80", "z@100", "b@101", "x@105")),
    (
      "an entry purged by a partition it is dead for",
      // partition 1 at 115 s: x@100 is dead for it, x@75 late; x is purged, so x@105 is new
      Seq(Seq(("x", 100, 0), ("w", 115, 1)), Seq(("x", 75, 1)), Seq(("x", 105, 0))),
      Seq("x@100", "w@115", "x@75", "x@105")),
    (
      "an entry evicted while its bucket stays",
      // at 107 s on both partitions, x@81's bucket is dropped and x (now x@95, dead for both) is
      // evicted; partition 2, new at 98 s, then finds no x
      Seq(
        Seq(("x", 81, 0)),
        Seq(("x", 95, 0)),
        Seq(("a", 107, 0), ("b", 107, 1)),
        Seq(("c", 108, 0)),
        Seq(("x", 98, 2))),
      Seq("x@81", "x@95", "a@107", "b@107", "c@108", "x@98"))
  )

  for ((caseName, records, want) <- rebuildCases; rebuild <- Seq(false, true)) {
    val how = if (rebuild) "rebuilt from the log before every micro-batch" else "kept in memory"
    test(s"deduplicate (global), $how: $caseName") {
      val offsets = mutable.Map.empty[Int, Long].withDefaultValue(0L)
      val batches = records.map(_.map { case (id, seconds, p) =>
        offsets(p) += 1
        Event.at(id, seconds, partition = p, offset = offsets(p), value = s"$id@${seconds.toInt}")
      })
      val input = MemoryStream[Event](Encoders.product[Event], spark)
      val got = mutable.ArrayBuffer.empty[String]
      // no partition is waited for once it has delivered, nor one not seen yet: each micro-batch
      // evicts what the partitions' clocks have passed (the cases are about the log, not idleness)
      spark.conf.set("spark.kstreams.partitionIdleTimeout", "0 seconds")
      val deduplicated =
        try
          KStream(input.toDF().withWatermark("timestamp", "1 hour")) // no sweep
            .deduplicate(col("key"), "10 seconds")
            .df
        finally spark.conf.unset("spark.kstreams.partitionIdleTimeout")
      val query = deduplicated.writeStream
        .foreachBatch { (df: DataFrame, _: Long) => got ++= df.collect().map(_.getAs[String]("value")); () }
        .option("checkpointLocation", Files.createTempDirectory("rebuild").toString)
        .start()
      try
        batches.foreach { b =>
          if (rebuild) DedupCaches.clear()
          input.addData(b)
          query.processAllAvailable()
        }
      finally query.stop()
      assert(got.sorted == want.sorted)
    }
  }

  // A map kept from earlier micro-batches that outgrows the memory in the middle of one moves the
  // entries it kept to RocksDB rows (SpillableStore.moveToEntries): the earlier keys met again
  // after that point, and in the next micro-batch, must still be duplicates. Sized so that the
  // first micro-batch's map fits the setting and the second's passes it part-way: 1,000 keys of
  // one partition fill about 85 KB, 3,000 about 250 KB; the global store's 64 groups hold about
  // 80 and 240 ids each (at some 180 bytes an id) of 5,000 and 15,000 keys.
  for ((opName, op, key, global, memory, oldKeys) <- Seq(
      (operators(0)._1, operators(0)._2, operators(0)._3, false, "150k", 1000),
      (operators(2)._1, operators(2)._2, operators(2)._3, true, "40k", 5000)))
    test(s"$opName: a kept map that outgrows the memory mid-batch keeps its earlier entries") {
      def events(n: Int, seconds: Int => Double, firstOffset: Int)(value: Int => String) =
        (0 until n).map(i =>
          Event.at(value(i).takeWhile(_ != '-'), seconds(i), offset = firstOffset + i, value = value(i)))
      val old = events(oldKeys, i => 100 + i * 0.001, 0)(i => s"o$i-first")
      val fresh = events(2 * oldKeys, i => 105 + i * 0.001, oldKeys)(i => s"n$i")
      val metAgain = events(oldKeys, _ => 110, 3 * oldKeys)(i => s"o$i-again")
      val thirdTime = events(oldKeys, _ => 115, 4 * oldKeys)(i => s"o$i-third")
      val batches = Seq(old, fresh ++ metAgain, thirdTime)
      val want = oracle(batches, key, global)
      assert(want.size == 3 * oldKeys, s"${want.size}: the oracle forwards each key once")
      val got = withMemory(Some(memory))(eventRows(batches, op)).map(_.getAs[String]("value"))
      assertSame(got, want)
    }

  test("a map that grows past its compaction size inside one micro-batch keeps its live entries") {
    // 160,000 records 1 ms apart in one micro-batch, 10-second interval: every other record has a
    // key of its own (the map passes 65,536 entries, where the processor drops dead ones as it
    // goes, as a long real-time batch does), the others cycle through 3,000 keys, each met again
    // 6 s later: live, so a duplicate (and 12 s later new again)
    val events = (0 until 160000).map { i =>
      val key = if (i % 2 == 0) s"u$i" else s"r${(i / 2) % 3000}"
      Event.at(key, 1000 + i / 1000.0, offset = i.toLong, value = s"v$i")
    }
    val want = DedupOracle.forwarded(Seq(events), e => Option(e.key), 10.0)
    val got = stream(Seq(events), df => KStream(df).deduplicateByKey("10 seconds").df)
    val duplicates = events.size - want.size // every other meeting of a cycling key (12 s apart: new)
    assert(duplicates == 39000, s"$duplicates duplicates")
    assertSame(got, want)
  }

  test("a bad state layout setting is refused naming the setting") {
    spark.conf.set(PerPartitionDedupProcessor.StateLayoutConf, "3")
    val e =
      try intercept[KStreamsException](KStream(batch(Seq(Event.at("a", 1)))).deduplicateByKey("1 s"))
      finally spark.conf.unset(PerPartitionDedupProcessor.StateLayoutConf)
    assert(
      e.getMessage == s"${PerPartitionDedupProcessor.StateLayoutConf} must be 1 or 2, got '3' (the manual, \"Operating a query\")")
  }

  test("a bad memory setting is refused naming the setting") {
    val e = intercept[KStreamsException](
      withMemory(Some("lots"))(KStream(batch(Seq(Event.at("a", 1)))).deduplicateByKey("1 s")))
    assert(e.getMessage.contains(s"cannot read ${DedupCaches.MemoryConf}='lots'"))
  }
}

/** The one failure DedupStoreSpec's kept-map tests provoke: the sink of micro-batch 2, once. */
private class PlannedSinkFailure extends RuntimeException("sink down")
