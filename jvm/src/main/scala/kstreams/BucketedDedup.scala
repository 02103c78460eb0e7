package kstreams

import java.nio.ByteBuffer
import java.util.Arrays

import scala.collection.mutable

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming._
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.hash.Murmur3_x86_32

/** The dedup rule of [[DeduplicateProcessor]] for state scoped to one input partition
  * (`deduplicateByKey`, `deduplicateByKeyValue`), with a time-bucketed store.
  *
  * Entries are not kept one per key in RocksDB. They are grouped by time bucket
  * (`max(interval, 1 s)` of event time) into chunks of serialized entries: per micro-batch the
  * processor reads the chunks that can hold live entries (`ts >= streamTime - interval`) into an
  * in-memory map once, applies the rule to every record in memory, and at the end writes one
  * chunk per bucket with the entries that are still live. So the state store sees a few reads and
  * writes per micro-batch instead of a read and a write per record, an entry that died inside the
  * micro-batch is never written at all, and eviction deletes whole buckets, never scanning keys:
  * as the group's stream time passes them (like Kafka's segments) and, for a partition that went
  * idle, by one [[Sweeper]] timer per group every `max(interval, 10 min)` of watermark.
  *
  * Why this is exact: in one partition stream time only grows, so an entry that is dead
  * (`ts < streamTime - interval`) stays dead, and reading or writing only live entries is the
  * spec's purge; an entry stored for a key always has a larger timestamp than any live entry of
  * that key, so the largest timestamp read for a key is its current entry.
  *
  * Output: forwarded records, then one row per micro-batch with the number of duplicates dropped
  * (not one marker row per dropped record), read by [[ArrivalOrder.finishCounted]].
  */
private[kstreams] final class BucketedDedupProcessor(
    intervalMicros: Long, hasOffset: Boolean, useTimers: Boolean)
    extends StatefulProcessor[Int, CompactRecord, CompactOutput] {

  import BucketedDedupProcessor._

  private val bucketMicros = math.max(intervalMicros, 1000000L)

  @transient private var chunks: MapState[Long, Array[Byte]] = _
  @transient private var chunkCounts: MapState[Long, Int] = _
  @transient private var streamTimes: MapState[Int, Long] = _
  @transient private var sweeper: Sweeper = _
  // one map for all groups of a task, cleared per group: it keeps the size it grew to
  @transient private lazy val live = new EntryMap

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    chunks = getHandle.getMapState[Long, Array[Byte]](
      "chunks", Encoders.scalaLong, Encoders.BINARY, TTLConfig.NONE)
    chunkCounts = getHandle.getMapState[Long, Int](
      "chunkCounts", Encoders.scalaLong, Encoders.scalaInt, TTLConfig.NONE)
    streamTimes = getHandle.getMapState[Int, Long](
      "streamTimes", Encoders.scalaInt, Encoders.scalaLong, TTLConfig.NONE)
    sweeper = new Sweeper(getHandle, math.max(intervalMicros, IdleSweepMicros))
  }

  override def handleInputRows(
      group: Int, rows: Iterator[CompactRecord], timerValues: TimerValues): Iterator[CompactOutput] = {
    val times = new StreamTimes(streamTimes)
    var loaded = false
    var partition = 0
    var streamTime = Long.MinValue // of the group's one partition: kept here, stored once
    var duplicates = 0L
    var lastOrder = Long.MinValue
    val forwarded = rows.filter { r =>
      if (r.ordering < lastOrder) throw new IllegalStateException(
        s"kstreams internal error: partition ${r.partition} arrived out of order " +
          s"(${r.ordering} after $lastOrder). Please report this with the query plan.")
      lastOrder = r.ordering
      if (!loaded) {
        partition = r.partition; streamTime = times.current(partition); load(streamTime); loaded = true
      }
      if (r.timestampMicros > streamTime) streamTime = r.timestampMicros
      val forward = r.keyNull || shouldForward(r, streamTime - intervalMicros)
      if (!forward) duplicates += 1
      forward
    }.map(r => CompactOutput(r.payload, null, 1L))
    forwarded ++ {
      if (loaded) {
        times.advance(partition, streamTime)
        times.flush()
        write(streamTime - intervalMicros)
      }
      if (useTimers) sweeper.ensureArmed(timerValues)
      if (duplicates > 0) Iterator.single(CompactOutput(null, ArrivalOrder.Reasons.Duplicate, duplicates))
      else Iterator.empty
    }
  }

  /** The spec's rule for a record with a non-null key; updates the in-memory entries. */
  private def shouldForward(r: CompactRecord, liveFrom: Long): Boolean = {
    val ts = r.timestampMicros
    val slot = live.slotOf(r.key)
    val isLive = live.occupied(slot) && live.ts(slot) >= liveFrom
    if (isLive && math.abs(live.ts(slot) - ts) <= intervalMicros) {
      // a duplicate; the same record re-delivered after a failure is forwarded again
      hasOffset && r.offset != Long.MinValue && live.offset(slot) == r.offset
    } else {
      // a late record is forwarded and not stored; a dead entry is simply never written back
      if (ts >= liveFrom) live.set(slot, r.key, ts, r.offset, added = true)
      true
    }
  }

  /** Reads the live entries into [[live]]: those of buckets that can hold
    * `ts >= streamTime - interval`. Buckets that cannot are deleted on the way (Kafka's segment
    * drop as stream time advances). */
  private def load(streamTime: Long): Unit = {
    val liveFrom = if (streamTime == Long.MinValue) Long.MinValue else streamTime - intervalMicros
    live.clear()
    chunkCounts.iterator().toVector.foreach { case (bucket, count) =>
      if (bucket * bucketMicros + bucketMicros <= liveFrom) removeBucket(bucket, count)
      else {
        (0 until count).foreach { i =>
          decode(chunks.getValue(chunkKey(bucket, i))) { (key, ts, offset) =>
            if (ts >= liveFrom) {
              val slot = live.slotOf(key)
              if (!live.occupied(slot) || live.ts(slot) < ts) live.set(slot, key, ts, offset, added = false)
            }
          }
        }
      }
    }
  }

  /** Appends the entries this micro-batch added and that are still live (`ts >= liveFrom`) as one
    * chunk per bucket; a bucket with many chunks is rewritten as one from all its live entries. */
  private def write(liveFrom: Long): Unit = {
    val added = mutable.LongMap.empty[mutable.ArrayBuffer[Int]]
    live.slots.foreach { slot =>
      if (live.added(slot) && live.ts(slot) >= liveFrom)
        added.getOrElseUpdate(Math.floorDiv(live.ts(slot), bucketMicros), mutable.ArrayBuffer.empty) += slot
    }
    added.foreach { case (bucket, slots) =>
      val count = if (chunkCounts.containsKey(bucket)) chunkCounts.getValue(bucket) else 0
      if (count + 1 > MaxChunksPerBucket) {
        val all = live.slots.filter(s =>
          live.ts(s) >= liveFrom && Math.floorDiv(live.ts(s), bucketMicros) == bucket).toVector
        (1 until count).foreach(i => chunks.removeKey(chunkKey(bucket, i)))
        chunks.updateValue(chunkKey(bucket, 0), encode(live, all))
        chunkCounts.updateValue(bucket, 1)
      } else {
        chunks.updateValue(chunkKey(bucket, count), encode(live, slots))
        chunkCounts.updateValue(bucket, count + 1)
      }
    }
  }

  private def removeBucket(bucket: Long, count: Int): Unit = {
    (0 until count).foreach(i => chunks.removeKey(chunkKey(bucket, i)))
    chunkCounts.removeKey(bucket)
  }

  override def handleExpiredTimer(
      group: Int, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo): Iterator[CompactOutput] = {
    sweeper.fired(timerValues, streamTimes) { streamTime =>
      val evictBelow = streamTime - intervalMicros
      val dead = chunkCounts.iterator().filter { case (bucket, _) =>
        bucket * bucketMicros + bucketMicros <= evictBelow }.toVector
      dead.foreach { case (bucket, count) => removeBucket(bucket, count) }
      chunkCounts.exists()
    }
    Iterator.empty
  }
}

private[kstreams] object BucketedDedupProcessor {
  val MaxChunksPerBucket = 8

  /** How often (in watermark time) the timer sweeps a group: at least every 10 minutes. A group
    * that gets records drops its dead buckets as it reads them, so the timer is only for
    * partitions that went idle; a per-interval timer cost about a fifth of the throughput when
    * the watermark moves by minutes per micro-batch (benchmarks/RESULTS.md). */
  val IdleSweepMicros: Long = 10L * 60 * 1000 * 1000

  def chunkKey(bucket: Long, chunk: Int): Long = (bucket << 20) | chunk

  /** Entries as `[key length][key][timestamp][offset]`, one after the other. */
  def encode(live: EntryMap, slots: Iterable[Int]): Array[Byte] = {
    val out = ByteBuffer.allocate(slots.iterator.map(s => 4 + live.key(s).length + 16).sum)
    slots.foreach(s => out.putInt(live.key(s).length).put(live.key(s)).putLong(live.ts(s)).putLong(live.offset(s)))
    out.array()
  }

  def decode(bytes: Array[Byte])(f: (Array[Byte], Long, Long) => Unit): Unit = {
    val in = ByteBuffer.wrap(bytes)
    while (in.hasRemaining) {
      val key = new Array[Byte](in.getInt())
      in.get(key)
      f(key, in.getLong(), in.getLong())
    }
  }

  /** Dedup key bytes -> (timestamp, offset, added this micro-batch), open addressing in flat
    * arrays: the per-record lookup is a hash of the key's bytes and an array probe, no boxing and
    * no allocation. Keys are never removed (dead entries are ignored by timestamp). */
  final class EntryMap {
    private var capacity = 1024
    private var keys = new Array[Array[Byte]](capacity)
    private var hashes = new Array[Int](capacity)
    private var timestamps = new Array[Long](capacity)
    private var offsets = new Array[Long](capacity)
    private var addedFlags = new Array[Boolean](capacity)
    private var size = 0

    def key(slot: Int): Array[Byte] = keys(slot)
    def ts(slot: Int): Long = timestamps(slot)
    def offset(slot: Int): Long = offsets(slot)
    def added(slot: Int): Boolean = addedFlags(slot)
    def slots: Iterator[Int] = Iterator.range(0, capacity).filter(keys(_) != null)

    private var lastHash = 0

    /** The slot of `key`: the one holding it, or the free one where it would go ([[occupied]]
      * tells which). Hashes the key once for the [[set]] that may follow. */
    def slotOf(key: Array[Byte]): Int = { lastHash = hash(key); probe(key, lastHash) }

    def occupied(slot: Int): Boolean = keys(slot) != null

    def clear(): Unit = if (size > 0) { Arrays.fill(keys.asInstanceOf[Array[AnyRef]], null); size = 0 }

    /** Sets `key`'s entry at `slot`, which [[slotOf]]`(key)` just returned. */
    def set(slot: Int, key: Array[Byte], ts: Long, offset: Long, added: Boolean): Unit = {
      var at = slot
      if (keys(at) == null) {
        if ((size + 1) * 2 > capacity) { grow(); at = probe(key, lastHash) }
        keys(at) = key; hashes(at) = lastHash; size += 1
      }
      timestamps(at) = ts; offsets(at) = offset; addedFlags(at) = added
    }

    private def hash(key: Array[Byte]): Int =
      Murmur3_x86_32.hashUnsafeBytes(key, Platform.BYTE_ARRAY_OFFSET, key.length, 42)

    private def probe(key: Array[Byte], h: Int): Int = {
      val mask = capacity - 1
      var slot = h & mask
      while (keys(slot) != null && !(hashes(slot) == h && Arrays.equals(keys(slot), key)))
        slot = (slot + 1) & mask
      slot
    }

    private def grow(): Unit = {
      val (oldKeys, oldHashes, oldTs, oldOffsets, oldAdded) = (keys, hashes, timestamps, offsets, addedFlags)
      capacity *= 2
      keys = new Array[Array[Byte]](capacity); hashes = new Array[Int](capacity)
      timestamps = new Array[Long](capacity); offsets = new Array[Long](capacity)
      addedFlags = new Array[Boolean](capacity)
      var i = 0
      while (i < oldKeys.length) {
        if (oldKeys(i) != null) {
          val slot = probe(oldKeys(i), oldHashes(i))
          keys(slot) = oldKeys(i); hashes(slot) = oldHashes(i); timestamps(slot) = oldTs(i)
          offsets(slot) = oldOffsets(i); addedFlags(slot) = oldAdded(i)
        }
        i += 1
      }
    }
  }
}
