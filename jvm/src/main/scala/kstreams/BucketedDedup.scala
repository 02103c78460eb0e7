package kstreams

import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming._

/** The dedup rule of [[DeduplicateProcessor]] for state scoped to one input partition
  * (`deduplicateByKey`, `deduplicateByKeyValue`), with a time-bucketed store.
  *
  * Entries are not kept one per key in RocksDB. They are grouped by time bucket
  * (`max(interval, 1 s)` of event time) into chunks of serialized entries: per micro-batch the
  * processor reads the chunks that can hold live entries (`ts >= streamTime - interval`) into a
  * hash map once, applies the rule to every record in memory, and appends one chunk per bucket it
  * added to. So the state store sees a few reads and writes per micro-batch instead of a read and a
  * write per record, and eviction deletes whole buckets, never scanning keys.
  *
  * Why this is exact: in one partition stream time only grows, so an entry that is dead
  * (`ts < streamTime - interval`) stays dead, and reading only live buckets is the spec's purge;
  * an entry stored for a key always has a larger timestamp than any live entry of that key, so the
  * largest timestamp read for a key is its current entry.
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

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    chunks = getHandle.getMapState[Long, Array[Byte]](
      "chunks", Encoders.scalaLong, Encoders.BINARY, TTLConfig.NONE)
    chunkCounts = getHandle.getMapState[Long, Int](
      "chunkCounts", Encoders.scalaLong, Encoders.scalaInt, TTLConfig.NONE)
    streamTimes = getHandle.getMapState[Int, Long](
      "streamTimes", Encoders.scalaInt, Encoders.scalaLong, TTLConfig.NONE)
    sweeper = new Sweeper(getHandle, intervalMicros)
  }

  override def handleInputRows(
      group: Int, rows: Iterator[CompactRecord], timerValues: TimerValues): Iterator[CompactOutput] = {
    val times = new StreamTimes(streamTimes)
    var live: mutable.HashMap[ByteBuffer, Entry] = null
    val added = mutable.ArrayBuffer.empty[(ByteBuffer, Entry)]
    var lastOrder = Long.MinValue
    rows.map { r =>
      if (r.ordering < lastOrder) throw new IllegalStateException(
        s"kstreams internal error: partition ${r.partition} arrived out of order " +
          s"(${r.ordering} after $lastOrder). Please report this with the query plan.")
      lastOrder = r.ordering
      if (live == null) live = load(times.current(r.partition))
      val streamTime = times.advance(r.partition, r.timestampMicros)
      if (r.keyNull) CompactOutput(r.payload, null) // null dedup key: forward, store nothing
      else {
        val key = ByteBuffer.wrap(r.key)
        val ts = r.timestampMicros
        val liveFrom = streamTime - intervalMicros
        val entry = live.getOrElse(key, null)
        val isLive = entry != null && entry.ts >= liveFrom
        if (isLive && math.abs(entry.ts - ts) <= intervalMicros) {
          // a duplicate; the same record re-delivered after a failure is forwarded again
          if (hasOffset && r.offset != Long.MinValue && entry.offset == r.offset)
            CompactOutput(r.payload, null)
          else Dropped
        } else {
          if (ts >= liveFrom) {
            val stored = Entry(ts, r.offset)
            live.update(key, stored)
            added += key -> stored
          } else if (entry != null && !isLive) live.remove(key)
          CompactOutput(r.payload, null)
        }
      }
    } ++ {
      times.flush()
      if (added.nonEmpty) write(added, live)
      if (useTimers) sweeper.ensureArmed(timerValues)
      Iterator.empty
    }
  }

  /** The live entries: those of buckets that can hold `ts >= streamTime - interval`. */
  private def load(streamTime: Long): mutable.HashMap[ByteBuffer, Entry] = {
    val liveFrom = if (streamTime == Long.MinValue) Long.MinValue else streamTime - intervalMicros
    val live = mutable.HashMap.empty[ByteBuffer, Entry]
    chunkCounts.iterator().foreach { case (bucket, count) =>
      if (bucket * bucketMicros + bucketMicros > liveFrom) {
        (0 until count).foreach { i =>
          decode(chunks.getValue(chunkKey(bucket, i))) { (key, entry) =>
            if (entry.ts >= liveFrom) {
              val known = live.getOrElse(key, null)
              if (known == null || known.ts < entry.ts) live.update(key, entry)
            }
          }
        }
      }
    }
    live
  }

  /** Appends this batch's new entries as one chunk per bucket; a bucket with many chunks is
    * rewritten as one from the live entries (older versions of a key are dropped). */
  private def write(added: Iterable[(ByteBuffer, Entry)], live: mutable.HashMap[ByteBuffer, Entry]): Unit =
    added.groupBy { case (_, e) => Math.floorDiv(e.ts, bucketMicros) }.foreach { case (bucket, entries) =>
      val count = if (chunkCounts.containsKey(bucket)) chunkCounts.getValue(bucket) else 0
      if (count + 1 > MaxChunksPerBucket) {
        val all = live.iterator.filter { case (_, e) => Math.floorDiv(e.ts, bucketMicros) == bucket }.toSeq
        (1 until count).foreach(i => chunks.removeKey(chunkKey(bucket, i)))
        chunks.updateValue(chunkKey(bucket, 0), encode(all))
        chunkCounts.updateValue(bucket, 1)
      } else {
        chunks.updateValue(chunkKey(bucket, count), encode(entries))
        chunkCounts.updateValue(bucket, count + 1)
      }
    }

  override def handleExpiredTimer(
      group: Int, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo): Iterator[CompactOutput] = {
    sweeper.fired(timerValues, streamTimes) { streamTime =>
      val evictBelow = streamTime - intervalMicros
      val dead = chunkCounts.iterator().filter { case (bucket, _) =>
        bucket * bucketMicros + bucketMicros <= evictBelow }.toVector
      dead.foreach { case (bucket, count) =>
        (0 until count).foreach(i => chunks.removeKey(chunkKey(bucket, i)))
        chunkCounts.removeKey(bucket)
      }
      chunkCounts.exists()
    }
    Iterator.empty
  }
}

private[kstreams] object BucketedDedupProcessor {
  /** A stored record: its timestamp (micros) and offset. */
  final case class Entry(ts: Long, offset: Long)

  val MaxChunksPerBucket = 8
  private val Dropped = CompactOutput(null, ArrivalOrder.Reasons.Duplicate)

  def chunkKey(bucket: Long, chunk: Int): Long = (bucket << 20) | chunk

  def encode(entries: Iterable[(ByteBuffer, Entry)]): Array[Byte] = {
    val size = entries.iterator.map { case (k, _) => 4 + k.remaining() + 16 }.sum
    val out = ByteBuffer.allocate(size)
    entries.foreach { case (k, e) =>
      out.putInt(k.remaining()).put(k.duplicate()).putLong(e.ts).putLong(e.offset)
    }
    out.array()
  }

  def decode(bytes: Array[Byte])(f: (ByteBuffer, Entry) => Unit): Unit = {
    val in = ByteBuffer.wrap(bytes)
    while (in.hasRemaining) {
      val key = new Array[Byte](in.getInt())
      in.get(key)
      f(ByteBuffer.wrap(key), Entry(in.getLong(), in.getLong()))
    }
  }
}
