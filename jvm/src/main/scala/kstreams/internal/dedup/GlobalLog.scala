package kstreams
package internal
package dedup

import java.nio.ByteBuffer

/** One record of the log: an entry write (numbered `seq`) or a tombstone voiding the id's writes
  * numbered below `seq`. */
private[kstreams] final case class LogRecord(
    isTombstone: Boolean,
    key: Array[Byte],
    seq: Long,
    timestampMicros: Long,
    partition: Int,
    offset: Long)

private[kstreams] object LogRecord {
  def write(s: Slot, seq: Long): LogRecord =
    LogRecord(isTombstone = false, s.key, seq, s.timestampMicros, s.partition, s.offset)
  def tombstone(key: Array[Byte], voidBelow: Long): LogRecord =
    LogRecord(isTombstone = true, key, voidBelow, 0L, 0, 0L)
}

/** The global store's log and id lists as bytes, in chunks of at most
  * [[TimeBucketChunks.MaxChunkBytes]] ([[GlobalDedupProcessor]] keeps them in [[TimeBucketChunks]]). */
private[kstreams] object GlobalLog {

  /** Log records as `[tombstone 0/1][key length][key][seq][timestamp][partition][offset]`, in
    * chunks of at most [[TimeBucketChunks.MaxChunkBytes]]. */
  def encodeLog(records: Iterator[LogRecord]): Seq[Array[Byte]] = {
    val all = records.toIndexedSeq
    TimeBucketChunks.encodeChunks(all.size)(i => 1 + 4 + all(i).key.length + 28) { (out, i) =>
      val r = all(i)
      out.put((if (r.isTombstone) 1 else 0).toByte).putInt(r.key.length).put(r.key)
      out.putLong(r.seq).putLong(r.timestampMicros).putInt(r.partition).putLong(r.offset)
    }
  }

  def decodeLog(bytes: Array[Byte])(f: LogRecord => Unit): Unit = {
    val in = ByteBuffer.wrap(bytes)
    while (in.hasRemaining) {
      val tombstone = in.get() == 1
      val key = new Array[Byte](in.getInt())
      in.get(key)
      f(LogRecord(tombstone, key, in.getLong(), in.getLong(), in.getInt(), in.getLong()))
    }
  }

  /** Ids as `[length][bytes]`, one after the other, in chunks of at most
    * [[TimeBucketChunks.MaxChunkBytes]]. */
  def encodeKeys(keys: Seq[Array[Byte]]): Seq[Array[Byte]] = {
    val all = keys.toIndexedSeq
    TimeBucketChunks.encodeChunks(all.size)(i => 4 + all(i).length)((out, i) => out.putInt(all(i).length).put(all(i)))
  }

  def decodeKeys(bytes: Array[Byte])(f: Array[Byte] => Unit): Unit = {
    val in = ByteBuffer.wrap(bytes)
    while (in.hasRemaining) {
      val key = new Array[Byte](in.getInt())
      in.get(key)
      f(key)
    }
  }
}
