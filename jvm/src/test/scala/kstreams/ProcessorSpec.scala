package kstreams

import java.nio.file.Files
import java.sql.Timestamp
import java.time.Duration

import scala.collection.mutable

import kstreams.processor._
import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.execution.streaming.runtime.MemoryStream

/** A record with a numeric value, for processors that sum. */
final case class Num(key: String, value: Long, timestamp: Timestamp, partition: Int, offset: Long)

object ProcessorSpec {

  /** 2026-01-01T00:00:00Z in ms: a multiple of every punctuation interval used here. */
  val Base = 1767225600000L

  def num(key: String, value: Long, seconds: Double, partition: Int, offset: Long): Num =
    Num(key, value, new Timestamp(Base + math.round(seconds * 1000)), partition, offset)

  /** The processors of `tests/cases/processor_cases.json`, as it describes them. */
  final class Tracer extends Processor[String, Long] {
    private var ctx: ProcessorContext[String, Long] = _
    private var counter: KeyValueStore[String, Long] = _
    override def init(context: ProcessorContext[String, Long]): Unit = {
      ctx = context
      counter = context.getStateStore[String, Long]("counter")
      context.schedule(Duration.ofSeconds(10), PunctuationType.StreamTime)
      context.schedule(Duration.ofSeconds(20), PunctuationType.StreamTime, (t: Long) => emit("p20", t))
    }
    private def emit(kind: String, t: Long): Unit = {
      val n = counter.get("n").getOrElse(0L) + 1
      counter.put("n", n)
      ctx.forward(s"$kind@${t - Base}", n)
    }
    override def process(record: Record[String, Long]): Unit = emit("record", record.timestamp)
    override def punctuate(timestamp: Long): Unit = emit("p10", timestamp)
  }

  /** Sums per key in a store, all sums forwarded on each punctuation (spec section 7's example). */
  final class Sum extends Processor[String, Long] {
    private var ctx: ProcessorContext[String, Long] = _
    private var sums: KeyValueStore[String, Long] = _
    override def init(context: ProcessorContext[String, Long]): Unit = {
      ctx = context
      sums = context.getStateStore[String, Long]("sums")
      context.schedule(Duration.ofSeconds(10), PunctuationType.StreamTime)
    }
    override def process(record: Record[String, Long]): Unit =
      sums.put(record.key, sums.get(record.key).getOrElse(0L) + record.value)
    override def punctuate(timestamp: Long): Unit =
      sums.all().toSeq.sortBy(_._1).foreach { case (k, v) => ctx.forward(k, v, timestamp) }
  }

  /** One case of `tests/cases/processor_cases.json`. */
  final case class SharedCase(
      name: String,
      processor: String,
      batch: Boolean,
      split: Seq[Int],
      records: Seq[Num],
      expected: Seq[(Int, Long, String, Long)])

  /** One topology case: a source per entry, all feeding one processor. */
  final case class SharedTopologyCase(
      name: String,
      processor: String,
      sources: Seq[(String, Seq[Num])],
      expected: Seq[(Int, Long, String, Long)])

  private lazy val casesFile = new com.fasterxml.jackson.databind.ObjectMapper()
    .readTree(getClass.getResourceAsStream("/processor_cases.json"))

  import scala.jdk.CollectionConverters._
  private def list(node: com.fasterxml.jackson.databind.JsonNode) = node.elements().asScala.toSeq

  /** [key, value, seconds, partition] rows, offsets numbered per partition in list order. */
  private def records(node: com.fasterxml.jackson.databind.JsonNode): Seq[Num] = {
    val offsets = mutable.Map.empty[Int, Long].withDefaultValue(0L)
    list(node).map { r =>
      val partition = r.get(3).asInt()
      val offset = offsets(partition)
      offsets(partition) = offset + 1
      num(r.get(0).asText(), r.get(1).asLong(), r.get(2).asDouble(), partition, offset)
    }
  }

  private def expectedRows(node: com.fasterxml.jackson.databind.JsonNode) =
    list(node).map(e => (e.get(0).asInt(), e.get(1).asLong(), e.get(2).asText(), e.get(3).asLong()))

  lazy val sharedCases: Seq[SharedCase] = list(casesFile.get("cases")).map { c =>
    SharedCase(
      c.get("name").asText(),
      c.get("processor").asText(),
      c.get("batch").asBoolean(),
      list(c.get("split")).map(_.asInt()),
      records(c.get("records")),
      expectedRows(c.get("expected"))
    )
  }

  lazy val sharedTopologyCases: Seq[SharedTopologyCase] = list(casesFile.get("topology_cases")).map { c =>
    SharedTopologyCase(
      c.get("name").asText(),
      c.get("processor").asText(),
      c.get("sources").fields().asScala.toSeq.map(e => e.getKey -> records(e.getValue)),
      expectedRows(c.get("expected"))
    )
  }

  final class Exploder extends Processor[String, Long] {
    override def process(record: Record[String, Long]): Unit =
      if (record.value == 13L) throw new IllegalStateException("unlucky value")
  }

  /** `deduplicateByKey` written as a user processor: the spec's rule (section 2) over a store of
    * key -> (timestamp ms, offset) of the record forwarded. */
  final class DedupByKey(intervalMs: Long) extends Processor[String, String] {
    private var ctx: ProcessorContext[String, String] = _
    private var seen: KeyValueStore[String, (Long, Long)] = _
    override def init(context: ProcessorContext[String, String]): Unit = {
      ctx = context
      seen = context.getStateStore[String, (Long, Long)]("seen")
    }
    override def process(r: Record[String, String]): Unit = {
      if (r.key == null) return ctx.forward(r.key, r.value) // null key: forward, store nothing
      val liveFrom = ctx.streamTime - intervalMs
      val entry = seen.get(r.key)
      val live = entry.exists(_._1 >= liveFrom)
      if (live && math.abs(entry.get._1 - r.timestamp) <= intervalMs) {
        // a duplicate; the same record delivered again (same offset) is forwarded again
        if (entry.get._2 == r.offset) ctx.forward(r.key, r.value)
        return
      }
      if (r.timestamp >= liveFrom) seen.put(r.key, (r.timestamp, r.offset))
      else if (entry.isDefined) seen.delete(r.key) // late: never stored; a dead entry goes
      ctx.forward(r.key, r.value)
    }
  }

  /** Forwards ("record", offset) per record and ("tick", processing time) per wall-clock
    * punctuation every 3 s. */
  final class WallTicker extends Processor[String, Long] {
    private var ctx: ProcessorContext[String, Long] = _
    override def init(context: ProcessorContext[String, Long]): Unit = {
      ctx = context
      context.schedule(Duration.ofSeconds(3), PunctuationType.WallClockTime)
    }
    override def process(record: Record[String, Long]): Unit = ctx.forward("record", record.offset)
    override def punctuate(timestamp: Long): Unit = ctx.forward("tick", timestamp)
  }

  /** Forwards each record with its value times 100 (a second processor in a topology). */
  final class Scale extends Processor[String, Long] {
    private var ctx: ProcessorContext[String, Long] = _
    override def init(context: ProcessorContext[String, Long]): Unit = ctx = context
    override def process(r: Record[String, Long]): Unit = ctx.forward(r.key, r.value * 100)
  }

  val dedupStore: StoreSpec =
    Stores.keyValue("seen", Encoders.STRING, Encoders.tuple(Encoders.scalaLong, Encoders.scalaLong))

  /** Schedules `interval` in `init`, or 1 s on each record when `interval` is null. */
  final class ScheduleEvery(interval: Duration) extends Processor[String, Long] {
    private var ctx: ProcessorContext[String, Long] = _
    override def init(context: ProcessorContext[String, Long]): Unit = {
      ctx = context
      if (interval != null) context.schedule(interval, PunctuationType.StreamTime)
    }
    override def process(record: Record[String, Long]): Unit =
      ctx.schedule(Duration.ofSeconds(1), PunctuationType.StreamTime)
  }
}

/** The Processor API (spec section 7) through Scala, on a real Spark session and RocksDB state. */
class ProcessorSpec extends SparkSuite {
  import ProcessorSpec._

  /** Runs `op` over [[Num]] micro-batches (restarting before the indices in `restartBefore`) and
    * returns the output rows as (key, value, timestamp - Base ms, partition) in output order. */
  private def runNums(
      batches: Seq[Seq[Num]],
      op: DataFrame => DataFrame,
      restartBefore: Set[Int] = Set.empty): Seq[(String, Long, Long, Int)] = {
    streamRows(batches, Encoders.product[Num], op, restartBefore).map(r =>
      (
        r.getAs[String]("key"),
        r.getAs[Long]("value"),
        r.getAs[Timestamp]("timestamp").getTime - Base,
        r.getAs[Int]("partition")))
  }

  private def sharedOp(processor: String): DataFrame => DataFrame = processor match {
    case "tracer" => df => KStream(df).process(() => new Tracer, Seq(Stores.keyValue("counter"))).df
    case "sum" => df => KStream(df).process(() => new Sum, Seq(Stores.keyValue("sums"))).df
  }
  private def sorted(rows: Seq[(String, Long, Long, Int)]) =
    rows.map { case (k, v, t, p) => (p, t, k, v) }.sortBy(r => (r._1, r._2, r._3, r._4))

  sharedCases.foreach { c =>
    val op = sharedOp(c.processor)
    if (c.batch) test(s"shared case '${c.name}': batch DataFrame") {
      val out = op(spark.createDataFrame(c.records))
        .collect()
        .toSeq
        .map(r =>
          (
            r.getAs[String]("key"),
            r.getAs[Long]("value"),
            r.getAs[Timestamp]("timestamp").getTime - Base,
            r.getAs[Int]("partition")))
      assert(sorted(out) == c.expected)
    }
    test(s"shared case '${c.name}': one micro-batch") {
      assert(sorted(runNums(Seq(c.records), op)) == c.expected)
    }
    test(s"shared case '${c.name}': split ${c.split.mkString("+")}, a restart before each later batch") {
      val bounds = c.split.scanLeft(0)(_ + _)
      val batches = bounds.zip(bounds.tail).map { case (a, b) => c.records.slice(a, b) }
      assert(sorted(runNums(batches, op, restartBefore = batches.indices.tail.toSet)) == c.expected)
    }
  }

  sharedTopologyCases.foreach { c =>
    test(s"shared topology case '${c.name}'") {
      val collected = mutable.ArrayBuffer.empty[Row]
      val inputs = c.sources.map { case (name, rs) =>
        val input = MemoryStream[Num](Encoders.product[Num], spark)
        input.addData(rs)
        name -> input
      }
      val (processor, stores) = c.processor match {
        case "tracer" => ((() => new Tracer): ProcessorSupplier[String, Long], Seq(Stores.keyValue("counter")))
        case "sum" => ((() => new Sum): ProcessorSupplier[String, Long], Seq(Stores.keyValue("sums")))
      }
      val topology = inputs
        .foldLeft(new Topology()) { case (t, (name, input)) => t.addSource(name, input.toDF()) }
        .addProcessor("P", processor, stores, inputs.map(_._1): _*)
        .addSink("K", (batch, _) => collected.synchronized { collected ++= batch.collect() }, "P")
      val queries = topology.start(Files.createTempDirectory("kstreams-topology").toString)
      try queries.foreach(_.processAllAvailable())
      finally queries.foreach(_.stop())
      val out = collected.toSeq.map(r =>
        (
          r.getAs[String]("key"),
          r.getAs[Long]("value"),
          r.getAs[Timestamp]("timestamp").getTime - Base,
          r.getAs[Int]("partition")))
      assert(sorted(out) == c.expected)
    }
  }

  test("punctuation forwards carry the punctuation time, no offset") {
    val traced = sharedCases.find(_.processor == "tracer").get.records
    val out = sharedOp("tracer")(spark.createDataFrame(traced))
    val p20 = out.where("key like 'p20@%'").collect()
    assert(p20.map(_.getAs[Timestamp]("timestamp").getTime - Base).toSeq.sorted == Seq(5000, 25000, 47000))
    assert(p20.forall(_.isNullAt(p20.head.fieldIndex("offset"))))
  }

  test("wall-clock punctuation fires on processing time (a manual trigger clock)") {
    import org.apache.spark.sql.kstreams.{ManualClockQuery, WaitingClock}
    val input = MemoryStream[Num](Encoders.product[Num], spark)
    val clock = new WaitingClock(0L)
    val out = KStream(input.toDF()).process(() => new WallTicker, wallClock = true).df
    input.addData(num("a", 1, 1, 0, 0))
    val (query, sink) =
      ManualClockQuery.start(out, Files.createTempDirectory("kstreams-wall").toString, clock, triggerMs = 1000)
    try {
      // batch at 0 reads the record and registers the schedule: first tick due at 0 + 3 s
      ManualClockQuery.advanceTo(query, clock, 0, 1000)
      ManualClockQuery.advanceTo(query, clock, 3000, 1000)
      input.addData(num("a", 2, 2, 0, 1))
      ManualClockQuery.advanceTo(query, clock, 7500, 1000) // the tick due at 6000 fires late
      ManualClockQuery.advanceTo(query, clock, 9000, 1000) // next one due 6000 + 3 s
    } finally query.stop()
    assert(
      sink.allData.map(r => (r.getAs[String]("key"), r.getAs[Long]("value"))) == Seq(
        "record" -> 0L,
        "tick" -> 3000L,
        "record" -> 1L,
        "tick" -> 7500L,
        "tick" -> 9000L))
  }

  test("a topology chains processors in one task and splits the output among its sinks") {
    val input = MemoryStream[Num](Encoders.product[Num], spark)
    val collected = mutable.Map.empty[String, mutable.ArrayBuffer[Row]]
    def sink(name: String): (DataFrame, Long) => Unit = (batch, _) =>
      collected.synchronized {
        collected.getOrElseUpdate(name, mutable.ArrayBuffer.empty) ++= batch.collect()
      }
    val sumCase = sharedCases.find(_.processor == "sum").get
    val words = sumCase.records
    val topology = new Topology()
      .addSource("SOURCE", input.toDF())
      .addProcessor("SUM", () => new Sum, Seq(Stores.keyValue("sums")), "SOURCE")
      .addProcessor("SCALE", () => new Scale, "SUM")
      .addSink("SCALED", sink("SCALED"), "SCALE")
      .addSink("SUMS", sink("SUMS"), "SUM")
    assert(
      topology.describe() == Seq(
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: SOURCE (DataFrame)",
        "      --> SUM",
        "    Processor: SUM (stores: [sums])",
        "      --> SCALE, SUMS",
        "      <-- SOURCE",
        "    Processor: SCALE (stores: [])",
        "      --> SCALED",
        "      <-- SUM",
        "    Sink: SCALED (target: function)",
        "      <-- SCALE",
        "    Sink: SUMS (target: function)",
        "      <-- SUM"
      ).mkString("\n"))
    val queries = topology.start(Files.createTempDirectory("kstreams-topology").toString)
    try {
      Seq(words.take(3), words.drop(3)).foreach { b =>
        input.addData(b)
        queries.foreach(_.processAllAvailable())
      }
    } finally queries.foreach(_.stop())
    def rows(name: String) = sorted(
      collected(name).toSeq.map(r =>
        (
          r.getAs[String]("key"),
          r.getAs[Long]("value"),
          r.getAs[Timestamp]("timestamp").getTime - Base,
          r.getAs[Int]("partition"))))
    assert(rows("SUMS") == sumCase.expected)
    assert(rows("SCALED") == sumCase.expected.map(r => r.copy(_4 = r._4 * 100)))
  }

  test("a processor that throws fails the query naming the processor, partition and offset") {
    val events = Seq(num("a", 1, 1, 1, 0), num("a", 2, 2, 1, 1), num("a", 13, 3, 1, 2))
    val e =
      intercept[Exception](runNums(Seq(events), df => KStream(df).process(() => new Exploder, name = "exploder").df))
    val messages = Iterator
      .iterate[Throwable](e)(_.getCause)
      .takeWhile(_ != null)
      .map(t => String.valueOf(t.getMessage))
      .toSeq
    assert(
      messages.exists(
        _.contains("processor 'exploder' failed processing the record at " +
          "partition 1, offset 2: java.lang.IllegalStateException: unlucky value")),
      messages.mkString("\n")
    )
  }

  test("usage errors name what is wrong") {
    val df = spark.createDataFrame(sharedCases.head.records)
    val noStore = intercept[Exception](KStream(df).process(() => new Sum).df.collect())
    assert(
      Iterator
        .iterate[Throwable](noStore)(_.getCause)
        .takeWhile(_ != null)
        .exists(t =>
          String
            .valueOf(t.getMessage)
            .contains("processor 'Sum' asked for store 'sums', which was " +
              "not declared")))
    val wall = intercept[KStreamsException](KStream(df).process(() => new Sum, wallClock = true))
    assert(wall.getMessage.contains("need a streaming DataFrame"))
    val twice = intercept[KStreamsException](
      KStream(df).process(() => new Sum, stores = Seq(Stores.keyValue("s"), Stores.keyValue("s"))))
    assert(twice.getMessage.contains("declared more than once: s"))
    def failure(processor: ProcessorSupplier[String, Long]): String = {
      val e = intercept[Exception](KStream(df).process(processor, name = "bad").df.collect())
      Iterator.iterate[Throwable](e)(_.getCause).takeWhile(_ != null).map(t => String.valueOf(t.getMessage)).mkString
    }
    assert(
      failure(() => new ScheduleEvery(null))
        .contains("processor 'bad' called schedule outside init; register schedules in init"))
    assert(
      failure(() => new ScheduleEvery(Duration.ZERO))
        .contains("processor 'bad': punctuation interval must be at least 1 ms, got PT0S"))
    assert(
      failure(() => new ScheduleEvery(Duration.ofSeconds(-1))).contains("interval must not be negative, got PT-1S"))
  }

  // deduplicateByKey re-implemented as a processor agrees with the built-in on the spec examples.
  import Event.at
  private val T = 100.0
  private val dedupExamples: Seq[(String, Long, Seq[Event])] = Seq(
    ("a@t, a@t+8, a@t+11", 10000, Seq(at("a", T), at("a", T + 8), at("a", T + 11))),
    ("a@t, a@t-8, a@t-11", 10000, Seq(at("a", T), at("a", T - 8), at("a", T - 11))),
    ("a@5, a@15, a@16", 10000, Seq(at("a", 5), at("a", 15), at("a", 16))),
    ("a@15, a@5, a@4", 10000, Seq(at("a", 15), at("a", 5), at("a", 4))),
    ("interval 0: a@5, a@5, a@6", 0, Seq(at("a", 5), at("a", 5), at("a", 6))),
    ("k@20, k@25, k@11, k@9", 10000, Seq(at("k", 20), at("k", 25), at("k", 11), at("k", 9))),
    ("k1@10, k2@20, k1@9", 10000, Seq(at("k1", 10), at("k2", 20), at("k1", 9))),
    ("k1@10, k2@21, k1@9", 10000, Seq(at("k1", 10), at("k2", 21), at("k1", 9))),
    ("100 ms: k1@150ms, x@200ms, k1@60ms", 100, Seq(at("k1", 0.150), at("x", 0.200), at("k1", 0.060))),
    ("100 ms: x@200ms, k1@50ms, k1@10ms", 100, Seq(at("x", 0.200), at("k1", 0.050), at("k1", 0.010))),
    (
      "null keys, two partitions",
      10000,
      Seq(at(null, 1), at(null, 1), at("a", 2, partition = 1), at("a", 3, partition = 1), at("a", 4)))
  )

  // Every example in one micro-batch and through a restart from the checkpoint half-way: the
  // out-of-order ones one record per micro-batch, the others in two micro-batches (the built-in
  // operator's own spec runs all modes for all of them).
  private val recordPerBatch = Set(1, 3, 5, 10)
  for (((name, intervalMs, events), i) <- dedupExamples.zipWithIndex) {
    test(s"deduplicateByKey as a user processor agrees with the built-in, also restarted: $name") {
      val builtIn = stream(Seq(events), df => KStream(df).deduplicateByKey(s"$intervalMs ms").df)
      val user = (df: DataFrame) =>
        KStream(df).process(() => new DedupByKey(intervalMs), stores = Seq(dedupStore), name = "dedup").df
      assert(stream(Seq(events), user) == builtIn)
      val half = events.size / 2
      val restarted =
        if (recordPerBatch(i)) stream(events.map(Seq(_)), user, restartBefore = Set(half))
        else stream(Seq(events.take(half), events.drop(half)), user, restartBefore = Set(1))
      assert(restarted == builtIn)
    }
  }

  test("the same record delivered again (same offset) is forwarded again by both") {
    val first = Event.at("a", 10, offset = 7, value = "first")
    val batches = Seq(Seq(first), Seq(first.copy(value = "again")), Seq(Event.at("a", 10, offset = 8, value = "dup")))
    val user = (df: DataFrame) => KStream(df).process(() => new DedupByKey(10000), stores = Seq(dedupStore)).df
    assert(stream(batches, user) == Seq("first", "again"))
    assert(stream(batches, df => KStream(df).deduplicateByKey("10 s").df) == Seq("first", "again"))
  }
}
