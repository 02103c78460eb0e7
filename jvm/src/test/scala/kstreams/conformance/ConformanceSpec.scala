package kstreams.conformance

import java.nio.file.Files
import java.sql.Timestamp
import java.time.Duration
import java.util.Properties

import scala.jdk.CollectionConverters._
import scala.util.Random

import org.apache.kafka.common.serialization.{Serdes, StringDeserializer, StringSerializer}
import org.apache.kafka.common.utils.{Bytes, Utils}
import org.apache.kafka.streams.{StreamsBuilder, TopologyTestDriver}
import org.apache.kafka.streams.kstream.{Aggregator, Consumed, Initializer, KeyValueMapper, Materialized,
  Produced, Reducer, ValueMapper, Windowed, KStream => KafkaStream, SessionWindows => KafkaSessionWindows,
  TimeWindows => KafkaTimeWindows}
import org.apache.kafka.streams.state.{KeyValueStore, Stores}
import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.functions.{concat, lit}

import kstreams.{Event, KStream, SessionWindows, SparkSuite, TimeWindows}

/** Kafka Streams 4.3.1 itself (`TopologyTestDriver`, record cache off, in-memory stores) and our
  * DSL on the same random keyed streams, compared exactly, per key and in order: every update a
  * key's result went through, with its value and timestamp.
  *
  * A case (one seed) is a few dozen records: a handful of keys and some null keys, a small value
  * alphabet with some null values, timestamps moving forward with out-of-order and late records,
  * keys spread over 1-3 partitions by Kafka's own partitioner (murmur2; null keys at random).
  * Kafka runs one driver per partition, as one task per partition would; we run all cases in one
  * query (each case's keys and partitions apart), in one micro-batch and in four with a restart.
  * `make conformance SEEDS=...` runs more seeds. Where our rule differs on purpose (README), the
  * suite applies our rule to Kafka's output (emit on change, [[ConformanceSpec.emitOnChange]]) or
  * the case avoids it and says so (windows closing by the watermark).
  */
class ConformanceSpec extends SparkSuite {
  import ConformanceSpec._

  private val seeds: Seq[Int] =
    sys.env.get("KSTREAMS_CONFORMANCE_SEEDS").filter(_.trim.nonEmpty).map(parseSeeds).getOrElse(0 until 40)
  private val cases = seeds.map(generate)

  /** One DSL operator both ways: Kafka's topology from the input stream to a stream of
    * (key, value as string), and ours from the input DataFrame to rows read by `keyOf`. */
  private case class Operator(
      name: String,
      kafka: KafkaStream[String, String] => KafkaStream[String, String],
      ours: DataFrame => DataFrame,
      windowed: Boolean = false)

  private val concatReducer: Reducer[String] = (a: String, b: String) => a + b

  private val operators = Seq(
    Operator("count",
      s => s.groupByKey().count(inMemory[java.lang.Long]("count")).toStream().mapValues(asString[java.lang.Long]),
      df => KStream(df).groupByKey.count().df),
    Operator("reduce",
      s => s.groupByKey().reduce(concatReducer, inMemory[String]("reduce")).toStream(),
      df => KStream(df).groupByKey.reduce((agg, v) => concat(agg, v)).df),
    Operator("aggregate",
      s => s.groupByKey().aggregate[String](
        (() => "<"): Initializer[String],
        ((_: String, v: String, agg: String) => agg + v): Aggregator[String, String, String],
        inMemory[String]("aggregate")).toStream(),
      df => KStream(df).groupByKey.aggregate(lit("<"), (agg, v) => concat(agg, v)).df),
    Operator("toTable",
      s => s.toTable(inMemory[String]("table")).toStream(),
      df => KStream(df).toTable.df),
    // Windows close by the query's watermark here and by stream time in Kafka (README): a grace of
    // an hour keeps every window of these cases open in both.
    Operator("windowed count (10 ms windows, 1 h grace)",
      s => s.groupByKey()
        .windowedBy(KafkaTimeWindows.ofSizeAndGrace(Duration.ofMillis(10), Duration.ofHours(1)))
        .count(Materialized.as[String, java.lang.Long](
          Stores.inMemoryWindowStore("windowed", Duration.ofHours(2), Duration.ofMillis(10), false)))
        .toStream(windowedKey[java.lang.Long]).mapValues(asString[java.lang.Long]),
      df => KStream(df).groupByKey.windowedBy(TimeWindows.ofSizeAndGrace("10 milliseconds", "1 hour"))
        .count().df,
      windowed = true),
    Operator("session count (gap 5 ms, 1 h grace)",
      s => s.groupByKey()
        .windowedBy(KafkaSessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(5), Duration.ofHours(1)))
        .count(Materialized.as[String, java.lang.Long](Stores.inMemorySessionStore("sessions", Duration.ofHours(2))))
        .toStream(windowedKey[java.lang.Long]).mapValues(asString[java.lang.Long]),
      df => KStream(df).groupByKey.windowedBy(SessionWindows.ofInactivityGapAndGrace("5 milliseconds", "1 hour"))
        .count().df,
      windowed = true))

  for (op <- operators; (split, batches) <- Seq("one micro-batch" -> 1, "four micro-batches, a restart" -> 4)) {
    test(s"${op.name} agrees with Kafka Streams 4.3.1, ${cases.size} cases, $split") {
      val want = cases.flatMap(c => kafkaUpdates(c, op.kafka)).toMap.map { case (k, u) => k -> emitOnChange(u) }
      val inBatches = (0 until batches).map(b => cases.flatMap(c => c.records.zipWithIndex.collect {
        case (e, i) if i * batches / c.records.size == b => e
      }))
      val rows = streamRows(inBatches, Encoders.product[Event], op.ours,
        restartBefore = if (batches > 1) Set(batches / 2) else Set.empty)
      val got = ourUpdates(rows, op.windowed)
      val differing = (want.keySet ++ got.keySet).toSeq.sorted
        .filter(k => want.getOrElse(k, Nil) != got.getOrElse(k, Nil))
      assert(differing.isEmpty, differing.take(3).map { k =>
        val c = cases.find(_.seed == k.drop(1).takeWhile(_ != '-').toInt).get
        s"\nkey $k (case ${c.seed}, ${c.partitions} partitions): Kafka ${want.getOrElse(k, Nil)}, " +
          s"kstreams ${got.getOrElse(k, Nil)}\n  input: ${c.describe}"
      }.mkString)
      assert(want.values.map(_.size).sum > cases.size, "the cases produced almost no output")
    }
  }

  /** Per key, (value, timestamp in ms after Event.Base) of every update our operator emitted, in
    * micro-batch order and, inside one, in the order the key's task emitted them. */
  private def ourUpdates(rows: Seq[Row], windowed: Boolean): Map[String, Seq[(String, Long)]] =
    rows.groupBy { r =>
      val key = r.getAs[String]("key")
      if (!windowed) key
      else {
        val window = r.getAs[Row]("window")
        s"$key@${window.getAs[Timestamp]("start").getTime - Event.Base}-${window.getAs[Timestamp]("end").getTime - Event.Base}"
      }
    }.map { case (k, rs) =>
      k -> rs.map(r => (Option(r.get(r.fieldIndex("value"))).map(_.toString).orNull,
        r.getAs[Timestamp]("timestamp").getTime - Event.Base))
    }
}

object ConformanceSpec {
  /** One random case: records in send order (partition and offset set). */
  final case class Case(seed: Int, partitions: Int, records: Seq[Event]) {
    def describe: String = records.map { e =>
      s"${e.partition % 4}:${Option(e.key).getOrElse("null")}=${Option(e.value).getOrElse("null")}" +
        s"@${e.timestamp.getTime - Event.Base}"
    }.mkString(", ")
  }

  def parseSeeds(text: String): Seq[Int] = text.split(",").toSeq.flatMap { part =>
    part.split("-") match {
      case Array(from, to) => from.trim.toInt to to.trim.toInt
      case Array(one) => Seq(one.trim.toInt)
    }
  }

  /** Case `seed`: keys `s<seed>-a` .. `-d` and null, values x, y, z and null, partitions
    * `seed * 4 + p` on our side (cases never share a partition or a key). */
  def generate(seed: Int): Case = {
    val rng = new Random(seed)
    val partitions = 1 + rng.nextInt(3)
    val n = 20 + rng.nextInt(30)
    var t = 1000L
    val offsets = Array.fill(partitions)(0L)
    val records = (0 until n).map { _ =>
      t += rng.nextInt(6)
      val ts = rng.nextInt(10) match {
        case 0 => t - 15 - rng.nextInt(30) // late
        case 1 | 2 => t - rng.nextInt(8) // out of order
        case _ => t
      }
      val key = if (rng.nextInt(8) == 0) null else s"s$seed-${"abcd"(rng.nextInt(4))}"
      val value = if (rng.nextInt(8) == 0) null else "xyz"(rng.nextInt(3)).toString
      val p = if (key == null) rng.nextInt(partitions) else kafkaPartition(key, partitions)
      val offset = offsets(p); offsets(p) += 1
      Event(key, value, new Timestamp(Event.Base + ts), seed * 4 + p, offset)
    }
    Case(seed, partitions, records)
  }

  /** Kafka's default partitioner for a keyed record. */
  def kafkaPartition(key: String, partitions: Int): Int =
    Utils.toPositive(Utils.murmur2(key.getBytes("UTF-8"))) % partitions

  /** Per key, (value, timestamp in ms after Event.Base) of every record Kafka's topology wrote,
    * one driver per partition. */
  def kafkaUpdates(c: Case, topology: KafkaStream[String, String] => KafkaStream[String, String])
      : Map[String, Seq[(String, Long)]] =
    c.records.groupBy(_.partition).toSeq.flatMap { case (_, records) =>
      val builder = new StreamsBuilder()
      topology(builder.stream("in", Consumed.`with`(Serdes.String(), Serdes.String())))
        .to("out", Produced.`with`(Serdes.String(), Serdes.String()))
      val props = new Properties()
      props.put("application.id", "conformance")
      props.put("bootstrap.servers", "127.0.0.1:9") // never contacted by the test driver
      props.put("statestore.cache.max.bytes", "0") // every update, as our operators emit them
      props.put("default.key.serde", classOf[Serdes.StringSerde].getName)
      props.put("default.value.serde", classOf[Serdes.StringSerde].getName)
      props.put("state.dir", Files.createTempDirectory("kafka-streams").toString)
      val driver = new TopologyTestDriver(builder.build(), props)
      try {
        val in = driver.createInputTopic("in", new StringSerializer, new StringSerializer)
        records.sortBy(_.offset).foreach(e => in.pipeInput(e.key, e.value, e.timestamp.getTime))
        driver.createOutputTopic("out", new StringDeserializer, new StringDeserializer)
          .readRecordsToList().asScala.toSeq
          .map(r => r.key() -> (r.value(), r.timestamp().longValue - Event.Base))
      } finally driver.close()
    }.groupBy(_._1).map { case (k, kvs) => k -> kvs.map(_._2) }

  /** Our documented difference for every table (spec section 6, KIP-557, which Kafka reverted):
    * an update with the stored value and a timestamp not older is dropped and leaves the stored
    * row as it was; a null value deletes. Applied to Kafka's updates of one key. */
  def emitOnChange(updates: Seq[(String, Long)]): Seq[(String, Long)] = {
    var stored: Option[(String, Long)] = None
    updates.filter { case (value, ts) =>
      val idempotent = value != null && stored.exists { case (v, storedTs) => v == value && ts >= storedTs }
      if (!idempotent) stored = Option(value).map(_ -> ts)
      !idempotent
    }
  }

  def inMemory[V](name: String): Materialized[String, V, KeyValueStore[Bytes, Array[Byte]]] =
    Materialized.as[String, V](Stores.inMemoryKeyValueStore(name))

  def asString[V]: ValueMapper[V, String] = (v: V) => if (v == null) null else v.toString

  /** A windowed result's key as `key@start-end` (in ms after Event.Base). */
  def windowedKey[V]: KeyValueMapper[Windowed[String], V, String] =
    (k: Windowed[String], _: V) => s"${k.key()}@${k.window().start() - Event.Base}-${k.window().end() - Event.Base}"
}
