package kstreams

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.functions.col

/** SEMANTICS.md sections 3 and 4 through the Scala API. */
class WindowedAndSequenceSpec extends SparkSuite {
  import Event.at

  private val seconds = Seq(4, 5, 6, 23, 22, 24, 34, 33, 32, 7, 22, 35).map(_.toDouble)
  private val events = seconds.map(s => at("k", s))

  private def windowStarts(df: DataFrame): Seq[(String, Long, Long)] =
    df.orderBy("offset").collect().toSeq.map { r =>
      val w = r.getStruct(r.fieldIndex("window"))
      (
        r.getAs[String]("value"),
        (w.getTimestamp(0).getTime - Event.Base) / 1000,
        (w.getTimestamp(1).getTime - Event.Base) / 1000)
    }

  private val cases = Seq(
    (
      "tumbling 10 s",
      (ks: KStream) => ks.groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).distinct(),
      Seq(("v0", 0L, 10L), ("v3", 20L, 30L), ("v6", 30L, 40L))),
    (
      "session gap 10 s",
      (ks: KStream) => ks.groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("10 s")).distinct(),
      Seq(("v0", 4L, 4L), ("v3", 23L, 23L))),
    (
      "session gap 9 s",
      (ks: KStream) => ks.groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("9 s")).distinct(),
      Seq(("v0", 4L, 4L), ("v3", 23L, 23L), ("v6", 34L, 34L)))
  )

  for ((name, op, expected) <- cases) {
    test(s"windowed distinct $name: batch DataFrame") {
      assert(windowStarts(op(KStream(batch(events))).df) == expected)
    }
    test(s"windowed distinct $name: one micro-batch per record, restart half-way") {
      val values = stream(events.map(Seq(_)), df => op(KStream(df)).df, restartBefore = Set(6))
      assert(values == expected.map(_._1))
    }
  }

  test("windowed count, LateRecords.SideOutput: the records of closed windows in the table's side output") {
    // one micro-batch per record: the watermark (delay 0) is 34 when 7 (v9) and the second 22
    // (v10) arrive, and their windows [0,10) and [20,30) are closed
    val counts = (df: DataFrame) =>
      KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).count(LateRecords.SideOutput)
    val updates = eventRows(events.map(Seq(_)), counts(_).df, restartBefore = Set(6))
    assert(updates.map(_.getAs[Long]("value")) == Seq(1L, 2L, 3L, 1L, 2L, 3L, 1L, 2L, 3L, 4L))
    val late = eventRows(events.map(Seq(_)), counts(_).sideOutput, restartBefore = Set(6))
    assert(
      late.map(r => (r.getAs[String]("value"), r.getAs[Long]("offset"), r.getAs[String]("kstreams_reason"))) ==
        Seq(("v9", 9L, "window closed"), ("v10", 10L, "window closed")))
    val refused = intercept[KStreamsException](
      KStream(batch(events)).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).count(LateRecords.Forward))
    assert(refused.getMessage.contains("cannot forward a record of a closed window"))
    val none = intercept[KStreamsException](
      KStream(batch(events)).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).count().sideOutput)
    assert(none.getMessage.contains("this table has no side output"))
  }

  test("windowed distinct: a partition's records listed out of offset order, also past 2^32, in offset order") {
    // One micro-batch, one partition (plus three partitions of one record each, so that a state
    // task holds more than one group): the sort before the processor (PartitionInput; its prefix
    // packs the group and the offset clamped to 32 bits, ArrivalSortExec) puts them in offset
    // order, which decides the output, and the processor checks it. By offset: 7@4s forwarded, @5s same
    // window, 2^32-1@23s forwarded, 2^32@22s same window, 2^32+1@34s forwarded, @33s same window,
    // @7s in a window closed by stream time 34.
    val twoTo32 = 1L << 32
    val listed = Seq(
      (twoTo32, 22.0),
      (Long.MaxValue - 1, 7.0),
      (twoTo32 + 1, 34.0),
      (7L, 4.0),
      (Long.MaxValue - 2, 33.0),
      (twoTo32 - 1, 23.0),
      (twoTo32 - 2, 5.0))
    val others = (1 to 3).map(p => at("b", 4, partition = p, offset = twoTo32 - p, value = s"p$p"))
    val events = listed.map { case (o, sec) => at("k", sec, offset = o, value = s"o$o") } ++ others
    val expected = Seq("o7", s"o${twoTo32 - 1}", s"o${twoTo32 + 1}", "p1", "p2", "p3")
    val op = (df: DataFrame) => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 s")).distinct().df
    assert(op(batch(events)).collect().map(_.getAs[String]("value")).sorted.toSeq == expected.sorted)
    assert(stream(Seq(events), op) == expected)
  }

  test("sequence dedup: 1..7, 4..7 again, 8..11 -> 1..11 once each, per partition") {
    val seqs = (1 to 7) ++ (4 to 7) ++ (8 to 11)
    val perPartition = (0 until 2).flatMap(p =>
      seqs.zipWithIndex.map { case (s, i) =>
        at(s"p$p", i.toDouble, partition = p, value = s.toString)
      })
    val op = (df: DataFrame) => KStream(df).deduplicateBySequence(col("value").cast("long")).df
    val out = stream(perPartition.grouped(5).toSeq, op, restartBefore = Set(3))
    assert(out == (1 to 11).map(_.toString) ++ (1 to 11).map(_.toString))
  }
}
