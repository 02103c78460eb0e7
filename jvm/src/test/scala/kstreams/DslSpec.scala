package kstreams

import org.apache.spark.sql.{Column, DataFrame, Row}
import org.apache.spark.sql.functions._

/** SEMANTICS.md sections 5 and 6 through the Scala API: the DSL issue's test vectors, in one
  * micro-batch and one micro-batch per record with a restart. Two-input operators read one source:
  * partition 0 is the left input, partition 1 the right. */
class DslSpec extends SparkSuite {
  import Event.at

  /** (key, value as string, timestamp in ms after Base), sorted. */
  private def rows(out: Seq[Row]): Seq[(String, String, Long)] =
    out
      .map(r =>
        (
          r.getAs[String]("key"),
          Option(r.get(r.fieldIndex("value"))).map(_.toString).orNull,
          r.getAs[java.sql.Timestamp]("timestamp").getTime - Event.Base))
      .sortBy(t => (t._1, Option(t._2).getOrElse(""), t._3))

  private def sides(df: DataFrame): (KStream, KStream) = {
    val ks = KStream(df)
    (ks.filter(col("partition") === 0), ks.filter(col("partition") === 1))
  }

  private val plus: (Column, Column) => Column = (l, r) => concat_ws("+", l, r)

  private def modes(
      name: String,
      events: Seq[Event],
      op: DataFrame => DataFrame,
      expected: Seq[(String, String, Long)]): Unit = {
    test(s"$name: one micro-batch") {
      assert(rows(eventRows(Seq(events), op)) == expected)
    }
    test(s"$name: one micro-batch per record, restart half-way") {
      assert(rows(eventRows(events.map(Seq(_)), op, restartBefore = Set(events.size / 2))) == expected)
    }
  }

  private def ms(key: String, millis: Long, partition: Int = 0, value: String = null) =
    at(key, millis / 1000.0, partition = partition, value = value)

  test("stateless operators keep the timestamp; peek sees every record; split and merge") {
    val df = batch(Seq(ms("a", 5, value = "x y"), ms("b", 3, value = "z"), ms("c", 9, value = "w")))
    val ks = KStream(df)
    val words = ks
      .filter(col("key") =!= "c")
      .flatMapValues(v => split(v, " "))
      .mapValues(upper)
      .selectKey((k, v) => concat(k, lit("-"), v))
    assert(rows(words.df.collect().toSeq) == Seq(("a-X", "X", 5L), ("a-Y", "Y", 5L), ("b-Z", "Z", 3L)))
    val peeked = new java.util.concurrent.atomic.AtomicInteger() // local mode: same JVM
    assert(rows(ks.peek(_ => peeked.incrementAndGet()).df.collect().toSeq) == rows(df.collect().toSeq))
    assert(peeked.get == 3)
    val branches = ks.split().branch(col("key") === "a", "a").defaultBranch("rest")
    assert(rows(branches("rest").df.collect().toSeq) == Seq(("b", "z", 3L), ("c", "w", 9L)))
    assert(rows(branches("a").merge(branches("rest")).df.collect().toSeq) == rows(df.collect().toSeq))
    assert(
      rows(ks.map((k, v) => (v, k)).filterNot(col("key") === "w").df.collect().toSeq) ==
        Seq(("x y", "a", 5L), ("z", "b", 3L)))
  }

  private val aggregated = Seq(ms("1", 5, value = "a"), ms("1", 3, value = "b"), ms("1", 10, value = "c"))
  modes(
    "count: values at 5, 3, 10 give results at 5, 5, 10",
    aggregated,
    df => KStream(df).groupByKey.count().df,
    Seq(("1", "1", 5L), ("1", "2", 5L), ("1", "3", 10L)))
  modes(
    "reduce keeps the max timestamp",
    aggregated,
    df => KStream(df).groupByKey.reduce((agg, v) => concat(agg, v)).df,
    Seq(("1", "a", 5L), ("1", "ab", 5L), ("1", "abc", 10L))
  )

  modes(
    "windowed count: [0,10) with 1, 2, 5, 8 then a late 3 -> 8",
    Seq(1L, 2L, 5L, 8L, 3L).map(t => ms("k", t)),
    df => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("10 milliseconds")).count().df,
    Seq(("k", "1", 1L), ("k", "2", 2L), ("k", "3", 5L), ("k", "4", 8L), ("k", "5", 8L))
  )

  // Kafka Streams 4.3 skips only null keys in windowed aggregations (KStreamWindowAggregate,
  // KStreamSessionWindowAggregate): a null value is counted. (Event.numbered would name a null
  // value, so these records carry their offsets and run through streamRows.)
  private val nullValued = Seq(
    Event("k", "x", new java.sql.Timestamp(Event.Base + 1), 0, 0L),
    Event("k", null, new java.sql.Timestamp(Event.Base + 20), 0, 1L))
  for ((split, batches) <- Seq("one micro-batch" -> Seq(nullValued), "two, restart" -> nullValued.map(Seq(_)))) {
    test(s"windowed count counts a null value: k=x@1, k=null@20 in [0,100) -> 1, 2 ($split)") {
      val op = (df: DataFrame) =>
        KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeWithNoGrace("100 milliseconds")).count().df
      assert(
        rows(streamRows(batches, org.apache.spark.sql.Encoders.product[Event], op, Set(1))) ==
          Seq(("k", "1", 1L), ("k", "2", 20L)))
    }
    test(s"session count counts a null value: k=x@1, k=null@20, gap 5 ms -> two sessions ($split)") {
      val op = (df: DataFrame) =>
        KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("5 ms")).count().df
      assert(
        rows(streamRows(batches, org.apache.spark.sql.Encoders.product[Event], op, Set(1))) ==
          Seq(("k", "1", 1L), ("k", "1", 20L)))
    }
  }

  modes(
    "session count: gap 10 ms, grace 20 ms; 21 bridges [0,12] and [30,30]",
    Seq(0L, 5L, 30L, 12L, 21L).map(t => ms("k", t)),
    df =>
      KStream(df).groupByKey
        .windowedBy(SessionWindows.ofInactivityGapAndGrace("10 ms", "20 ms"))
        .count()
        .df,
    // tombstones, each at its merged-away session's own end (Kafka Streams 4.3)
    Seq(
      ("k", null, 0L),
      ("k", null, 5L),
      ("k", null, 12L),
      ("k", null, 30L),
      ("k", "1", 0L),
      ("k", "1", 30L),
      ("k", "2", 5L),
      ("k", "3", 12L),
      ("k", "5", 30L))
  )

  // issue cases from the Kafka Streams 4.3.1 comparison (KStreamSessionWindowAggregate):
  modes(
    "session count: k@0, k@2, k@1, gap 5 ms: a record inside an unchanged session replaces it",
    Seq(0L, 2L, 1L).map(t => ms("k", t)),
    df => KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("5 ms")).count().df,
    Seq(("k", null, 0L), ("k", null, 2L), ("k", "1", 0L), ("k", "2", 2L), ("k", "3", 2L))
  )
  modes(
    "session count: k@0, j@25, then k@20 (gap 10 ms, no grace) is not late: 20 >= 25 - 0 - 10",
    Seq(ms("k", 0), ms("j", 25), ms("k", 20)),
    df => KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapWithNoGrace("10 ms")).count().df,
    Seq(("j", "1", 25L), ("k", "1", 0L), ("k", "1", 20L))
  )

  private val joinEvents =
    (0 until 4).map(i => ms(i.toString, 1000 + i, value = s"B$i")) ++
      Seq(("h", 900L), ("i", 901L), ("b", 1100L)).flatMap { case (p, t) =>
        (0 until 4).map(i => ms(i.toString, t, partition = 1, value = s"$p$i"))
      }
  modes(
    "stream-stream join, 100 ms, no grace",
    joinEvents,
    df => { val (l, r) = sides(df); l.join(r, plus, JoinWindows.ofTimeDifferenceWithNoGrace("100 ms")).df },
    Seq(
      ("0", "B0+b0", 1100L),
      ("0", "B0+h0", 1000L),
      ("0", "B0+i0", 1000L),
      ("1", "B1+b1", 1100L),
      ("1", "B1+i1", 1001L),
      ("2", "B2+b2", 1100L),
      ("3", "B3+b3", 1100L))
  )

  private def tableJoin(df: DataFrame): DataFrame = {
    val (l, r) = sides(df)
    l.toTable.join(r.toTable, plus).df
  }

  private val tableEvents = Seq(
    ms("0", 5, value = "X0"),
    ms("1", 6, value = "X1"),
    ms("0", 0, partition = 1, value = "Y0"),
    ms("1", 10, partition = 1, value = "Y1"),
    ms("0", 7, value = "XX0"),
    ms("1", 7, value = "XX1")
  )
  test("table-table join: one micro-batch per record, restart half-way") {
    assert(
      rows(eventRows(tableEvents.map(Seq(_)), tableJoin, restartBefore = Set(3))) ==
        Seq(("0", "X0+Y0", 5L), ("0", "XX0+Y0", 7L), ("1", "X1+Y1", 10L), ("1", "XX1+Y1", 10L)))
  }
  test("table-table join: a right delete gives a tombstone at the later timestamp") {
    val events = Seq(
      ms("0", 6, value = "X0"),
      ms("0", 0, partition = 1, value = "Y0"),
      ms("0", 5, partition = 1, value = "DELETE"))
    val withDeletes =
      (df: DataFrame) => tableJoin(df.withColumn("value", when(col("value") =!= "DELETE", col("value"))))
    assert(rows(eventRows(events.map(Seq(_)), withDeletes)) == Seq(("0", null, 6L), ("0", "X0+Y0", 6L)))
  }

  // issue cases from the Kafka Streams 4.3.1 comparison; "DELETE" becomes a null value
  private val nullDeletes = (df: DataFrame) => df.withColumn("value", when(col("value") =!= "DELETE", col("value")))
  private def splits(events: Seq[Event]) = Seq(Seq(events), events.map(Seq(_)))

  test("table-table inner join: a left delete of a key it never had forwards a tombstone (Kafka)") {
    // right k=R@1, then left k=null@2: KTableKTableInnerJoin forwards a tombstone at max(2, 1)
    val events = Seq(ms("k", 1, partition = 1, value = "R"), ms("k", 2, value = "DELETE"))
    for (batches <- splits(events))
      assert(rows(eventRows(batches, df => tableJoin(nullDeletes(df)))) == Seq(("k", null, 2L)))
  }

  test("table-table join applies a table's updates in their order, not by timestamp (Kafka)") {
    // left k=A@10, then k=B@5 (a later offset), then right k=R@20: the left table holds B
    val events = Seq(ms("k", 10, value = "A"), ms("k", 5, value = "B"), ms("k", 20, partition = 1, value = "R"))
    for (batches <- splits(events)) assert(rows(eventRows(batches, tableJoin)) == Seq(("k", "B+R", 20L)))
  }

  test("stream-stream joins skip a null value on either side (Kafka's StreamStreamJoinUtil.skipRecord)") {
    val events = Seq(ms("k", 0, value = "l1"), ms("k", 1, partition = 1, value = "DELETE"))
    val inner = (df: DataFrame) => {
      val (l, r) = sides(nullDeletes(df)); l.join(r, plus, JoinWindows.ofTimeDifferenceWithNoGrace("10 ms")).df
    }
    for (batches <- splits(events)) assert(rows(eventRows(batches, inner)).isEmpty)
  }

  test("left and outer stream-stream joins emit a null-key record of the outer side at once (KIP-962)") {
    val events = Seq(
      Event(null, "l1", new java.sql.Timestamp(Event.Base), 0, 0L),
      Event(null, "r1", new java.sql.Timestamp(Event.Base + 1), 1, 0L))
    def joined(kind: String)(df: DataFrame): DataFrame = {
      val (l, r) = sides(df)
      val w = JoinWindows.ofTimeDifferenceAndGrace("10 ms", "1 hour") // no window closes here
      (if (kind == "left") l.leftJoin(r, plus, w)
       else if (kind == "outer") l.outerJoin(r, plus, w)
       else l.join(r, plus, w)).df
    }
    def got(kind: String, batches: Seq[Seq[Event]]) =
      streamRows(batches, org.apache.spark.sql.Encoders.product[Event], joined(kind))
        .map(r =>
          (
            Option(r.getAs[String]("key")),
            r.getAs[String]("value"),
            r.getAs[java.sql.Timestamp]("timestamp").getTime - Event.Base))
        .sortBy(_._3)
    for (batches <- Seq(Seq(events), events.map(Seq(_)))) {
      assert(got("left", batches) == Seq((None, "l1", 0L)))
      assert(got("outer", batches) == Seq((None, "l1", 0L), (None, "r1", 1L)))
      assert(got("inner", batches).isEmpty)
    }
  }

  modes(
    "emit on change: A=1@10, B=2@11, A=1@12, B=3@13, A=1@9",
    Seq(
      ms("A", 10, value = "1"),
      ms("B", 11, value = "2"),
      ms("A", 12, value = "1"),
      ms("B", 13, value = "3"),
      ms("A", 9, value = "1")),
    df => KStream(df).toTable.df,
    Seq(("A", "1", 9L), ("A", "1", 10L), ("B", "2", 11L), ("B", "3", 13L))
  )

  test("a dedup follows a join in the same query") {
    val op = (df: DataFrame) => {
      val (l, r) = sides(df)
      l.join(r, (_, _) => lit("same"), JoinWindows.ofTimeDifferenceWithNoGrace("100 ms"))
        .deduplicateByKey("1 second")
        .df
    }
    assert(
      rows(eventRows(Seq(joinEvents), op)) ==
        Seq(("0", "same", 1000L), ("1", "same", 1001L), ("2", "same", 1100L), ("3", "same", 1100L)))
  }
}
