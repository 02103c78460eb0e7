package kstreams.processor

import java.time.Duration

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
