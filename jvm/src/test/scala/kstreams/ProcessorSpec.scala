package kstreams

import java.nio.file.Files
import java.sql.Timestamp
import java.time.Duration

import scala.collection.mutable

import kstreams.processor._
import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.execution.streaming.runtime.MemoryStream
import org.apache.spark.sql.functions.{col, concat, lit}

/** A record with a numeric value, for processors that sum. */
final case class Num(key: String, value: Long, timestamp: Timestamp, partition: Int, offset: Long)

object ProcessorSpec {

  /** 2026-01-01T00:00:00Z in ms: a multiple of every punctuation interval used here. */
  val Base = 1767225600000L

  def num(key: String, value: Long, seconds: Double, partition: Int, offset: Long): Num =
    Num(key, value, new Timestamp(Base + math.round(seconds * 1000)), partition, offset)

  /** The store's counter "n" plus one, stored: the order of a processor's forwards. */
  private def nextCount(counter: KeyValueStore[String, Long]): Long = {
    val n = counter.get("n").getOrElse(0L) + 1
    counter.put("n", n)
    n
  }

  /** The processors of `tests/cases/processor_cases.json`, as they describe them. */
  final class Tracer extends Processor[String, Long] {
    private var ctx: ProcessorContext[String, Long] = _
    private var counter: KeyValueStore[String, Long] = _
    override def init(context: ProcessorContext[String, Long]): Unit = {
      ctx = context
      counter = context.getStateStore[String, Long]("counter")
      context.schedule(Duration.ofSeconds(10), PunctuationType.StreamTime)
      context.schedule(Duration.ofSeconds(20), PunctuationType.StreamTime, (t: Long) => emit("p20", t))
    }
    private def emit(kind: String, t: Long): Unit = ctx.forward(s"$kind@${t - Base}", nextCount(counter))
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

  /** Forwards each record's key with its place in the order the records reached the processor. */
  final class Echo extends Processor[String, Long] {
    private var ctx: ProcessorContext[String, Long] = _
    private var counter: KeyValueStore[String, Long] = _
    override def init(context: ProcessorContext[String, Long]): Unit = {
      ctx = context
      counter = context.getStateStore[String, Long]("counter")
    }
    override def process(record: Record[String, Long]): Unit = ctx.forward(record.key, nextCount(counter))
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

  /** One error case: the query over `records` fails with `message` + `advice`. */
  final case class SharedErrorCase(
      name: String,
      processor: String,
      intervalMicros: Option[Long],
      records: Seq[Num],
      message: String,
      advice: String)

  lazy val sharedErrorCases: Seq[SharedErrorCase] = list(casesFile.get("error_cases")).map { c =>
    SharedErrorCase(
      c.get("name").asText(),
      c.get("processor").asText(),
      Option(c.get("interval_micros")).map(_.asLong()),
      records(c.get("records")),
      c.get("message").asText(),
      Option(c.get("advice")).map(_.get("scala").asText()).getOrElse("")
    )
  }

  /** The context case: the probe's records (string values), its runs (split, restarts, what close
    * saw) and the rows it forwards, (partition, offset, ms, key, value). */
  final case class ContextRun(name: String, split: Seq[Int], restartBefore: Set[Int], closes: Seq[String])
  lazy val contextCase: (Seq[Event], Seq[ContextRun], Seq[(Int, Option[Long], Long, String, String)]) = {
    val c = casesFile.get("context_case")
    val events = list(c.get("records")).map(r =>
      Event.at(r.get(0).asText(), r.get(2).asDouble(), r.get(3).asInt(), value = r.get(1).asText()))
    val runs = c.get("runs").properties().asScala.toSeq.map { e =>
      ContextRun(
        e.getKey,
        list(e.getValue.get("split")).map(_.asInt()),
        list(e.getValue.get("restart_before")).map(_.asInt()).toSet,
        list(e.getValue.get("closes")).map(_.asText())
      )
    }
    val expected = list(c.get("expected")).map(e =>
      (
        e.get(0).asInt(),
        Option(e.get(1)).filterNot(_.isNull).map(_.asLong()),
        e.get(2).asLong(),
        e.get(3).asText(),
        e.get(4).asText()))
    (events, runs, expected)
  }

  lazy val sharedTopologyCases: Seq[SharedTopologyCase] = list(casesFile.get("topology_cases")).map { c =>
    SharedTopologyCase(
      c.get("name").asText(),
      c.get("processor").asText(),
      c.get("sources").properties().asScala.toSeq.map(e => e.getKey -> records(e.getValue)),
      expectedRows(c.get("expected"))
    )
  }

  final class Exploder extends Processor[String, Long] {
    override def process(record: Record[String, Long]): Unit =
      if (record.value == 13L) throw new IllegalStateException("unlucky value")
  }

  final class ForwardsInClose extends Processor[String, Long] {
    private var ctx: ProcessorContext[String, Long] = _
    override def init(context: ProcessorContext[String, Long]): Unit = ctx = context
    override def process(record: Record[String, Long]): Unit = ()
    override def close(): Unit = ctx.forward("bye", 0L)
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
      else if (entry.isDefined && !live) seen.delete(r.key) // late: never stored; a dead entry goes, a live one stays
      ctx.forward(r.key, r.value)
    }
  }

  /** What [[Probe]]s' `close` wrote: "<run> p<partition> inits=.. offsets=[..] punctuations=[..]".
    * (Processors run in this JVM: local master.) */
  val closes = new java.util.concurrent.ConcurrentLinkedQueue[String]()

  /** The probe of `tests/cases/processor_cases.json`: what a processor sees, and when it is closed.
    * `close` adds "<run> " and what it saw to [[closes]] (a store is out of reach there: no current
    * key). */
  final class Probe(run: String) extends Processor[String, String] {
    private var ctx: ProcessorContext[String, String] = _
    private var kv: KeyValueStore[String, String] = _
    private var seq: KeyValueStore[String, Long] = _
    private var inits = 0
    private val offsets = mutable.ArrayBuffer.empty[Long]
    private val punctuations = mutable.ArrayBuffer.empty[Long]
    override def init(context: ProcessorContext[String, String]): Unit = {
      inits += 1
      ctx = context
      kv = context.getStateStore[String, String]("kv")
      seq = context.getStateStore[String, Long]("seq")
      context.schedule(Duration.ofSeconds(10), PunctuationType.StreamTime)
    }
    private def emit(key: String, tail: Any*): Unit = {
      val n = seq.get("n").getOrElse(0L) + 1
      seq.put("n", n)
      val topic = Option(ctx.topic).getOrElse("-")
      val fields = Seq(n, ctx.processorName, topic, ctx.partition, ctx.offset, ctx.timestamp - Event.Base) ++ tail
      ctx.forward(key, fields.mkString("|"))
    }
    override def process(r: Record[String, String]): Unit = {
      offsets += r.offset
      val was = kv.putIfAbsent(r.key, r.value)
      emit(r.key, was.getOrElse("-"), kv.range("b", "d").map { case (k, v) => s"$k=$v" }.mkString(","))
    }
    override def punctuate(timestamp: Long): Unit = {
      punctuations += timestamp - Event.Base
      emit("punctuate", timestamp - Event.Base, ctx.streamTime - Event.Base)
    }
    override def close(): Unit = closes.add(
      s"$run p${ctx.partition} inits=$inits offsets=${offsets.mkString("[", ", ", "]")} " +
        s"punctuations=${punctuations.mkString("[", ", ", "]")}")
  }

  /** Spec examples packed into one query: example i's partition p becomes i * Stride + p. */
  val Stride = 16

  /** [[DedupByKey]] with the interval of the example its partition holds. */
  final class PackedDedup(intervalsMs: Seq[Long]) extends Processor[String, String] {
    private var dedup: DedupByKey = _
    override def init(context: ProcessorContext[String, String]): Unit = {
      dedup = new DedupByKey(intervalsMs(context.partition / Stride))
      dedup.init(context)
    }
    override def process(r: Record[String, String]): Unit = dedup.process(r)
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

  /** Schedules `interval` of `kind` in `init`, or 1 s of stream time on each record when `interval` is null. */
  final class ScheduleEvery(interval: Duration, kind: PunctuationType = PunctuationType.StreamTime)
      extends Processor[String, Long] {
    private var ctx: ProcessorContext[String, Long] = _
    override def init(context: ProcessorContext[String, Long]): Unit = {
      ctx = context
      if (interval != null) context.schedule(interval, kind)
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
        case "echo" => ((() => new Echo): ProcessorSupplier[String, Long], Seq(Stores.keyValue("counter")))
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

  {
    val (probeEvents, runs, expected) = contextCase
    runs.foreach { run =>
      test(s"shared context case (context, putIfAbsent, range, close): ${run.name}") {
        val bounds = run.split.scanLeft(0)(_ + _)
        val batches = bounds.zip(bounds.tail).map { case (a, b) => probeEvents.slice(a, b) }
        val op = (df: DataFrame) =>
          KStream(df.withColumn("topic", concat(lit("topic-"), col("partition").cast("string"))))
            .process(
              () => new Probe(run.name),
              stores = Seq(Stores.keyValue("kv", Encoders.STRING, Encoders.STRING), Stores.keyValue("seq")),
              name = "probe")
            .df
        val got = eventRows(batches, op, run.restartBefore)
          .map(r =>
            (
              r.getAs[Int]("partition"),
              if (r.isNullAt(r.fieldIndex("offset"))) None else Some(r.getAs[Long]("offset")),
              r.getAs[Timestamp]("timestamp").getTime - Event.Base,
              r.getAs[String]("key"),
              r.getAs[String]("value")))
          .sortBy(r => (r._1, r._5.split('|').head.toInt)) // each partition in forward order
        assert(got == expected)
        import scala.jdk.CollectionConverters._
        val prefix = run.name + " "
        val closed = closes.asScala.toSeq.filter(_.startsWith(prefix)).map(_.stripPrefix(prefix))
        assert(closed.sorted == run.closes.sorted)
      }
    }
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

  /** The error cases' processors, as `tests/cases/processor_cases.json` describes them, with the
    * interval as this runtime prints it. */
  private def errorCaseProcessor(c: SharedErrorCase): (ProcessorSupplier[String, Long], String) =
    c.processor match {
      case "exploder" => (() => new Exploder, "")
      case "forwards_in_close" => (() => new ForwardsInClose, "")
      case "schedules_in_process" => (() => new ScheduleEvery(null), "")
      case "schedules_every" =>
        val interval = Duration.ofNanos(c.intervalMicros.get * 1000)
        (() => new ScheduleEvery(interval), interval.toString)
      case "schedules_wall_clock" => (() => new ScheduleEvery(Duration.ofSeconds(1), PunctuationType.WallClockTime), "")
      case "sum_without_store" => (() => new Sum, "")
    }

  sharedErrorCases.foreach { c =>
    test(s"shared error case '${c.name}'") {
      val (processor, interval) = errorCaseProcessor(c)
      val e = intercept[Exception](runNums(Seq(c.records), df => KStream(df).process(processor, name = "bad").df))
      val want = c.message.replace("{exception}", "java.lang.IllegalStateException").replace("{interval}", interval) +
        c.advice
      val messages = Iterator.iterate[Throwable](e)(_.getCause).takeWhile(_ != null).map(_.getMessage).toSeq
      // Spark wraps the failure in its own exceptions; ours is the one whose message is exactly the rule's
      assert(messages.contains(want), messages.mkString("\n"))
    }
  }

  test("usage errors name what is wrong") {
    val df = spark.createDataFrame(sharedCases.head.records)
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
      failure(() => new ScheduleEvery(Duration.ofSeconds(-1))).contains("interval must not be negative, got PT-1S"))
  }

  // deduplicateByKey re-implemented as a processor forwards the spec's rows (section 2): the
  // indices of the records forwarded, in (partition, offset) order.
  import Event.at
  private val T = 100.0
  private val dedupExamples: Seq[(String, Long, Seq[Event], Seq[Int])] = Seq(
    ("a@t, a@t+8, a@t+11", 10000, Seq(at("a", T), at("a", T + 8), at("a", T + 11)), Seq(0, 2)),
    ("a@t, a@t-8, a@t-11", 10000, Seq(at("a", T), at("a", T - 8), at("a", T - 11)), Seq(0, 2)),
    ("a@5, a@15, a@16", 10000, Seq(at("a", 5), at("a", 15), at("a", 16)), Seq(0, 2)),
    ("a@15, a@5, a@4", 10000, Seq(at("a", 15), at("a", 5), at("a", 4)), Seq(0, 2)),
    ("interval 0: a@5, a@5, a@6", 0, Seq(at("a", 5), at("a", 5), at("a", 6)), Seq(0, 2)),
    ("k@20, k@25, k@11, k@9", 10000, Seq(at("k", 20), at("k", 25), at("k", 11), at("k", 9)), Seq(0, 3)),
    ("k1@10, k2@20, k1@9", 10000, Seq(at("k1", 10), at("k2", 20), at("k1", 9)), Seq(0, 1)),
    ("k1@10, k2@21, k1@9", 10000, Seq(at("k1", 10), at("k2", 21), at("k1", 9)), Seq(0, 1, 2)),
    ("100 ms: k1@150ms, x@200ms, k1@60ms", 100, Seq(at("k1", 0.150), at("x", 0.200), at("k1", 0.060)), Seq(0, 1)),
    ("100 ms: x@200ms, k1@50ms, k1@10ms", 100, Seq(at("x", 0.200), at("k1", 0.050), at("k1", 0.010)), Seq(0, 1, 2)),
    // rule 4: a late record that is no duplicate is forwarded and leaves the live entry stored
    ("a@15, a@4, a@14", 10000, Seq(at("a", 15), at("a", 4), at("a", 14)), Seq(0, 1)),
    (
      // null keys are always forwarded; a is deduplicated per partition
      "null keys, two partitions",
      10000,
      Seq(at(null, 1), at(null, 1), at("a", 2, partition = 1), at("a", 3, partition = 1), at("a", 4)),
      Seq(0, 1, 4, 2))
  )

  // Every example in one query per mode: example i's records numbered on their own (offsets, values
  // v<index>), on partitions i * Stride + p, keys prefixed "i/", so no example meets another's
  // state or stream time (as streams.run_examples in Python).
  private val packedDedupExamples: Seq[Seq[Event]] = dedupExamples.zipWithIndex.map { case ((_, _, events, _), i) =>
    Event
      .numbered(events)
      .map(e => e.copy(key = Option(e.key).map(k => s"$i/$k").orNull, partition = i * Stride + e.partition))
  }

  /** Each example's forwarded (key, value), in (partition, offset) order. */
  private def dedupByExample(batches: Seq[Seq[Event]], restartBefore: Set[Int]): Seq[Seq[(String, String)]] = {
    val intervals = dedupExamples.map(_._2).toVector
    val user = (df: DataFrame) =>
      KStream(df).process(() => new PackedDedup(intervals), stores = Seq(dedupStore), name = "dedup").df
    val rows = eventRows(batches, user, restartBefore)
      .map(r => (r.getAs[Int]("partition"), r.getAs[Long]("offset"), r.getAs[String]("key"), r.getAs[String]("value")))
      .sortBy(r => (r._1, r._2))
    dedupExamples.indices.map { i =>
      rows.collect {
        case (p, _, k, v) if p / Stride == i =>
          val key = Option(k).map { prefixed =>
            val Array(prefix, key) = prefixed.split("/", 2)
            assert(prefix == i.toString, prefixed)
            key
          }
          (key.orNull, v)
      }
    }
  }

  private val dedupWant: Seq[Seq[(String, String)]] =
    dedupExamples.map { case (_, _, events, forwarded) => forwarded.map(i => (events(i).key, s"v$i")) }

  test("deduplicateByKey as a user processor forwards the spec's rows: every example, one micro-batch") {
    assert(dedupByExample(Seq(packedDedupExamples.flatten), Set.empty) == dedupWant)
  }

  test("deduplicateByKey as a user processor forwards the spec's rows: one record per micro-batch, a restart") {
    // record j of example i in micro-batch start - half(i) + j: every example's first half (at
    // least one record) before the restart, before micro-batch `start`, the rest after it
    val halves = packedDedupExamples.map(e => math.max(1, e.size / 2))
    val start = halves.max
    val batches = packedDedupExamples
      .zip(halves)
      .flatMap { case (events, half) => events.zipWithIndex.map { case (e, j) => (start - half + j, e) } }
      .groupBy(_._1)
      .toSeq
      .sortBy(_._1)
      .map(_._2.map(_._2))
    assert(dedupByExample(batches, Set(start)) == dedupWant)
  }

  {
    val c = casesFile.get("redelivery_case")
    val batches = list(c.get("batches")).map(batch =>
      list(batch).map(r =>
        Event.at(r.get(0).asText(), r.get(2).asDouble(), r.get(3).asInt(), r.get(4).asLong(), r.get(1).asText())))
    val restartBefore = list(c.get("restart_before")).map(_.asInt()).toSet
    val intervalMs = c.get("interval_ms").asLong()
    val expected = list(c.get("expected")).map(_.asText())
    test("shared redelivery case: the user processor") {
      val user = (df: DataFrame) => KStream(df).process(() => new DedupByKey(intervalMs), stores = Seq(dedupStore)).df
      assert(stream(batches, user, restartBefore) == expected)
    }
    test("shared redelivery case: the built-in operator") {
      val builtIn = (df: DataFrame) => KStream(df).deduplicateByKey(Duration.ofMillis(intervalMs)).df
      assert(stream(batches, builtIn, restartBefore) == expected)
    }
  }
}
