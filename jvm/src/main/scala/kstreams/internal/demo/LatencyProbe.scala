package kstreams
package internal
package demo

import java.time.Duration
import java.util.{Collections, Optional, Properties}
import java.util.concurrent.{ConcurrentHashMap, ThreadLocalRandom}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicLong, AtomicReference}

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.kafka.clients.admin.{Admin, AdminClientConfig, NewTopic}
import org.apache.kafka.clients.consumer.{ConsumerConfig, KafkaConsumer}
import org.apache.kafka.clients.producer.{Callback, KafkaProducer, ProducerConfig, ProducerRecord, RecordMetadata}
import org.apache.kafka.common.TopicPartition
import org.apache.kafka.common.serialization.{StringDeserializer, StringSerializer}

/** The latency part of `kstreams-spark demo --bootstrap-servers` (the manual, "Real-time mode"): sends
  * an at-least-once stream to a topic at a steady rate while a dedup query (started by the demo)
  * copies it to another topic, reads that topic, and says how long each record took and whether
  * the output is what the dedup rule must forward.
  *
  * It runs in the demo's Spark driver JVM, so that the send and receive times come from one clock
  * (`System.nanoTime`); on a small machine it competes with the query for the cores, which makes
  * its figures an upper bound (`make bench-latency` runs producer and consumer in a process of
  * their own). Kept out of the Python process because a record per millisecond through py4j would
  * cost more than the query's own work.
  *
  * The stream: keys `k0`, `k1`, ... each once, round-robin over the input topic's partitions, the
  * send time in the value; a quarter of them sent again 10-500 ms later (a producer retry, value
  * marked `retry`). Every retry is within the dedup interval of its original and nothing is late,
  * so the rule forwards exactly each key's first record.
  */
private[kstreams] object LatencyProbe {

  private val RetryShare = 0.25
  private val RetryDelayNanos = (10L * 1000 * 1000, 500L * 1000 * 1000)

  /** Creates `inTopic` with `partitions` partitions and `outTopic` with one (one partition keeps the
    * order each state task wrote in), at the broker's default replication factor. */
  def createTopics(bootstrap: String, inTopic: String, partitions: Int, outTopic: String): Unit =
    withAdmin(bootstrap)(
      _.createTopics(java.util.List.of(
        new NewTopic(inTopic, Optional.of[Integer](partitions), Optional.empty[java.lang.Short]()),
        new NewTopic(outTopic, Optional.of[Integer](1), Optional.empty[java.lang.Short]())
      ))
        .all()
        .get())

  /** Deletes the demo's topics. */
  def deleteTopics(bootstrap: String, topics: java.util.List[String]): Unit =
    withAdmin(bootstrap)(_.deleteTopics(topics).all().get())

  private def withAdmin(bootstrap: String)(f: Admin => Unit): Unit = {
    val props = new Properties()
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap)
    val admin = Admin.create(props)
    try f(admin)
    finally admin.close(Duration.ofSeconds(10))
  }

  /** Sends warm-up records (keys `w...`, 20 a second) until one comes out of `outTopic` (the query
    * is running), `warmUpSeconds` more, then `ratePerSecond` records a second for `seconds`;
    * waits until every key came out or `timeoutSeconds` passed. Returns the result as JSON:
    * `sent`, `retries`, `out` (records read), `missing` (keys never out), `repeated` (keys out more
    * than once), `retriesOut` (keys whose retry came out instead of the original), and the
    * latency percentiles `p50Ms`, `p90Ms`, `p99Ms`, `maxMs` of each original's first output. */
  def run(
      bootstrap: String,
      inTopic: String,
      outTopic: String,
      partitions: Int,
      ratePerSecond: Int,
      seconds: Double,
      warmUpSeconds: Double,
      timeoutSeconds: Double): String = {
    val received = new ConcurrentHashMap[String, Vector[(Boolean, Long, Long)]]() // key -> (retry, sent, received)
    val stop = new AtomicBoolean(false)
    val readerFailure = new AtomicReference[Throwable]()
    val reader = new Thread(
      () =>
        try read(bootstrap, outTopic, received, stop)
        catch { case e: Throwable => readerFailure.set(e) },
      "kstreams-demo-latency-reader")
    reader.setDaemon(true)
    reader.start()
    val producer = newProducer(bootstrap)
    val sendFailures = new AtomicLong()
    val lastSendFailure = new AtomicReference[Exception]()
    val countFailure: Callback = (_: RecordMetadata, e: Exception) =>
      if (e != null) { lastSendFailure.set(e); sendFailures.incrementAndGet() }
    def send(partition: Int, key: String, retry: Boolean): Unit =
      producer.send(
        new ProducerRecord[String, String](
          inTopic,
          partition,
          key,
          s"${if (retry) "retry" else "original"} ${System.nanoTime()}"),
        countFailure)
    // the demo's own failures are said as such, not counted as keys the query lost
    def checkHealthy(): Unit = {
      if (readerFailure.get() != null)
        throw new KStreamsException(s"the demo could not read $outTopic: ${readerFailure.get()}")
      if (sendFailures.get() > 0)
        throw new KStreamsException(
          s"the demo could not send ${sendFailures.get()} records to $inTopic: ${lastSendFailure.get()}")
    }
    try {
      // warm-up: the query's first batch starts only when the stream has begun
      val warmUpDeadline = System.nanoTime() + (timeoutSeconds * 1e9).toLong
      var w = 0
      while (!received.keys().asScala.exists(_.startsWith("w"))) {
        checkHealthy()
        if (System.nanoTime() > warmUpDeadline)
          throw new KStreamsException(
            s"no record came out of $outTopic within ${timeoutSeconds.toInt} s: is the query running?")
        send(w % partitions, s"w$w", retry = false)
        w += 1
        Thread.sleep(50)
      }
      val warmUpEnd = System.nanoTime() + (warmUpSeconds * 1e9).toLong
      while (System.nanoTime() < warmUpEnd) {
        send(w % partitions, s"w$w", retry = false)
        w += 1
        Thread.sleep(50)
      }
      val (sent, retries) = sendAtRate(send, partitions, ratePerSecond, seconds)
      producer.flush()
      val deadline = System.nanoTime() + (timeoutSeconds * 1e9).toLong
      def allOut = (0 until sent).forall(i => received.containsKey(s"k$i"))
      while (!allOut && System.nanoTime() < deadline) { checkHealthy(); Thread.sleep(100) }
      // a retry wrongly forwarded comes out after its original (sent up to 500 ms later, then a
      // micro-batch or more): wait for it too
      Thread.sleep(3000)
      stop.set(true)
      reader.join(10000)
      checkHealthy()
      summarize(received, sent, retries)
    } finally {
      stop.set(true)
      producer.close(Duration.ofSeconds(10))
    }
  }

  private def summarize(received: ConcurrentHashMap[String, Vector[(Boolean, Long, Long)]], sent: Int, retries: Int) = {
    val outs = (0 until sent).map(i => Option(received.get(s"k$i")).getOrElse(Vector.empty))
    val latenciesMs = outs.collect {
      case out if out.nonEmpty && !out.head._1 => (out.head._3 - out.head._2) / 1e6
    }.sorted
    def pct(q: Double): Double = // nearest rank, as benchmarks/latency.py
      if (latenciesMs.isEmpty) Double.NaN
      else latenciesMs(math.max(0, math.min(latenciesMs.size - 1, math.ceil(q * latenciesMs.size).toInt - 1)))
    val fields = Seq(
      "sent" -> sent,
      "retries" -> retries,
      "out" -> outs.map(_.size).sum,
      "missing" -> outs.count(_.isEmpty),
      "repeated" -> outs.count(_.size > 1),
      "retriesOut" -> outs.count(o => o.nonEmpty && o.head._1),
      "p50Ms" -> pct(0.50),
      "p90Ms" -> pct(0.90),
      "p99Ms" -> pct(0.99),
      "maxMs" -> (if (latenciesMs.isEmpty) Double.NaN else latenciesMs.last)
    )
    fields
      .map { case (k, v) => s""""$k": ${if (v.isInstanceOf[Double] && v.asInstanceOf[Double].isNaN) "null" else v}""" }
      .mkString("{", ", ", "}")
  }

  /** Sends `rate` records a second for `seconds`, scheduled by the clock (what is due, every
    * millisecond), plus the retries; returns how many originals and retries were sent. */
  private def sendAtRate(
      send: (Int, String, Boolean) => Unit,
      partitions: Int,
      rate: Int,
      seconds: Double): (Int, Int) = {
    val total = math.max(1, (rate * seconds).toInt)
    val random = ThreadLocalRandom.current()
    val retriesDue = mutable.PriorityQueue.empty[(Long, Int)](Ordering.by[(Long, Int), Long](-_._1))
    val start = System.nanoTime()
    var next = 0
    var retries = 0
    while (next < total || retriesDue.nonEmpty) {
      val now = System.nanoTime()
      val due = math.min(total, ((now - start) / 1e9 * rate).toInt + 1)
      while (next < due) {
        send(next % partitions, s"k$next", false)
        if (random.nextDouble() < RetryShare)
          retriesDue.enqueue((now + random.nextLong(RetryDelayNanos._1, RetryDelayNanos._2), next))
        next += 1
      }
      while (retriesDue.nonEmpty && retriesDue.head._1 <= now) {
        val (_, i) = retriesDue.dequeue()
        send(i % partitions, s"k$i", true)
        retries += 1
      }
      Thread.sleep(1)
    }
    (total, retries)
  }

  private def newProducer(bootstrap: String) = {
    val props = new Properties()
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap)
    props.put(ProducerConfig.LINGER_MS_CONFIG, "1")
    props.put(ProducerConfig.ACKS_CONFIG, "1")
    new KafkaProducer[String, String](props, new StringSerializer, new StringSerializer)
  }

  private def read(
      bootstrap: String,
      topic: String,
      received: ConcurrentHashMap[String, Vector[(Boolean, Long, Long)]],
      stop: AtomicBoolean): Unit = {
    val props = new Properties()
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap)
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false")
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest")
    val consumer = new KafkaConsumer[String, String](props, new StringDeserializer, new StringDeserializer)
    try {
      consumer.assign(Collections.singletonList(new TopicPartition(topic, 0)))
      while (!stop.get()) {
        val records = consumer.poll(Duration.ofMillis(20))
        val now = System.nanoTime()
        records.asScala.foreach { r =>
          val Array(kind, sentNanos) = r.value().split(" ")
          received.merge(r.key(), Vector((kind == "retry", sentNanos.toLong, now)), _ ++ _)
        }
      }
    } finally consumer.close()
  }
}
