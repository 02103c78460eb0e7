package kstreams.processor

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
