package kstreams.processor

/** A user-defined record processor (KIP-28), run on Spark's `transformWithState`.
  *
  * One instance serves one input partition (a Kafka Streams task) for one micro-batch: `init` is
  * called before the partition's first record or punctuation of the micro-batch, `close` at its
  * end. Anything that must outlive a micro-batch (or a restart) belongs in a [[KeyValueStore]];
  * stores and punctuation schedules are checkpointed in Spark's RocksDB state store.
  *
  * `K` and `V` are the Scala types Spark's `Row` gives for the input's key and value columns
  * (`String`, `Array[Byte]`, `Long`, `Int`, `Double`, `Row` for a struct...); forwarded records
  * have the same types, so the output's key and value columns have the input's column types.
  *
  * {{{
  * class Sum extends Processor[String, Long] {
  *   private var ctx: ProcessorContext[String, Long] = _
  *   private var sums: KeyValueStore[String, Long] = _
  *   override def init(context: ProcessorContext[String, Long]): Unit = {
  *     ctx = context
  *     sums = context.getStateStore[String, Long]("sums")
  *     context.schedule(Duration.ofSeconds(10), PunctuationType.StreamTime)
  *   }
  *   override def process(r: Record[String, Long]): Unit =
  *     sums.put(r.key, sums.get(r.key).getOrElse(0L) + r.value)
  *   override def punctuate(timestamp: Long): Unit =
  *     sums.all().foreach { case (k, v) => ctx.forward(k, v, timestamp) }
  * }
  * }}}
  */
trait Processor[K, V] {

  /** Called once per partition and micro-batch before anything else; keep the context here.
    *
    * @param context
    *   this partition's context: stores (`getStateStore`), schedules (`schedule`, only here),
    *   `forward` and the current record's metadata
    * @throws KStreamsException
    *   from `context`, for a store the processor did not declare or a schedule it may not make
    *   (spec section 7); any exception thrown here fails the query, naming the processor */
  def init(context: ProcessorContext[K, V]): Unit = ()

  /** Called for each record, in arrival order (offset order) of its input partition.
    *
    * @param record
    *   the input record, with its partition, offset and timestamp
    * @throws java.lang.Exception
    *   anything thrown fails the query with a message naming the processor, the partition and the
    *   offset of the record (the manual, "Processor API") */
  def process(record: Record[K, V]): Unit

  /** Called by the schedules registered with `context.schedule(interval, type)` without their
    * own [[Punctuator]].
    *
    * @param timestamp
    *   the stream time (stream-time punctuation) or the processing time (wall-clock), epoch ms */
  def punctuate(timestamp: Long): Unit = ()

  /** Called at the end of the partition's micro-batch, once per task and micro-batch. The
    * micro-batch's output is complete then: a forward here fails the query (it would be lost), and
    * the stores are out of reach (Spark has no current key; keep what `close` needs in fields).
    *
    * @throws KStreamsException
    *   from the context, for a forward made here */
  def close(): Unit = ()
}
