package kstreams.processor

/** One input record: key, value, timestamp (epoch ms), and where it came from (`topic` is null
  * when the input has no `topic` column).
  *
  * {{{ Record("a", 1L, timestamp = 1000L, topic = null, partition = 0, offset = 7L) }}}
  */
final case class Record[K, V](key: K, value: V, timestamp: Long, topic: String, partition: Int, offset: Long)
