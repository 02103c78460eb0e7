package kstreams.processor

/** One input record: key, value, timestamp (epoch ms), and where it came from (`topic` is null
  * when the input has no `topic` column).
  *
  * @param key
  *   the key column's value (null for a null key)
  * @param value
  *   the value column's value
  * @param timestamp
  *   the record's event time, epoch ms
  * @param topic
  *   the `topic` column's value, or null without one
  * @param partition
  *   the input partition (a Kafka partition)
  * @param offset
  *   the record's offset in its partition
  *
  * {{{ Record("a", 1L, timestamp = 1000L, topic = null, partition = 0, offset = 7L) }}}
  */
final case class Record[K, V](key: K, value: V, timestamp: Long, topic: String, partition: Int, offset: Long)
