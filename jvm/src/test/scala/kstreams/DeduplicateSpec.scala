package kstreams

import java.nio.file.Files
import java.time.Duration

import org.apache.spark.sql.DataFrame

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.execution.SortExec
import org.apache.spark.sql.execution.streaming.runtime.{MemoryStream, StreamingQueryWrapper}
import org.apache.spark.sql.functions.{col, hash, lit, pmod}
import org.apache.spark.sql.kstreams.{ArrivalSortExec, GroupPlacement, RowBytes}

import kstreams.internal.dedup._
import kstreams.internal.plan._

/** SEMANTICS.md section 2 through the Scala API: each example in one micro-batch, one micro-batch
  * per record, with a restart from the checkpoint half-way, and as a batch DataFrame. */
class DeduplicateSpec extends SparkSuite {
  import Event.at

  private val T = 100.0
  private val examples: Seq[(String, String, Seq[Event], Seq[Int])] = Seq(
    ("a@t, a@t+8, a@t+11", "10 seconds", Seq(at("a", T), at("a", T + 8), at("a", T + 11)), Seq(0, 2)),
    ("a@t, a@t-8, a@t-11", "10 seconds", Seq(at("a", T), at("a", T - 8), at("a", T - 11)), Seq(0, 2)),
    ("a@5, a@15, a@16", "10 seconds", Seq(at("a", 5), at("a", 15), at("a", 16)), Seq(0, 2)),
    ("a@15, a@5, a@4", "10 seconds", Seq(at("a", 15), at("a", 5), at("a", 4)), Seq(0, 2)),
    ("interval 0: a@5, a@5, a@6", "0 s", Seq(at("a", 5), at("a", 5), at("a", 6)), Seq(0, 2)),
    ("k@20, k@25, k@11, k@9", "10 seconds", Seq(at("k", 20), at("k", 25), at("k", 11), at("k", 9)), Seq(0, 3)),
    ("k1@10, k2@20, k1@9", "10 seconds", Seq(at("k1", 10), at("k2", 20), at("k1", 9)), Seq(0, 1)),
    ("k1@10, k2@21, k1@9", "10 seconds", Seq(at("k1", 10), at("k2", 21), at("k1", 9)), Seq(0, 1, 2)),
    ("100 ms: k1@150ms, x@200ms, k1@60ms", "100 ms", Seq(at("k1", 0.150), at("x", 0.200), at("k1", 0.060)), Seq(0, 1)),
    ("100 ms: x@200ms, k1@50ms, k1@10ms", "100 ms", Seq(at("x", 0.200), at("k1", 0.050), at("k1", 0.010)), Seq(0, 1, 2))
  )

  private def byKey(interval: String): DataFrame => DataFrame =
    df => KStream(df).deduplicateByKey(interval).df

  // The examples of one interval run in one query per mode, each on an input partition of its own:
  // stream time, state and offsets are per partition, so the examples cannot meet (their timestamps
  // lie within minutes of each other, far inside the 10 minutes an idle partition's state is kept
  // for the watermark), and a mode costs one query per interval instead of one per example. Values
  // are v<index within the example>; the output is compared example by example.
  private val byInterval: Seq[(String, Seq[(String, Seq[Event], Seq[String])])] =
    examples
      .groupBy(_._2)
      .toSeq
      .sortBy(_._1)
      .map { case (interval, group) =>
        interval -> group.zipWithIndex.map { case ((name, _, events, expected), partition) =>
          val placed = events.zipWithIndex.map { case (e, i) => e.copy(partition = partition, value = s"v$i") }
          (name, placed, expected.map(i => s"v$i"))
        }
      }

  for ((interval, group) <- byInterval) {
    val names = group.map(_._1).mkString("; ")
    val want = group.zipWithIndex.map { case ((name, _, values), partition) => partition -> (name, values) }.toMap
    // one micro-batch per step, step k holding the k-th record of each example
    val steps = (0 until group.map(_._2.size).max).map(k => group.flatMap(_._2.lift(k)))
    // every example's half-way point (1 of 3 records, 2 of 4) gets a restart before it
    val halfWay = group.map(_._2.size / 2).toSet

    def check(rows: Seq[org.apache.spark.sql.Row]): Unit = {
      val got = rows
        .groupBy(_.getAs[Int]("partition"))
        .map { case (p, rs) => p -> rs.sortBy(_.getAs[Long]("offset")).map(_.getAs[String]("value")) }
      val differing = want.toSeq.sortBy(_._1).collect {
        case (p, (name, values)) if got.getOrElse(p, Nil) != values =>
          s"\n$name: want $values, got ${got.getOrElse(p, Nil)}"
      }
      assert(differing.isEmpty, differing.mkString)
    }

    test(s"deduplicateByKey, interval $interval, each example on a partition of its own ($names): batch DataFrame") {
      check(byKey(interval)(batch(group.flatMap(_._2))).collect().toSeq)
    }
    test(s"deduplicateByKey, interval $interval ($names): one micro-batch") {
      check(eventRows(Seq(group.flatMap(_._2)), byKey(interval)))
    }
    test(s"deduplicateByKey, interval $interval ($names): one micro-batch per record, restart half-way") {
      check(eventRows(steps, byKey(interval), restartBefore = halfWay))
    }
    test(
      s"deduplicateByKey, interval $interval ($names): spilled to one row per key, one micro-batch per record, restart") {
      spark.conf.set(DedupCaches.MemoryConf, "1k") // an empty in-memory map alone is over 1 KB
      try check(eventRows(steps, byKey(interval), restartBefore = halfWay))
      finally spark.conf.unset(DedupCaches.MemoryConf)
    }
  }

  test("same record delivered again in a later batch (same offset) is forwarded again") {
    val first = Event.at("a", 10, offset = 7, value = "first")
    val again = first.copy(value = "again")
    val realDuplicate = Event.at("a", 10, offset = 8, value = "dup")
    val out = stream(Seq(Seq(first), Seq(again), Seq(realDuplicate)), byKey("10 seconds"))
    assert(out == Seq("first", "again"))
  }

  test("deduplicateByKeyValue keys on (key, id) per partition") {
    val events = Seq(
      at("a", 10, value = "e1"),
      at("a", 11, value = "e2"),
      at("a", 12, value = "e1"),
      at("a", 12, partition = 1, value = "e1"))
    val out = stream(Seq(events), df => KStream(df).deduplicateByKeyValue(col("value"), Duration.ofSeconds(10)).df)
    assert(out == Seq("e1", "e2", "e1"))
  }

  test("deduplicate is global over partitions; stream time stays per partition") {
    // x@95 on partition 1 meets the entry partition 0 stored at 100: |100-95| <= 10 -> dropped.
    val events = Seq(at("x", 100, partition = 0), at("y", 50, partition = 1), at("x", 95, partition = 1))
    val op = (df: DataFrame) => KStream(df).deduplicate(col("key"), Duration.ofSeconds(10)).df
    assert(stream(events.map(Seq(_)), op, restartBefore = Set(2)) == Seq("v0", "v1"))
  }

  test("deduplicate judges a record by its partition's stream time from ids stored elsewhere") {
    // y@100 moves partition 0's stream time to 100 in the first micro-batch; its id is stored in
    // another group than x's. x@15 on partition 0 is then late and x@10 dead for it, so x@15 is
    // forwarded (a store that knew only partition 0's x records would drop it as a duplicate).
    val groupOf = (id: String) =>
      spark.range(1).select(pmod(hash(RowBytes.encode(Seq(lit(id)))), lit(SpreadRecord.Groups))).head().getInt(0)
    val y = (0 until 10).map(i => s"y$i").find(groupOf(_) != groupOf("x")).get
    val batches = Seq(Seq(at("x", 10, partition = 1), at(y, 100, partition = 0)), Seq(at("x", 15, partition = 0)))
    // a watermark an hour behind, so that no sweep removes x@10 between the micro-batches
    val op = (df: DataFrame) =>
      KStream(df.withWatermark("timestamp", "1 hour")).deduplicate(col("key"), Duration.ofSeconds(10)).df
    assert(stream(batches, op) == Seq("v1", "v2", "v0"))
    assert(stream(batches, op, restartBefore = Set(1)) == Seq("v1", "v2", "v0"))
    assert(stream(Seq(batches.flatten), op) == Seq("v1", "v2", "v0"))
  }

  test("a batch dedup over files reads only the columns it is given") {
    // the planner's strategy for files prunes columns by the Projects right above the scan; the
    // arrival-order shuffle's planning must leave that Project to it
    val dir = Files.createTempDirectory("pruned").resolve("in").toString
    batch(Seq(at("a", 1), at("a", 2), at("b", 3))).withColumn("unused", lit("x")).write.parquet(dir)
    val input = spark.read.parquet(dir).drop("unused")
    for (out <- Seq(
        KStream(input).deduplicate(col("key"), "10 seconds").df,
        KStream(input).deduplicateByKey("10 seconds").df)) {
      val scans = out.queryExecution.executedPlan.collect { case s: org.apache.spark.sql.execution.FileSourceScanExec =>
        s
      }
      assert(scans.map(_.requiredSchema.fieldNames.toSeq) == Seq(input.columns.toSeq))
      assert(out.collect().map(_.getAs[String]("key")).sorted.toSeq == Seq("a", "b"))
    }
  }

  test("deduplicate spreads its store over both state partitions") {
    // 200 ids over 2 input partitions; every id seen on both: the second sighting is dropped
    val events = (0 until 200).map(i => at(s"id$i", 100 + i * 0.01, partition = 0)) ++
      (0 until 200).map(i => at(s"id$i", 101 + i * 0.01, partition = 1))
    val input = MemoryStream[Event](Encoders.product[Event], spark)
    val checkpoint = Files.createTempDirectory("spread").toString
    spark.conf.set(DedupCaches.MemoryConf, "1") // spilled at a group's second id: one `entries` row per id
    val query =
      try
        KStream(input.toDF())
          .deduplicate(col("key"), "10 seconds")
          .df
          .writeStream
          .format("noop")
          .option("checkpointLocation", checkpoint)
          .start()
      finally spark.conf.unset(DedupCaches.MemoryConf)
    try {
      input.addData(Event.numbered(events))
      query.processAllAvailable()
      val metrics = query.recentProgress.filter(_.numInputRows > 0).last.observedMetrics.get("kstreams_deduplicate")
      assert(metrics.getAs[Long]("forwarded") == 200L && metrics.getAs[Long]("duplicates_dropped") == 200L)
    } finally query.stop()
    val entriesPerPartition = spark.read
      .format("statestore")
      .option("path", checkpoint)
      .option("stateVarName", "entries")
      .load()
      .groupBy("partition_id")
      .count()
      .collect()
      .map(r => r.getInt(0) -> r.getLong(1))
      .toMap
    assert(entriesPerPartition.keySet == Set(0, 1), entriesPerPartition)
    assert(entriesPerPartition.values.sum == 200L && entriesPerPartition.values.forall(_ >= 50L), entriesPerPartition)
  }

  test("groups are placed round-robin on the state partitions, also after a restart") {
    // Spark's hash of the numbers 0..7 would put input partitions 0, 1, 3, 6, 7 in one task of
    // two; each input partition p, and each id group g of deduplicate, belongs in p mod 2
    val events = (0 until 8).map(p => at(s"k$p", 100, partition = p)) ++
      (0 until 2000).map(i => at(s"id$i", 100, partition = i % 8))
    val input = MemoryStream[Event](Encoders.product[Event], spark)
    val checkpoint = Files.createTempDirectory("placement").toString
    def start() = {
      val ks = KStream(input.toDF())
      ks.deduplicateByKey("10 seconds")
        .df
        .union(ks.deduplicate(col("key"), "10 seconds").df)
        .writeStream
        .format("noop")
        .option("checkpointLocation", checkpoint)
        .start()
    }
    // what Spark's state reader finds in each state partition: the groups (one per input
    // partition) of the per-partition store (operator 0), and the id groups of the global one (1)
    def placed(operator: Int, stateVar: String, column: String): Seq[(Int, Int)] =
      spark.read
        .format("statestore")
        .option("path", checkpoint)
        .option("operatorId", operator.toString)
        .option("stateVarName", stateVar)
        .load()
        .select(col(column), col("partition_id"))
        .distinct()
        .collect()
        .map(r => r.getInt(0) -> r.getInt(1))
        .toSeq
        .sorted
    val byPartition = (0 until 8).map(p => p -> p % 2)
    val batches = Seq(events.take(1000), events.drop(1000))
    batches.zipWithIndex.foreach { case (batch, i) =>
      val query = start()
      try { input.addData(Event.numbered(batch)); query.processAllAvailable() }
      finally query.stop()
      val partitions = placed(0, "chunks", s"key.${HelperColumns.Group}").map { case (key, statePartition) =>
        GroupPlacement.indexOf(key) -> statePartition
      }
      assert(partitions.sorted == byPartition, s"after run ${i + 1}")
      // a new checkpoint's per-partition store is in layout 2: its small values and chunk counts
      // in `chunks` (PerPartitionGroupValues), two variables in all, recorded beside the operator
      val variables = kstreams.internal.inspect.StateVariables.ofOperators(spark, checkpoint).map(o => o._1 -> o._3)
      assert(variables.find(_._1 == 0L).map(_._2.toSet).contains(Set("chunks", "entries")), variables)
      val recorded = new String(Files.readAllBytes(java.nio.file.Paths.get(checkpoint, "kstreams", "operators.json")))
      assert(recorded.replaceAll("\\s", "").contains("\"state_layouts\":[\"2\""), recorded)
      val groups = placed(1, "groups", "key.group")
      assert(groups.size == SpreadRecord.Groups, groups)
      assert(
        groups.forall { case (key, statePartition) =>
          GroupPlacement.indexOf(key) % 2 == statePartition
        },
        groups)
    }
  }

  test("GroupPlacement.keyOf: Spark's hash of a group's key is the group number") {
    val numbers = (-3 to 100) ++ Seq(Int.MaxValue, Int.MinValue, 123456789, -987654321)
    val hashed = spark
      .createDataFrame(numbers.map(n => (n, GroupPlacement.keyOf(n))))
      .toDF("n", "key")
      .select(col("n"), hash(col("key")))
      .collect()
      .map(r => r.getInt(0) -> r.getInt(1))
    assert(hashed.toSeq == numbers.map(n => n -> n))
    assert(numbers.forall(n => GroupPlacement.indexOf(GroupPlacement.keyOf(n)) == n))
    assert(numbers.map(GroupPlacement.keyOf).distinct.size == numbers.size)
  }

  /** A copy of the checkpoint fixture `name`, written by an older kstreams in `writtenIn`. */
  private def fixtureCopy(name: String, writtenIn: String): java.nio.file.Path = {
    val checkpoint = Files.createTempDirectory(name)
    val fixture = java.nio.file.Paths.get(getClass.getResource(s"/checkpoints/$name").toURI)
    java.nio.file.Files.walk(fixture).forEach { from =>
      val to = checkpoint.resolve(fixture.relativize(from).toString)
      if (java.nio.file.Files.isDirectory(from)) java.nio.file.Files.createDirectories(to)
      else java.nio.file.Files.copy(from, to)
    }
    // Spark's operator metadata names its schema file by absolute path: point it at the copy,
    // and drop the Hadoop checksum of the old bytes.
    val operatorMetadata = checkpoint.resolve("state/0/_metadata/v2/0")
    java.nio.file.Files.writeString(
      operatorMetadata,
      java.nio.file.Files
        .readString(operatorMetadata)
        .replace(s"file:$writtenIn", checkpoint.toUri.toString.stripSuffix("/"))
    )
    java.nio.file.Files.deleteIfExists(checkpoint.resolve("state/0/_metadata/v2/.0.crc"))
    checkpoint
  }

  test("a checkpoint of the spread deduplicate from before its in-memory store keeps working") {
    // Written by kstreams 86859ad (ids in RocksDB rows only), deduplicate(key, 10 seconds), two
    // data micro-batches (MemoryStream offsets 0 and 1): id0..id19 at 100.0..101.9 s, then
    // id10..id29 at 103.0..104.9 s (id20..id29 forwarded, at offsets 15..19 of partitions 0, 1).
    val checkpoint = fixtureCopy("deduplicate-spread-ids", "/tmp/global-v2")
    val got = scala.collection.mutable.ArrayBuffer.empty[String]
    val input = MemoryStream[Event](Encoders.product[Event], spark)
    // The checkpoint's offsets 0 and 1 exist before the query starts: a fresh MemoryStream seen
    // at offset 0 would be planned as a batch from the checkpoint's 1 back to 0.
    input.addData(Seq.empty[Event]); input.addData(Seq.empty[Event])
    val query = KStream(input.toDF())
      .deduplicate(col("key"), "10 seconds")
      .df
      .writeStream
      .foreachBatch { (df: DataFrame, _: Long) => got ++= df.collect().map(_.getAs[String]("value")); () }
      .option("checkpointLocation", checkpoint.toString)
      .start()
    val batches = Seq(
      // id20 re-delivered (its offset): forwarded; id5 and id25 meet their stored entries: dropped
      Seq(at("id20", 104.0, 0, 15, "again"), at("id5", 105, 0, 20, "dup5"), at("id30", 106, 0, 21, "new30")),
      Seq(at("id25", 106, 1, 20, "dup25")),
      Seq(at("id31", 200, 0, 30, "far31"), at("id32", 200, 1, 30, "far32")),
      // everything before 190 s is dead by then: id0 and id30 are new again
      Seq(at("id0", 201, 0, 31, "again0"), at("id30", 201, 1, 31, "again30"))
    )
    try {
      batches.foreach { b => input.addData(b); query.processAllAvailable() }
      assert(got.sorted == Seq("again", "again0", "again30", "far31", "far32", "new30"))
    } finally query.stop()
  }

  test("a checkpoint of the single-group deduplicate fails with a message naming the change") {
    // written by kstreams before the spread: two micro-batches of deduplicate(key, 10 seconds)
    val checkpoint = fixtureCopy("deduplicate-one-group", "/tmp/global-v1")
    val input = MemoryStream[Event](Encoders.product[Event], spark)
    // all three offsets exist before the query starts (see the test above): 0 and 1 are done
    (0 until 3).foreach(i => input.addData(Event.numbered(Seq(at("a", 20 + i, offset = 100L + i)))))
    val query = KStream(input.toDF())
      .deduplicate(col("key"), "10 seconds")
      .df
      .writeStream
      .format("noop")
      .option("checkpointLocation", checkpoint.toString)
      .start()
    val e =
      try {
        intercept[Exception](query.processAllAvailable())
      } finally query.stop()
    assert(rootMessages(e).exists(_.contains(GlobalDedupProcessor.OneGroupCheckpoint)), rootMessages(e))
  }

  test("a partition's records are sorted once, in offset order also past 2^32 and near Long.MaxValue") {
    // The sort before the processor has a prefix that packs the group and the offset clamped to
    // [0, 2^32) (ArrivalSortExec): offsets at and past the clamp tie in it and must still come
    // out in offset order, which the processor checks (a record out of
    // order fails the query). Listed out of order, one partition, one key, one timestamp: the
    // record with the lowest offset is the one KIP-655 forwards.
    val twoTo32 = 1L << 32
    val offsets =
      Seq(twoTo32 + 1, twoTo32 - 1, Long.MaxValue - 1, twoTo32, twoTo32 - 2, Long.MaxValue - 2, twoTo32 + 2, 7L)
    // three more partitions, so that a state task holds more than one group: the group is the
    // prefix's high half
    val others = (1 to 3).map(p => at("b", 100, partition = p, offset = twoTo32 - p, value = s"p$p"))
    val events = offsets.map(o => at("a", 100, offset = o, value = s"o$o")) ++ others
    def values(rows: Seq[org.apache.spark.sql.Row]) = rows.map(_.getAs[String]("value")).sorted
    assert(values(byKey("10 seconds")(batch(events)).collect().toSeq) == Seq("o7", "p1", "p2", "p3"))

    val input = MemoryStream[Event](Encoders.product[Event], spark)
    val query = byKey("10 seconds")(input.toDF()).writeStream
      .format("memory")
      .queryName("sorted_once")
      .option("checkpointLocation", Files.createTempDirectory("kstreams-checkpoint").toString)
      .start()
    try {
      input.addData(Event.numbered(events))
      query.processAllAvailable()
      assert(values(spark.table("sorted_once").collect().toSeq) == Seq("o7", "p1", "p2", "p3"))
      // one sort, kstreams' own: it declares the order the stateful operator requires, so Spark
      // plans no sort of its own
      val plan = query.asInstanceOf[StreamingQueryWrapper].streamingQuery.lastExecution.executedPlan
      val sorts = plan.collect { case s: SortExec => s; case s: ArrivalSortExec => s }
      assert(sorts.map(_.nodeName) == Seq("ArrivalSort"), plan)
    } finally query.stop()
  }

  test("per-partition stream time: a far-ahead partition does not make another's records late") {
    val events = Seq(at("a", 100, partition = 0), at("b", 10, partition = 1), at("b", 5, partition = 1))
    assert(stream(Seq(events), byKey("10 seconds")) == Seq("v0", "v1"))
  }

  test("null keys are forwarded and never stored") {
    val events = Seq(at(null, 1), at(null, 1), at("a", 2), at("a", 3))
    assert(stream(Seq(events), byKey("10 seconds")) == Seq("v0", "v1", "v2"))
  }

  test("state is evicted once stream time passes ts + interval (bounded state)") {
    // 60 distinct keys, one per second, 10 per micro-batch (two 5-second buckets), interval 5 s:
    // without eviction the store would gain a chunk and its count for each bucket, 4 rows a
    // micro-batch; with it, the buckets before the last few seconds go as new ones come, and the
    // store stays the size it has after the second micro-batch.
    val events = Event.numbered((0 until 60).map(i => at(s"k$i", i.toDouble)))
    val stateRows = stateRowsPerBatch(events.grouped(10).toSeq)
    assert(stateRows.last < 20, s"state rows after each batch: $stateRows")
    assert(stateRows.drop(1).distinct == Seq(stateRows(1)), s"state rows after each batch: $stateRows")
  }

  /** State rows after each micro-batch of `batches` through deduplicateByKey("5 seconds"). */
  private def stateRowsPerBatch(batches: Seq[Seq[Event]]): Vector[Long] = {
    val input = MemoryStream[Event](Encoders.product[Event], spark)
    val query = KStream(input.toDF())
      .deduplicateByKey("5 seconds")
      .df
      .writeStream
      .format("noop")
      .option("checkpointLocation", Files.createTempDirectory("idle").toString)
      .start()
    try {
      batches.map { b =>
        input.addData(b)
        query.processAllAvailable()
        query.lastProgress.stateOperators.head.numRowsTotal
      }.toVector
    } finally query.stop()
  }

  test("an idle partition's entries are swept by the watermark within max(interval, 10 min)") {
    // Partition 0 moves on by 200 s a micro-batch and drops its dead buckets itself; partition 1
    // gets one record and goes idle (at once: spark.kstreams.partitionIdleTimeout 0 s). Its entry
    // (a chunk and its count) must go once the watermark is 10 minutes past it: compare with the
    // same run without partition 1's record. (A partition that delivered within the idle time is
    // not swept by the watermark: PartitionClockSpec.)
    val busy = (0 to 7).map(i => Seq(at(s"k$i", i * 200.0, offset = i + 1, value = s"v$i")))
    spark.conf.set("spark.kstreams.partitionIdleTimeout", "0 seconds")
    val (withIdle, without) =
      try
        (
          stateRowsPerBatch(Seq(at("idle", 0, partition = 1, offset = 0, value = "i")) +: busy),
          stateRowsPerBatch(Seq(at("other", 0, offset = 0, value = "o")) +: busy))
      finally spark.conf.unset("spark.kstreams.partitionIdleTimeout")
    val runs = s"state rows with an idle partition: $withIdle, without: $without"
    // until the watermark is 10 minutes past it, partition 1 holds its chunk, its chunk count and
    // its values (stream time, sweep timer, time of its last record: one row in layout 2,
    // PerPartitionGroupValues) (micro-batch 3: partition 0 at 400 s, the watermark short of 600 s)
    assert(withIdle(3) >= without(3) + 3, runs)
    // swept: only its values are left
    assert(withIdle.last == without.last + 1, runs)
  }

  test("output schema is the input's, nullability included (non-null partition and offset)") {
    val df = batch(Seq(at("a", 1), at("a", 2)))
    assert(!df.schema("partition").nullable)
    assert(KStream(df).deduplicateByKey("1 s").df.schema == df.schema)
  }

  test("errors name what is wrong") {
    val df = batch(Seq(at("a", 1)))
    val missing = intercept[KStreamsException](
      KStream(df, StreamColumns(key = "user"))
        .deduplicateByKey("1 s"))
    assert(missing.getMessage.contains("no key column 'user'"))
    assert(missing.getMessage.contains("available columns: key, value, timestamp, partition, offset"))
    val badId = intercept[KStreamsException](KStream(df).deduplicate(col("nope"), "1 s"))
    assert(badId.getMessage.contains("does not resolve on this DataFrame"))
    val noRocks = spark.newSession()
    noRocks.conf.set(
      SparkSessionChecks.ProviderKey,
      "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider")
    val otherDf = noRocks.createDataFrame(Event.numbered(Seq(at("a", 1))))
    val e = intercept[KStreamsException](KStream(otherDf).deduplicateByKey("1 s"))
    assert(e.getMessage.contains(s"Set ${SparkSessionChecks.ProviderKey}=${SparkSessionChecks.RocksDBProvider}"))
  }

  test("a null timestamp fails the query naming column, partition and offset") {
    val events = Seq(at("a", 1), Event("a", null, null, 2, 5L))
    val e = intercept[Exception](stream(Seq(events), byKey("1 s")))
    // a KStreamsException in the cause chain, as every error the library raises on purpose, so a
    // JVM user's catch and the Python layer find the library's own message in Spark's wrapping
    val ours = Iterator.iterate(e: Throwable)(_.getCause).takeWhile(_ != null).collectFirst {
      case k: KStreamsException => k.getMessage
    }
    assert(
      ours.contains("null timestamp in column 'timestamp' at partition 2, offset 5; fix the producer, or pass " +
        "on_null_timestamp='skip' (Scala: NullTimestamps.Skip) to skip and count such records"))
  }

  test("skip policy drops null timestamps and counts them") {
    val df = batch(Seq(at("a", 1))).union(batch(Seq(Event("b", "x", null, 0, 9L))))
    val out = KStream(df, StreamColumns(onNullTimestamp = NullTimestamps.Skip)).deduplicateByKey("1 s").df
    assert(out.collect().map(_.getAs[String]("key")).toSeq == Seq("a"))
  }

  private def rootMessages(e: Throwable): Seq[String] =
    Iterator.iterate(e)(_.getCause).takeWhile(_ != null).map(t => String.valueOf(t.getMessage)).toSeq
}
