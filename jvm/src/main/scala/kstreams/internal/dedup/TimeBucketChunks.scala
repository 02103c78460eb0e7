package kstreams
package internal
package dedup

import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}

/** Which entries a dedup store wrote under which time bucket, so that eviction reads only the
  * entries of buckets that died (Kafka's segment drop as stream time advances), never all keys.
  * Both dedup stores keep their index here ([[PerPartitionDedupProcessor]], [[GlobalDedupProcessor]]);
  * what a chunk holds is theirs to encode.
  *
  * A bucket is `bucketMicros` of event time. Each micro-batch appends its entries of a bucket as
  * new chunks (one RocksDB value each, at most [[TimeBucketChunks.MaxChunkBytes]]), so a
  * write never reads or rewrites what a bucket already holds. Two map states, named `chunks` and
  * `chunkCounts` (or `<name>` and `<name>` without its last `s` plus `Counts`, for a processor that
  * keeps two indexes): chunk key ([[TimeBucketChunks.chunkKey]]) -> bytes, and bucket -> number of
  * chunks. With `countsInChunks` (the per-partition dedup's layout 2, [[PerPartitionGroupValues]])
  * the counts are one value of the `chunks` map instead (under [[TimeBucketChunks.CountsKey]]: one
  * state variable fewer for every task to build, issue 33), read whole and rewritten whole. A group
  * usually has about two live buckets (`max(interval, 1 s)` wide), but one whose interval grew on a
  * restart keeps the first interval's width (up to 86,400 buckets from 1 s to 1 day): so changes of
  * many buckets at once ([[batched]]: a micro-batch's appends, an eviction) read and write the
  * counts once, not once per bucket.
  *
  * {{{
  *   val buckets = new TimeBucketChunks(getHandle, bucketMicros)
  *   buckets.append(buckets.bucketOf(ts), encoded)(compact)
  *   buckets.deadBuckets(evictBelow).foreach { case (b, n) => buckets.remove(b, n, Some(forgetEntries)) }
  * }}}
  */
private[kstreams] final class TimeBucketChunks(
    handle: StatefulProcessorHandle,
    bucketMicros: Long,
    maxChunksPerBucket: Int = TimeBucketChunks.MaxChunksPerBucket,
    name: String = "chunks",
    countsInChunks: Boolean = false) {
  import TimeBucketChunks._

  private val chunks: MapState[Long, Array[Byte]] =
    handle.getMapState[Long, Array[Byte]](name, Encoders.scalaLong, Encoders.BINARY, TTLConfig.NONE)
  private val chunkCounts: BucketCounts =
    if (countsInChunks) new CountsInChunks
    else
      new CountsInMap(
        handle.getMapState[Long, Int](
          name.stripSuffix("s") + "Counts",
          Encoders.scalaLong,
          Encoders.scalaInt,
          TTLConfig.NONE))

  def bucketOf(timestampMicros: Long): Long = Math.floorDiv(timestampMicros, bucketMicros)

  /** The first timestamp after `bucket`. */
  def bucketEnd(bucket: Long): Long = bucket * bucketMicros + bucketMicros

  /** Appends `encoded` chunks to `bucket`. A bucket out of chunk numbers (a long interval's one bucket
    * gets a few chunks per micro-batch: hundreds of thousands of micro-batches) is rewritten whole as
    * `compact(its chunks and these)`, which should hold each entry once. */
  def append(bucket: Long, encoded: Seq[Array[Byte]])(compact: Seq[Array[Byte]] => Seq[Array[Byte]]): Unit = {
    val count = countOf(bucket)
    if (count + encoded.size > maxChunksPerBucket)
      replace(bucket, count, compact(chunksOf(bucket, count).toVector ++ encoded))
    else write(bucket, count, encoded)
  }

  /** Replaces `bucket`'s chunks with `rewrite(its chunks)` (the bucket is deleted if that is empty). */
  def rewrite(bucket: Long)(rewrite: Seq[Array[Byte]] => Seq[Array[Byte]]): Unit = {
    val count = countOf(bucket)
    if (count > 0) {
      val rewritten = rewrite(chunksOf(bucket, count).toVector)
      if (rewritten.isEmpty) remove(bucket, count, None) else replace(bucket, count, rewritten)
    }
  }

  private def countOf(bucket: Long): Int = chunkCounts.get(bucket)

  private def replace(bucket: Long, count: Int, rewritten: Seq[Array[Byte]]): Unit = {
    (0 until count).foreach(i => chunks.removeKey(chunkKey(bucket, i)))
    write(bucket, 0, rewritten)
  }

  /** One number the store's owner keeps beside the buckets (the per-partition dedup: the run whose
    * interval its entries were last judged under), in the `chunks` map under [[TagKey]], which no bucket's chunk
    * can have; so no state variable is added (each costs its construction in every task: issue 33)
    * and a store that never sets it is laid out as before. */
  def tag: Option[Long] = reserved(TagKey).map(bytes => ByteBuffer.wrap(bytes).getLong())

  def tag_=(value: Option[Long]): Unit = setReserved(TagKey, value.map(v => ByteBuffer.allocate(8).putLong(v).array()))

  /** The owner's small values packed into one (the per-partition dedup's layout 2,
    * [[PerPartitionGroupValues]]), in the `chunks` map under [[MetaKey]], as the tag is. */
  def meta: Option[Array[Byte]] = reserved(MetaKey)

  def meta_=(value: Option[Array[Byte]]): Unit = setReserved(MetaKey, value)

  private def reserved(key: Long): Option[Array[Byte]] = Option(chunks.getValue(key))

  private def setReserved(key: Long, value: Option[Array[Byte]]): Unit = value match {
    case Some(bytes) => chunks.updateValue(key, bytes)
    case None => if (chunks.containsKey(key)) chunks.removeKey(key)
  }

  private def write(bucket: Long, from: Int, encoded: Seq[Array[Byte]]): Unit = {
    encoded.zipWithIndex.foreach { case (chunk, i) => chunks.updateValue(chunkKey(bucket, from + i), chunk) }
    chunkCounts.set(bucket, from + encoded.size)
  }

  private def chunksOf(bucket: Long, count: Int): Iterator[Array[Byte]] =
    Iterator.range(0, count).map(i => chunks.getValue(chunkKey(bucket, i)))

  /** Every chunk of every bucket, read lazily. */
  def all(): Iterator[Array[Byte]] =
    chunkCounts.all().iterator.flatMap { case (bucket, count) => chunksOf(bucket, count) }

  /** The buckets (with their chunk counts) whose every entry has `ts < evictBelow`. */
  def deadBuckets(evictBelow: Long): Vector[(Long, Int)] =
    chunkCounts.all().filter { case (bucket, _) => bucketEnd(bucket) <= evictBelow }

  /** Deletes `bucket` (of `count` chunks, from [[deadBuckets]]), handing each chunk to `read`
    * first if given (reading costs a RocksDB get per chunk). */
  def remove(bucket: Long, count: Int, read: Option[Array[Byte] => Unit]): Unit = removeAll(Seq(bucket -> count), read)

  /** [[remove]] of each of `dead`, with one change of the counts. */
  def removeAll(dead: Seq[(Long, Int)], read: Option[Array[Byte] => Unit]): Unit = batched {
    dead.foreach { case (bucket, count) =>
      (0 until count).foreach { i =>
        val key = chunkKey(bucket, i)
        read.foreach(f => f(chunks.getValue(key)))
        chunks.removeKey(key)
      }
      chunkCounts.remove(bucket)
    }
  }

  /** Runs `body`, whose changes of the chunk counts are written once at its end (with
    * `countsInChunks`; without, each is a RocksDB write anyway). `body` must not return a lazy
    * iterator that changes them later. */
  def batched[T](body: => T): T = chunkCounts match {
    case packed: CountsInChunks => packed.batched(body)
    case _ => body
  }

  /** Deletes every bucket whose every entry has `ts < evictBelow`, handing each chunk to `read`
    * first. */
  def removeDead(evictBelow: Long)(read: Array[Byte] => Unit): Unit = removeAll(deadBuckets(evictBelow), Some(read))

  def nonEmpty: Boolean = chunkCounts.nonEmpty

  /** Deletes every bucket. */
  def clear(): Unit = removeAll(chunkCounts.all(), None)

  /** Bucket -> its number of chunks (0: none). */
  private sealed trait BucketCounts {
    def get(bucket: Long): Int
    def set(bucket: Long, count: Int): Unit
    def remove(bucket: Long): Unit
    def all(): Vector[(Long, Int)]
    def nonEmpty: Boolean
  }

  private final class CountsInMap(counts: MapState[Long, Int]) extends BucketCounts {
    def get(bucket: Long): Int = if (counts.containsKey(bucket)) counts.getValue(bucket) else 0
    def set(bucket: Long, count: Int): Unit = counts.updateValue(bucket, count)
    def remove(bucket: Long): Unit = counts.removeKey(bucket)
    def all(): Vector[(Long, Int)] = counts.iterator().toVector
    def nonEmpty: Boolean = counts.exists()
  }

  /** `[bucket][count]` pairs one after the other under [[CountsKey]] (absent: none). */
  private final class CountsInChunks extends BucketCounts {

    /** Inside [[batched]]: the counts, written back at its end; null outside. (State operations
      * act on the grouping key of the call they run in, so the counts are never held across
      * calls.) */
    private var open: mutable.LongMap[Int] = null

    private def read(): mutable.LongMap[Int] = {
      val counts = mutable.LongMap.empty[Int]
      reserved(CountsKey).foreach { bytes =>
        val in = ByteBuffer.wrap(bytes)
        while (in.hasRemaining) counts(in.getLong()) = in.getInt()
      }
      counts
    }

    private def write(counts: mutable.LongMap[Int]): Unit =
      setReserved(
        CountsKey,
        if (counts.isEmpty) None
        else {
          val out = ByteBuffer.allocate(12 * counts.size)
          counts.foreach { case (bucket, count) => out.putLong(bucket).putInt(count) }
          Some(out.array())
        }
      )

    private def change(f: mutable.LongMap[Int] => Unit): Unit =
      if (open != null) f(open)
      else { val counts = read(); f(counts); write(counts) }

    def batched[T](body: => T): T =
      if (open != null) body
      else {
        open = read()
        try { val result = body; write(open); result }
        finally open = null
      }

    def get(bucket: Long): Int = (if (open != null) open else read()).getOrElse(bucket, 0)
    def set(bucket: Long, count: Int): Unit = change(_.update(bucket, count))
    def remove(bucket: Long): Unit = change(_.remove(bucket))
    def all(): Vector[(Long, Int)] = (if (open != null) open else read()).toVector
    def nonEmpty: Boolean = if (open != null) open.nonEmpty else chunks.containsKey(CountsKey)
  }
}

private[kstreams] object TimeBucketChunks {

  /** Chunk numbers per bucket (the low 20 bits of a chunk key). */
  val MaxChunksPerBucket: Int = 1 << 20

  /** Bytes per chunk at most (unless one entry is larger): small enough that a chunk is never a
    * humongous object for G1 (half a region: 512 KB in the smallest heaps), whose allocation starts
    * a concurrent collection, and that a catch-up micro-batch's megabytes of entries still make a
    * few hundred RocksDB values at most. */
  val MaxChunkBytes: Int = 256 * 1024

  /** Writes entry `entry` of what [[encodeChunks]] encodes (a trait, not a function: a `Function2`
    * with an object parameter is not specialized, so it would box every entry's index). */
  trait EntryWriter {
    def put(out: ByteBuffer, entry: Int): Unit
  }

  /** Entries `0 until count` one after the other in chunks of at most [[MaxChunkBytes]]:
    * `bytesOf(i)` is entry i's encoded size, `writer` writes it. The one chunking rule of both dedup
    * stores; what an entry holds is theirs. */
  def encodeChunks(count: Int)(bytesOf: Int => Int)(writer: EntryWriter): Seq[Array[Byte]] = {
    val chunks = Vector.newBuilder[Array[Byte]]
    var from = 0
    while (from < count) {
      var (until, bytes, full) = (from, 0, false)
      while (until < count && !full) {
        val size = bytesOf(until) // each entry's size computed once
        if (until == from || bytes + size <= MaxChunkBytes) { bytes += size; until += 1 }
        else full = true
      }
      val out = ByteBuffer.allocate(bytes)
      var i = from
      while (i < until) { writer.put(out, i); i += 1 }
      chunks += out.array()
      from = until
    }
    chunks.result()
  }

  def chunkKey(bucket: Long, chunk: Int): Long = (bucket << 20) | chunk

  /** The `chunks` keys below this are not chunks but values ([[TagKey]], [[MetaKey]], [[CountsKey]]): a
    * chunk's key is at least `bucket << 20` of the bucket of year 1 (Spark's earliest timestamp),
    * far above this. */
  val ReservedBelow: Long = Long.MinValue + 16

  /** The `chunks` key of [[TimeBucketChunks.tag]]. */
  val TagKey: Long = Long.MinValue

  /** The `chunks` key of [[TimeBucketChunks.meta]]. */
  val MetaKey: Long = Long.MinValue + 1

  /** The `chunks` key of the chunk counts, for a store that keeps them there (`countsInChunks`). */
  val CountsKey: Long = Long.MinValue + 2
}
