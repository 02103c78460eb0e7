package kstreams.processor

import java.time.Duration

import org.apache.spark.sql.{Encoder, Encoders}

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

  /** Called once per partition and micro-batch before anything else; keep the context here. */
  def init(context: ProcessorContext[K, V]): Unit = ()

  /** Called for each record, in arrival order (offset order) of its input partition. */
  def process(record: Record[K, V]): Unit

  /** Called by the schedules registered with `context.schedule(interval, type)`; `timestamp` is
    * the stream time (stream-time punctuation) or the processing time (wall-clock), in ms. */
  def punctuate(timestamp: Long): Unit = ()

  /** Called at the end of the partition's micro-batch, once per task and micro-batch. The
    * micro-batch's output is complete then: a forward here fails the query (it would be lost), and
    * the stores are out of reach (Spark has no current key; keep what `close` needs in fields). */
  def close(): Unit = ()
}

/** Makes a new [[Processor]] for each input partition; shipped to the executors, so it must be
  * serializable (a lambda is).
  *
  * {{{ val supplier: ProcessorSupplier[String, Long] = () => new Sum }}}
  */
trait ProcessorSupplier[K, V] extends Serializable {
  def get(): Processor[K, V]
}

/** One input record: key, value, timestamp (epoch ms), and where it came from (`topic` is null
  * when the input has no `topic` column).
  *
  * {{{ Record("a", 1L, timestamp = 1000L, topic = null, partition = 0, offset = 7L) }}}
  */
final case class Record[K, V](key: K, value: V, timestamp: Long, topic: String, partition: Int, offset: Long)

/** When a punctuation fires. */
sealed trait PunctuationType
object PunctuationType {

  /** When the partition's stream time (largest record timestamp so far) reaches the next multiple
    * of the interval, checked after each record; as in Kafka, `punctuate` gets the stream time and
    * boundaries passed over in one jump fire once. The first record always punctuates. */
  case object StreamTime extends PunctuationType

  /** On processing time, one `interval` after the schedule was first registered and then every
    * `interval`, run by Spark's processing-time timers; needs `process(..., wallClock = true)`. */
  case object WallClockTime extends PunctuationType
}

/** A callback for one schedule, instead of the processor's `punctuate`.
  *
  * {{{ context.schedule(Duration.ofMinutes(1), PunctuationType.WallClockTime, t => flush(t)) }}}
  */
trait Punctuator extends Serializable {
  def punctuate(timestamp: Long): Unit
}

/** What a [[Processor]] can see and do.
  *
  * {{{
  * context.forward(record.key, record.value)            // keeps the record's timestamp
  * context.schedule(Duration.ofSeconds(10), PunctuationType.StreamTime)
  * val store = context.getStateStore[String, Long]("sums")
  * }}}
  */
trait ProcessorContext[K, V] {

  /** Emits a record with the current record's timestamp (in a punctuation: the punctuation time).
    *
    * @param key
    *   the output record's key (may be null)
    * @param value
    *   the output record's value (may be null)
    */
  def forward(key: K, value: V): Unit

  /** Emits a record with the given timestamp.
    *
    * @param key
    *   the output record's key (may be null)
    * @param value
    *   the output record's value (may be null)
    * @param timestamp
    *   the output record's timestamp, epoch milliseconds
    */
  def forward(key: K, value: V, timestamp: Long): Unit

  /** Calls the processor's `punctuate` every `interval` of stream or wall-clock time. Call it from
    * `init`: schedules are numbered in the order they are registered, and their next firing time
    * is checkpointed under that number.
    *
    * {{{ context.schedule(Duration.ofSeconds(10), PunctuationType.StreamTime) }}}
    * @param interval
    *   how often, at least 1 ms
    * @param kind
    *   [[PunctuationType.StreamTime]] (by the partition's stream time) or
    *   [[PunctuationType.WallClockTime]] (by the micro-batches' processing time)
    * @throws kstreams.KStreamsException
    *   if called outside `init`, with a null `kind`, an interval under 1 ms, or a wall-clock
    *   schedule in a processor run without `wallClock = true`
    */
  def schedule(interval: Duration, kind: PunctuationType): Unit

  /** Like `schedule(interval, kind)`, calling `punctuator` instead of the processor's `punctuate`.
    *
    * @param interval
    *   how often, at least 1 ms
    * @param kind
    *   stream or wall-clock time
    * @param punctuator
    *   what to call
    * @throws kstreams.KStreamsException
    *   as `schedule(interval, kind)`
    */
  def schedule(interval: Duration, kind: PunctuationType, punctuator: Punctuator): Unit

  /** The processor's name, as given to `KStream.process` (used in error messages). */
  def processorName: String

  /** Topic of the current record (null without a `topic` column, or in a punctuation). */
  def topic: String

  /** The input partition this processor instance serves. */
  def partition: Int

  /** Offset of the current record; -1 in a punctuation. */
  def offset: Long

  /** Timestamp (ms) of the current record, or of the punctuation being run. */
  def timestamp: Long

  /** The partition's stream time (ms): largest record timestamp so far; -1 before any record. */
  def streamTime: Long

  /** Processing time (ms) of the current micro-batch, which wall-clock punctuation goes by; the
    * machine's clock when the query runs without `wallClock = true`. */
  def currentSystemTimeMs: Long

  /** The store `name` declared in `KStream.process(..., stores = Seq(Stores.keyValue(name)))`.
    *
    * @param name
    *   the store's name
    * @throws kstreams.KStreamsException
    *   if this processor did not declare a store of that name (the message lists those it did)
    */
  def getStateStore[SK, SV](name: String): KeyValueStore[SK, SV]
}

/** A key-value store scoped to the processor's input partition, kept in Spark's checkpointed
  * state store (RocksDB), so its contents survive restarts.
  *
  * {{{
  * store.put("a", 1L); store.get("a")  // Some(1L)
  * store.range("a", "m").foreach { case (k, v) => ... }
  * }}}
  */
trait KeyValueStore[K, V] {

  /** The name the store was declared with. */
  def name: String

  /** The value of `key`, if any. */
  def get(key: K): Option[V]

  /** Sets `key`'s value (a null `value` deletes it, as in Kafka Streams). */
  def put(key: K, value: V): Unit

  /** Stores `value` only when `key` has no value; returns the value that was there.
    *
    * @param key
    *   the key
    * @param value
    *   the value to store if `key` has none
    * @return
    *   `key`'s value before the call: `None` if it had none (and now has `value`)
    */
  def putIfAbsent(key: K, value: V): Option[V]

  /** Removes `key`; returns the value that was there. */
  def delete(key: K): Option[V]

  /** Entries with `from <= key <= to` (both inclusive, as in Kafka), in key order.
    *
    * @param from
    *   the smallest key returned
    * @param to
    *   the largest key returned
    * @param ordering
    *   the keys' order
    */
  def range(from: K, to: K)(implicit ordering: Ordering[K]): Iterator[(K, V)]

  /** Every entry (in the state store's order: that of the encoded keys). */
  def all(): Iterator[(K, V)]
}

/** Declares a store for `KStream.process`. Keys and values are encoded with the given Spark
  * encoders, or with Kryo when none are given.
  *
  * {{{
  * Stores.keyValue("sums")                                          // any key and value (Kryo)
  * Stores.keyValue("sums", Encoders.STRING, Encoders.scalaLong)     // typed: faster, smaller
  * }}}
  */
final case class StoreSpec private[processor] (name: String, keyEncoder: Encoder[Any], valueEncoder: Encoder[Any])

object Stores {

  /** A key-value store of any Scala values, encoded with Kryo. */
  def keyValue(name: String): StoreSpec =
    keyValue(name, Encoders.kryo[AnyRef], Encoders.kryo[AnyRef])

  /** A key-value store whose keys and values Spark encodes with `keys` and `values`.
    *
    * @param name
    *   the store's name, unique among a processor's stores; part of what the checkpoint records
    * @param keys
    *   the keys' encoder, e.g. `Encoders.STRING`
    * @param values
    *   the values' encoder, e.g. `Encoders.scalaLong`
    * @throws kstreams.KStreamsException
    *   if `name` is null or empty
    */
  def keyValue[K, V](name: String, keys: Encoder[K], values: Encoder[V]): StoreSpec = {
    if (name == null || name.isEmpty)
      throw new kstreams.KStreamsException("a store needs a name, e.g. Stores.keyValue(\"counts\")")
    StoreSpec(name, keys.asInstanceOf[Encoder[Any]], values.asInstanceOf[Encoder[Any]])
  }
}
