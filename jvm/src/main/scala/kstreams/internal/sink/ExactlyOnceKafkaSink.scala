package kstreams
package internal
package sink

import java.time.Duration
import java.util
import java.util.Properties
import java.util.concurrent.{ExecutionException, TimeUnit}

import scala.jdk.CollectionConverters._

import org.apache.kafka.clients.admin.{Admin, AdminClientConfig, DescribeTopicsOptions, ListConsumerGroupOffsetsOptions}
import org.apache.kafka.clients.consumer.{ConsumerGroupMetadata, OffsetAndMetadata}
import org.apache.kafka.clients.producer.{Callback, KafkaProducer, ProducerConfig, ProducerRecord, RecordMetadata}
import org.apache.kafka.common.{KafkaException, TopicPartition}
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException
import org.apache.kafka.common.header.internals.RecordHeader
import org.apache.kafka.common.serialization.ByteArraySerializer
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.catalog.{SupportsWrite, Table, TableCapability, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.connector.write._
import org.apache.spark.sql.connector.write.streaming.{StreamingDataWriterFactory, StreamingWrite}
import org.apache.spark.sql.kstreams.RunningQueries
import org.apache.spark.sql.sources.DataSourceRegister
import org.apache.spark.sql.types._
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/** The exactly-once Kafka sink of `KStream.to(topic, exactlyOnce = true)`, format
  * `kstreams-kafka-eos` (the manual, "Exactly once to Kafka").
  *
  * Each task of a micro-batch writes its rows in one Kafka transaction of its own, under the
  * transactional id `kstreams-<query id>-<partition>`: the streaming query's id, which Spark keeps
  * in the checkpoint, so the same across restarts, and distinct per query and per output partition.
  * With its records the transaction commits a marker: the offset `batch id + 1` of the consumer
  * group named like the transactional id, on partition 0 of the `topic` option's topic (offsets are
  * metadata: no consumer reads that group), or of the `kstreams.markerTopic` option's topic when
  * the rows name their topics (a `topic` column, as in Spark's Kafka sink, which the `topic`
  * option overrides). Kafka commits records and marker together or neither.
  *
  * Why a record is seen once by a `read_committed` consumer, whatever is killed when: a task's
  * producer first calls `initTransactions`, which fences every earlier producer of its id (a
  * zombie of a lost executor, the attempt before a restart) and completes or aborts their open
  * transaction; then it reads its marker. If the marker says the batch is committed, an earlier
  * attempt's transaction holds exactly this task's rows, and the task writes nothing; otherwise
  * it writes all of them. A producer whose transaction committed is kept for the id's next task
  * in this JVM (`TransactionalProducers`), which then knows the marker without reading it. A replayed micro-batch has the same rows per partition: Spark replays the same
  * offsets through the same plan, and a kstreams operator's output partitions are its state
  * partitions, fixed by the checkpoint.
  */
final class ExactlyOnceKafkaProvider extends TableProvider with DataSourceRegister {
  override def shortName(): String = ExactlyOnceKafkaProvider.Format
  override def inferSchema(options: CaseInsensitiveStringMap): StructType = new StructType()
  override def getTable(
      schema: StructType,
      partitioning: Array[Transform],
      properties: util.Map[String, String]): Table = ExactlyOnceKafkaTable
}

object ExactlyOnceKafkaProvider {
  val Format = "kstreams-kafka-eos"

  /** The topic whose partition 0 holds the batch markers, when not the `topic` option's. */
  val MarkerTopicOption = "kstreams.markerTopic"
}

private object ExactlyOnceKafkaTable extends Table with SupportsWrite {
  override def name(): String = ExactlyOnceKafkaProvider.Format
  override def schema(): StructType = new StructType()
  override def capabilities(): util.Set[TableCapability] = Set(TableCapability.STREAMING_WRITE).asJava

  override def newWriteBuilder(info: LogicalWriteInfo): WriteBuilder = new WriteBuilder {
    override def build(): Write = new Write {
      override def toStreaming: StreamingWrite =
        new ExactlyOnceKafkaWrite(info.queryId, ExactlyOnceKafkaWrite.Layout(info.schema), info.options.asScala.toMap)
    }
  }
}

private[kstreams] final class ExactlyOnceKafkaWrite(
    queryId: String,
    layout: ExactlyOnceKafkaWrite.Layout,
    options: Map[String, String])
    extends StreamingWrite {

  // as in Spark's Kafka sink, the topic option overrides the rows' topic column
  private val topic = options.get("topic")
  if (topic.isEmpty && layout.topic < 0)
    throw new KStreamsException(s"the ${ExactlyOnceKafkaProvider.Format} sink needs the option topic or a topic column")
  private val markerTopic = options
    .get(ExactlyOnceKafkaProvider.MarkerTopicOption.toLowerCase) // Spark's options are case-insensitive
    .orElse(topic)
    .getOrElse(throw new KStreamsException(s"the ${ExactlyOnceKafkaProvider.Format} sink needs the option topic or " +
      s"${ExactlyOnceKafkaProvider.MarkerTopicOption}: the topic whose partition 0 holds its batch markers"))
  private val kafkaOptions = options.collect {
    case (k, v) if k.toLowerCase.startsWith("kafka.") => k.substring("kafka.".length) -> v
  }
  if (!kafkaOptions.contains(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG))
    throw new KStreamsException(s"the ${ExactlyOnceKafkaProvider.Format} sink needs the option kafka.bootstrap.servers")
  ExactlyOnceKafkaWrite.refuseOwnSettings(kafkaOptions)
  // Spark makes a write per micro-batch: the brokers are asked once per run of the query
  if (ExactlyOnceKafkaWrite.firstOfRun(queryId))
    ExactlyOnceKafkaWrite.checkMarkerTopic(kafkaOptions, markerTopic, markerIsOutput = topic.contains(markerTopic))

  override def createStreamingWriterFactory(info: PhysicalWriteInfo): StreamingDataWriterFactory =
    new ExactlyOnceKafkaWriterFactory(queryId, topic, markerTopic, kafkaOptions, layout)

  // each task committed or aborted its own transaction
  override def commit(epochId: Long, messages: Array[WriterCommitMessage]): Unit = ()
  override def abort(epochId: Long, messages: Array[WriterCommitMessage]): Unit = ()
}

private[kstreams] object ExactlyOnceKafkaWrite {

  /** The producer settings the sink sets itself, each with why a user's value cannot be honoured:
    * a value another than the sink's would be silently replaced, so it is refused by name. */
  private val OwnSettings: Seq[(String, String => Boolean, String)] = Seq(
    (
      ProducerConfig.TRANSACTIONAL_ID_CONFIG,
      _ => true,
      "the sink names its transactions itself, kstreams-<query id>-<partition>, so that a restarted " +
        "query fences the attempt before it; remove the option (a broker with ACLs must allow " +
        "transactional ids with the prefix 'kstreams-')"),
    (
      ProducerConfig.ACKS_CONFIG,
      v => v.trim != "all" && v.trim != "-1",
      "Kafka transactions need every in-sync replica's ack; remove the option or set it to all"),
    (
      ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
      v => !v.trim.equalsIgnoreCase("true"),
      "Kafka transactions need the idempotent producer; remove the option"),
    (
      ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG,
      _ => true,
      "the sink writes the key column's bytes (string or binary) as they are; serialize the key " +
        "in the query instead (e.g. to_json, or CAST(key AS STRING)), as for Spark's Kafka sink"),
    (
      ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
      _ => true,
      "the sink writes the value column's bytes (string or binary) as they are; serialize the value " +
        "in the query instead (e.g. to_json, or CAST(value AS STRING)), as for Spark's Kafka sink")
  )

  /** The runs whose brokers were checked, by query id (a restart is a new run). */
  private val checkedRuns = scala.collection.mutable.HashMap.empty[String, java.util.UUID]

  /** Whether the write being made for `queryId` is its run's first (outside a running query, as
    * in a test of the write alone: always). */
  def firstOfRun(queryId: String): Boolean = RunningQueries.current() match {
    case Some(query) => checkedRuns.synchronized(checkedRuns.put(queryId, query.runId) != Some(query.runId))
    case None => true
  }

  /** Checks, on the driver before a query's first micro-batch, that the brokers answer and that the
    * marker topic exists, so that neither surfaces as a timeout in a task that names neither.
    *
    * Why the marker topic must exist beforehand: each task's transaction commits its marker as a
    * consumer-group offset of the topic's partition 0, which the broker refuses for a topic it
    * does not know, and the producer retries that until its transaction times out (a minute by
    * default). A micro-batch with no records creates no topic, so even a broker that creates
    * topics on first use does not make this safe. The wait is Kafka's own for an admin call,
    * `kafka.default.api.timeout.ms` (60 s unless set). */
  def checkMarkerTopic(kafkaOptions: Map[String, String], markerTopic: String, markerIsOutput: Boolean): Unit = {
    val format = ExactlyOnceKafkaProvider.Format
    val servers = kafkaOptions(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG)
    if (servers.trim.isEmpty)
      throw new KStreamsException(
        s"the $format sink's option kafka.bootstrap.servers is empty: give the host:port of at least " +
          "one broker, e.g. localhost:9092")
    val isTimeout = (k: String) => k.equalsIgnoreCase(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG)
    val timeoutMs = kafkaOptions.collectFirst { case (k, v) if isTimeout(k) => v.trim } match {
      case None => 60000L
      case Some(v) =>
        v.toIntOption
          .filter(_ > 0)
          .getOrElse(
            throw new KStreamsException(
              s"the $format sink's option kafka.${AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG} must be a " +
                s"positive number of milliseconds (at most ${Int.MaxValue}), got '$v'"))
          .toLong
    }
    // The wait is kept below, on the call, not given to the admin client: as a client setting, a
    // value under request.timeout.ms (30 s) is refused when the client is made.
    val props = new Properties()
    kafkaOptions.foreach { case (k, v) => if (!isTimeout(k)) props.put(k, v) }
    val admin =
      try Admin.create(props)
      catch {
        case e: KafkaException =>
          val root = Iterator.iterate(e: Throwable)(_.getCause).takeWhile(_ != null).toSeq.last
          throw new KStreamsException(
            s"the $format sink cannot use kafka.bootstrap.servers=$servers: ${KStreamsException.sparkSays(root)}",
            e)
      }
    val which = if (markerIsOutput) s"the output topic '$markerTopic'" else s"the marker topic '$markerTopic'"
    def unreachable(cause: Throwable) = new KStreamsException(
      s"the $format sink reached no broker at kafka.bootstrap.servers=$servers in $timeoutMs ms " +
        s"(asking for $which): check the address and that the brokers are up (the wait is " +
        s"kafka.${AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG})",
      cause
    )
    try
      admin
        .describeTopics(util.List.of(markerTopic), new DescribeTopicsOptions().timeoutMs(timeoutMs.toInt))
        .allTopicNames()
        // the call's own deadline is not kept while no broker answers (seen: 60 s for 1.5 s)
        .get(timeoutMs, TimeUnit.MILLISECONDS)
    catch {
      case e: java.util.concurrent.TimeoutException => throw unreachable(e)
      case e: ExecutionException =>
        e.getCause match {
          case _: UnknownTopicOrPartitionException =>
            throw new KStreamsException(
              s"$which does not exist on the brokers at $servers; the $format sink commits each " +
                "micro-batch's marker in its partition 0 (a consumer-group offset, in the same " +
                "transaction as the records), so it must exist before the query starts: create it" +
                (if (markerIsOutput) ""
                 else s", or name an existing topic in ${ExactlyOnceKafkaProvider.MarkerTopicOption}"),
              e.getCause
            )
          case cause: org.apache.kafka.common.errors.TimeoutException => throw unreachable(cause)
          case cause =>
            throw new KStreamsException(
              s"the $format sink could not look up $which at $servers: ${KStreamsException.sparkSays(cause)}",
              cause)
        }
    } finally admin.close(Duration.ZERO)
  }

  /** Refuses, naming it, each of [[OwnSettings]] that `kafkaOptions` (the `kafka.` options without
    * the prefix, names as Spark passes them: lower case) sets to a value the sink cannot honour. */
  def refuseOwnSettings(kafkaOptions: Map[String, String]): Unit = {
    val set = kafkaOptions.map { case (k, v) => k.toLowerCase -> v }
    OwnSettings.foreach { case (name, refused, why) =>
      set.get(name.toLowerCase).filter(refused).foreach { value =>
        throw new KStreamsException(
          s"the ${ExactlyOnceKafkaProvider.Format} sink cannot honour the option kafka.$name=$value: $why")
      }
    }
  }

  /** Where a row's parts are: `key` and `value` (string or binary), and optional `headers`
    * (array of (key string, value binary)) and `topic` (string), as Spark's Kafka sink reads them. */
  final case class Layout(key: Int, keyIsString: Boolean, value: Int, valueIsString: Boolean, headers: Int, topic: Int)

  object Layout {
    def apply(schema: StructType): Layout = {
      def index(name: String): Int = schema.fieldNames.indexOf(name)
      def bytesColumn(name: String): (Int, Boolean) = schema.find(_.name == name).map(_.dataType) match {
        case Some(StringType) => (index(name), true)
        case Some(BinaryType) => (index(name), false)
        case None if name == "key" => (-1, false)
        case other =>
          throw new KStreamsException(
            s"the ${ExactlyOnceKafkaProvider.Format} sink needs a $name column of type string or binary, got " +
              other.map(_.simpleString).getOrElse("none"))
      }
      val (key, keyIsString) = bytesColumn("key")
      val (value, valueIsString) = bytesColumn("value")
      Layout(key, keyIsString, value, valueIsString, index("headers"), index("topic"))
    }
  }

  /** What a task reports: how many records it committed, or that its batch was committed before. */
  final case class Committed(partition: Int, epochId: Long, records: Long, alreadyCommitted: Boolean)
      extends WriterCommitMessage
}

private final class ExactlyOnceKafkaWriterFactory(
    queryId: String,
    topic: Option[String],
    markerTopic: String,
    kafkaOptions: Map[String, String],
    layout: ExactlyOnceKafkaWrite.Layout)
    extends StreamingDataWriterFactory {

  override def createWriter(partitionId: Int, taskId: Long, epochId: Long): DataWriter[InternalRow] =
    new ExactlyOnceKafkaDataWriter(queryId, topic, markerTopic, kafkaOptions, layout, partitionId, epochId)
}

/** One task's transaction: see [[ExactlyOnceKafkaProvider]] for the protocol. */
private final class ExactlyOnceKafkaDataWriter(
    queryId: String,
    topic: Option[String],
    markerTopic: String,
    kafkaOptions: Map[String, String],
    layout: ExactlyOnceKafkaWrite.Layout,
    partitionId: Int,
    epochId: Long)
    extends DataWriter[InternalRow] {

  private val transactionalId = s"kstreams-$queryId-$partitionId"
  private val marker = new TopicPartition(markerTopic, 0)
  @volatile private var sendError: Exception = null
  private var records = 0L
  private var reusable = false

  // This executor's producer of the id from the micro-batch before, or a new one: a new one calls
  // initTransactions (fencing every earlier producer of the id, settling its open transaction) and
  // reads the marker from Kafka. A kept one knows the marker: the last batch it committed itself.
  // That knowledge cannot go stale unnoticed: a newer producer of the id must have called
  // initTransactions, which fenced this one, so its first send or commit fails, the task fails, the
  // producer is dropped, and the retried task starts a new one.
  private val producer = TransactionalProducers.take(transactionalId, kafkaOptions).getOrElse {
    val props = new Properties()
    kafkaOptions.foreach { case (k, v) => props.put(k, v) }
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId)
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true")
    props.put(ProducerConfig.ACKS_CONFIG, "all")
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, classOf[ByteArraySerializer].getName)
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, classOf[ByteArraySerializer].getName)
    val created = new KafkaProducer[Array[Byte], Array[Byte]](props)
    try {
      created.initTransactions()
      new TransactionalProducers.Kept(created, kafkaOptions, committedBatches())
    } catch {
      case e: Throwable => created.close(Duration.ZERO); throw e
    }
  }

  private val alreadyCommitted: Boolean = producer.committedBatches > epochId
  if (!alreadyCommitted)
    try producer.kafka.beginTransaction()
    catch { case e: Throwable => producer.kafka.close(Duration.ZERO); throw e } // no writer: no close()

  /** The marker: 1 + the last batch whose transaction committed for this partition (0: none). */
  private def committedBatches(): Long = {
    val props = new Properties()
    kafkaOptions.foreach { case (k, v) => props.put(k, v) }
    val admin = Admin.create(props)
    try {
      val offsets = admin
        .listConsumerGroupOffsets(transactionalId, new ListConsumerGroupOffsetsOptions())
        .partitionsToOffsetAndMetadata()
        .get()
      Option(offsets.get(marker)).map(_.offset).getOrElse(0L)
    } finally admin.close(Duration.ofSeconds(10))
  }

  private val onSent = new Callback {
    override def onCompletion(metadata: RecordMetadata, e: Exception): Unit =
      if (e != null && sendError == null) sendError = e
  }

  override def write(row: InternalRow): Unit = if (!alreadyCommitted) {
    checkSent()
    def bytes(i: Int, isString: Boolean): Array[Byte] =
      if (i < 0 || row.isNullAt(i)) null else if (isString) row.getUTF8String(i).getBytes else row.getBinary(i)
    val record = new ProducerRecord[Array[Byte], Array[Byte]](
      topic.getOrElse(topicOf(row)),
      null,
      bytes(layout.key, layout.keyIsString),
      bytes(layout.value, layout.valueIsString))
    if (layout.headers >= 0 && !row.isNullAt(layout.headers)) {
      val headers = row.getArray(layout.headers)
      var i = 0
      while (i < headers.numElements()) {
        val h = headers.getStruct(i, 2)
        record.headers().add(new RecordHeader(h.getUTF8String(0).toString, if (h.isNullAt(1)) null else h.getBinary(1)))
        i += 1
      }
    }
    producer.kafka.send(record, onSent)
    records += 1
  }

  private def topicOf(row: InternalRow): String =
    if (row.isNullAt(layout.topic))
      throw new KStreamsException(s"the ${ExactlyOnceKafkaProvider.Format} sink got a row whose topic is null")
    else row.getUTF8String(layout.topic).toString

  private def checkSent(): Unit =
    if (sendError != null)
      throw new KStreamsException(s"writing to Kafka failed (transactional id $transactionalId): $sendError", sendError)

  override def commit(): WriterCommitMessage = {
    if (!alreadyCommitted) {
      producer.kafka.flush()
      checkSent()
      producer.kafka.sendOffsetsToTransaction(
        Map(marker -> new OffsetAndMetadata(epochId + 1, s"kstreams batch $epochId")).asJava,
        new ConsumerGroupMetadata(transactionalId))
      producer.kafka.commitTransaction()
      producer.committedBatches = epochId + 1
    }
    reusable = true
    ExactlyOnceKafkaWrite.Committed(partitionId, epochId, records, alreadyCommitted)
  }

  override def abort(): Unit =
    if (!alreadyCommitted)
      try producer.kafka.abortTransaction()
      catch { case _: Exception => () } // fenced or closed: the transaction is aborted anyway

  // only a producer whose transaction committed is kept; after a failure the next task starts anew
  override def close(): Unit =
    if (reusable) TransactionalProducers.keep(transactionalId, producer)
    else producer.kafka.close(Duration.ofSeconds(30))
}

/** The transactional producers of this JVM between micro-batches, by transactional id, as Spark's
  * Kafka sink keeps its producers: a micro-batch's task would otherwise pay for a new producer,
  * `initTransactions` and a marker look-up (a few broker round trips, tens of ms each) every time.
  * A task takes its id's producer out while it writes (so two attempts never share one) and puts
  * it back after a commit; one idle longer than [[IdleTimeoutNanos]] is closed at the next take
  * (its network thread is a daemon: it never keeps the JVM alive). */
private object TransactionalProducers {

  /** A producer and the marker it knows: 1 + the last batch committed under its id. */
  final class Kept(
      val kafka: KafkaProducer[Array[Byte], Array[Byte]],
      val config: Map[String, String],
      var committedBatches: Long) {
    var idleSinceNanos: Long = 0L
  }

  /** As Spark's Kafka sink (`spark.kafka.producer.cache.timeout`, 10 minutes by default). */
  val IdleTimeoutNanos: Long = 10L * 60 * 1000 * 1000 * 1000

  private val idle = new util.HashMap[String, Kept]()

  /** The kept producer of `transactionalId` made with `config`, taken out; None if there is none. */
  def take(transactionalId: String, config: Map[String, String]): Option[Kept] = {
    val (found, stale) = synchronized {
      val expired = idle.asScala.collect {
        case (id, k) if System.nanoTime() - k.idleSinceNanos > IdleTimeoutNanos => id
      }.toList
      val stale = expired.map(idle.remove)
      Option(idle.remove(transactionalId)) match {
        case Some(k) if k.config == config => (Some(k), stale)
        case other => (None, stale ++ other)
      }
    }
    stale.foreach(_.kafka.close(Duration.ofSeconds(5)))
    found
  }

  def keep(transactionalId: String, producer: Kept): Unit = {
    producer.idleSinceNanos = System.nanoTime()
    val replaced = synchronized(Option(idle.put(transactionalId, producer)))
    replaced.filter(_ ne producer).foreach(_.kafka.close(Duration.ofSeconds(5)))
  }
}
