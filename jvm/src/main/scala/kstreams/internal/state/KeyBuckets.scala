package kstreams
package internal
package state

import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.streaming.StatefulProcessorHandle

import kstreams.internal.dedup.TimeBucketChunks

/** Keys (serialized) listed under time buckets, for a processor group that keeps many keys' state
  * in map states ([[kstreams.internal.plan.TaskClocks]]): which keys to visit once the stream time
  * passes a time, reading only the keys of the buckets it passed, never all keys. A key may be
  * listed more than once (under several buckets, or twice under one); the caller checks what it
  * finds. State: the map states of [[TimeBucketChunks]] under `name`.
  *
  * {{{
  *   expiries.add(expiryMicros, keyBytes)    // while the micro-batch runs
  *   expiries.flush()                        // one chunk per bucket and micro-batch
  *   expiries.removeDead(evictBefore)(key => ...)
  * }}}
  */
private[kstreams] final class KeyBuckets(handle: StatefulProcessorHandle, bucketMicros: Long, name: String) {
  private val chunks = new TimeBucketChunks(handle, bucketMicros, name = name)
  private val added = mutable.HashMap.empty[Long, mutable.LinkedHashSet[ByteBuffer]]

  /** Lists `key` under the bucket of `timeMicros` (written by [[flush]]). */
  def add(timeMicros: Long, key: ByteBuffer): Unit =
    added.getOrElseUpdate(chunks.bucketOf(timeMicros), mutable.LinkedHashSet.empty) += key

  /** Writes what [[add]] listed since the last flush. */
  def flush(): Unit = {
    added.foreach { case (bucket, keys) => chunks.append(bucket, encode(keys.toSeq))(reencode) }
    added.clear()
  }

  /** Deletes the buckets whose every time is before `before`, handing each key they list to `visit`
    * (once per bucket chunk it is in). */
  def removeDead(before: Long)(visit: ByteBuffer => Unit): Unit =
    chunks.removeDead(before)(chunk => decode(chunk).foreach(visit))

  private def encode(keys: Seq[ByteBuffer]): Seq[Array[Byte]] =
    TimeBucketChunks.encodeChunks(keys.size)(i => 4 + keys(i).remaining()) { (out: ByteBuffer, i: Int) =>
      out.putInt(keys(i).remaining())
      out.put(keys(i).duplicate())
    }

  private def decode(chunk: Array[Byte]): Seq[ByteBuffer] = {
    val in = ByteBuffer.wrap(chunk)
    val keys = Vector.newBuilder[ByteBuffer]
    while (in.hasRemaining) {
      val bytes = new Array[Byte](in.getInt())
      in.get(bytes)
      keys += ByteBuffer.wrap(bytes)
    }
    keys.result()
  }

  /** A bucket's chunks rewritten with each key once (its chunk numbers ran out). */
  private def reencode(chunks: Seq[Array[Byte]]): Seq[Array[Byte]] = encode(chunks.flatMap(decode).distinct)
}
