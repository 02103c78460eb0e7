package kstreams
package internal
package dedup

import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming._

import kstreams.internal.plan._
import kstreams.internal.state._

/** One record of `deduplicate` as the spread global store reads it ([[GlobalDedupProcessor]]):
  * a [[CompactRecord]] plus the id's hash `group` and `streamTimeMicros`, the largest timestamp of
  * its partition among the micro-batch's records up to and including this one.
  *
  * A *marker* (`marker = true`, no key or payload) tells one group the largest timestamp of one
  * partition in this micro-batch (`timestampMicros`), so that every group knows every partition's
  * stream time at the start of the next one, also when none of that partition's records hashed
  * to it.
  */
private[kstreams] final case class SpreadRecord(
    group: Int,
    partition: Int,
    ordering: Long,
    timestampMicros: Long,
    streamTimeMicros: Long,
    offset: Long,
    keyNull: Boolean,
    key: Array[Byte],
    payload: Array[Byte],
    marker: Boolean)

private[kstreams] object SpreadRecord {

  /** Number of id hash groups of `deduplicate`: the unit of its state, so part of every
    * checkpoint (changing it needs a new checkpoint; the processor checks). 64 groups keep up to
    * 64 tasks busy and cost 64 marker rows per input partition and micro-batch. */
  val Groups = 64

  /** Fills in `streamTimeMicros` of records that arrive by partition in arrival order (one
    * partition's records together), and after each partition's records adds one marker per group
    * with the partition's largest timestamp. Runs in the first of the two shuffles of
    * `deduplicate`: by partition, then by id. */
  def withStreamTimes(groups: Int)(records: Iterator[SpreadRecord]): Iterator[SpreadRecord] = {
    var partition = 0
    var maxMicros = Long.MinValue
    var started = false
    def markers(p: Int, tsMicros: Long): Iterator[SpreadRecord] = Iterator
      .range(0, groups)
      .map(g =>
        SpreadRecord(g, p, Long.MaxValue, tsMicros, tsMicros, Long.MinValue, keyNull = true, null, null, marker = true))
    records.flatMap { r =>
      val before = if (started && r.partition != partition) markers(partition, maxMicros) else Iterator.empty
      if (!started || r.partition != partition) {
        partition = r.partition; maxMicros = Long.MinValue; started = true
      }
      maxMicros = math.max(maxMicros, r.timestampMicros)
      before ++ Iterator.single(r.copy(streamTimeMicros = maxMicros))
    } ++ (if (started) markers(partition, maxMicros) else Iterator.empty)
  }
}

/** The global store of `deduplicate` (spec section 2: one entry per id over all partitions, each
  * record judged by its own partition's stream time), spread over [[SpreadRecord.Groups]] groups
  * by a hash of the id, so over all state partitions instead of one task.
  *
  * Why the spread is exact: a record's decision depends only on the id's entry and on the
  * record's own partition's stream time `S`. Every record of an id goes to the same group, in the
  * order the single-group store saw them (micro-batch, then partition, then offset). `S` is the
  * partition's stream time at the micro-batch's start, which each group keeps for every partition
  * from the markers, and the largest timestamp of the partition's records of this micro-batch up
  * to this one, computed before the records are spread ([[SpreadRecord.withStreamTimes]]).
  *
  * State, per group:
  *  - `entries`: id bytes -> [[GlobalDedupEntry]] of the record that was forwarded (the truth,
  *    read once per id and micro-batch, written once per changed id at its end);
  *  - [[TimeBucketChunks]]: which ids were written under which time bucket (`max(interval, 1 s)`
  *    of event time), so eviction reads only the ids of buckets that died, never all ids;
  *  - `streamTimes`: every partition's stream time; `groups`: the group count the state was
  *    written with.
  *
  * Unlike in one partition, an id's entry can be replaced by one with a smaller timestamp (a slow
  * partition storing an id a fast one stored long before), and purged by a partition for which it
  * is dead while it is live for another. Both are fine here: eviction removes an id only if its
  * current entry in `entries` is dead, and an entry is written under its own bucket each time.
  * Eviction removes entries dead for every partition the group knows (`ts < slowest stream time
  * - interval`) when a micro-batch starts, and, by a timer, those behind the watermark (spec
  * section 8).
  */
private[kstreams] final class GlobalDedupProcessor(
    intervalMicros: Long,
    hasOffset: Boolean,
    useTimers: Boolean,
    memorySetting: Long,
    lateRecords: LateRecords)
    extends StatefulProcessor[Int, SpreadRecord, CompactOutput] {

  import GlobalDedupProcessor._

  private val bucketMicros = math.max(intervalMicros, 1000000L)

  @transient private var entries: MapState[Array[Byte], GlobalDedupEntry] = _
  @transient private var buckets: TimeBucketChunks = _
  @transient private var streamTimes: MapState[Int, Long] = _
  @transient private var groups: ValueState[Int] = _
  @transient private var sweeper: Sweeper = _
  @transient private lazy val budgetBytes = DedupCaches.budgetBytes(memorySetting)

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    entries = getHandle.getMapState[Array[Byte], GlobalDedupEntry](
      "entries",
      Encoders.BINARY,
      Encoders.product[GlobalDedupEntry],
      TTLConfig.NONE)
    buckets = new TimeBucketChunks(getHandle, bucketMicros)
    streamTimes = getHandle.getMapState[Int, Long]("streamTimes", Encoders.scalaInt, Encoders.scalaLong, TTLConfig.NONE)
    groups = getHandle.getValueState[Int]("groups", Encoders.scalaInt, TTLConfig.NONE)
    sweeper = new Sweeper(getHandle, math.max(intervalMicros, PerPartitionDedupProcessor.IdleSweepMicros))
  }

  override def handleInputRows(
      group: Int,
      rows: Iterator[SpreadRecord],
      timerValues: TimerValues): Iterator[CompactOutput] = {
    checkLayout(group)
    val times = new StreamTimes(streamTimes)
    dropDeadBuckets(slowestStreamTime() - intervalMicros)
    val touched = new Touched
    val batchMax = mutable.HashMap.empty[Int, Long]
    val emit = new CompactEmitter(lateRecords)
    var lastPartition = Int.MinValue
    var lastOrder = Long.MinValue
    val emitted = rows
      .map { r =>
        if (r.partition < lastPartition || (r.partition == lastPartition && r.ordering < lastOrder))
          throw new IllegalStateException(
            s"kstreams internal error: partition ${r.partition} arrived out of order in deduplicate " +
              s"(offset ${r.ordering} after partition $lastPartition, $lastOrder). Please report this " +
              "with the query plan.")
        lastPartition = r.partition; lastOrder = r.ordering
        if (r.marker) {
          batchMax(r.partition) = math.max(batchMax.getOrElse(r.partition, Long.MinValue), r.timestampMicros)
          null
        } else {
          val liveFrom = math.max(times.current(r.partition), r.streamTimeMicros) - intervalMicros
          if (r.keyNull) emit.forward(r.payload)
          else if (!shouldForward(r, liveFrom, touched)) emit.duplicate()
          else emit.forwardable(r.payload, late = r.timestampMicros < liveFrom)
        }
      }
      .filter(_ != null)
    emitted ++ {
      touched.flush()
      batchMax.foreach { case (p, ts) => times.advance(p, ts) }
      times.flush()
      if (useTimers) sweeper.ensureArmed(timerValues)
      emit.counts
    }
  }

  /** The spec's rule for a record with a non-null id whose partition's `S - interval` is
    * `liveFrom`. */
  private def shouldForward(r: SpreadRecord, liveFrom: Long, touched: Touched): Boolean = {
    val e = touched.entry(r.key)
    val isLive = e.present && e.timestampMicros >= liveFrom
    if (isLive && math.abs(e.timestampMicros - r.timestampMicros) <= intervalMicros) {
      // a duplicate; the same record re-delivered after a failure is forwarded again
      hasOffset && r.offset != Long.MinValue && e.offset == r.offset && e.partition == r.partition
    } else {
      if (r.timestampMicros >= liveFrom) e.set(r.timestampMicros, r.partition, r.offset)
      else if (e.present && !isLive) e.purge() // late, and the entry is dead for this partition
      true
    }
  }

  /** The ids one micro-batch read or changed: each read from `entries` once, each change written
    * back once at the end (or earlier when the map reaches the memory budget). */
  private final class Touched {
    private val map = new java.util.HashMap[ByteBuffer, Slot]()
    private var bytes = 0L

    def entry(key: Array[Byte]): Slot = {
      val k = ByteBuffer.wrap(key)
      var slot = map.get(k)
      if (slot == null) {
        if (bytes > budgetBytes && map.size >= PerPartitionDedupProcessor.MinFlushEntries) flush()
        slot = new Slot(key)
        val stored = entries.getValue(key)
        if (stored != null) {
          slot.present = true; slot.timestampMicros = stored.timestampMicros
          slot.partition = stored.partition; slot.offset = stored.offset
        }
        map.put(k, slot)
        bytes += key.length + SlotBytes
      }
      slot
    }

    def flush(): Unit = {
      val byBucket = mutable.LongMap.empty[mutable.ArrayBuffer[Array[Byte]]]
      map.values().forEach { s =>
        if (s.changed) {
          if (!s.present) entries.removeKey(s.key)
          else {
            entries.updateValue(s.key, GlobalDedupEntry(s.timestampMicros, s.partition, s.offset))
            byBucket.getOrElseUpdate(buckets.bucketOf(s.timestampMicros), mutable.ArrayBuffer.empty) += s.key
          }
        }
      }
      byBucket.foreach { case (bucket, keys) => buckets.append(bucket, encodeKeys(keys.toSeq))(eachIdOnce) }
      map.clear(); bytes = 0
    }
  }

  /** A full bucket's chunks rewritten with each id once. */
  private def eachIdOnce(all: Seq[Array[Byte]]): Seq[Array[Byte]] = {
    val ids = mutable.LinkedHashMap.empty[ByteBuffer, Array[Byte]]
    all.foreach(c => decodeKeys(c)(k => ids(ByteBuffer.wrap(k)) = k))
    encodeKeys(ids.values.toSeq)
  }

  /** Removes the ids of the buckets that cannot hold `ts >= evictBelow` whose current entry is
    * dead (an id written again later keeps its newer entry). */
  private def dropDeadBuckets(evictBelow: Long): Unit =
    buckets.deadBuckets(evictBelow).foreach { case (bucket, count) =>
      buckets.remove(
        bucket,
        count,
        Some(bytes =>
          decodeKeys(bytes) { key =>
            val e = entries.getValue(key)
            if (e != null && e.timestampMicros < evictBelow) entries.removeKey(key)
          }))
    }

  /** The smallest stream time of the partitions this group knows (Long.MinValue for none). */
  private def slowestStreamTime(): Long = {
    val slowest = streamTimes.values().foldLeft(Long.MaxValue)(math.min)
    if (slowest == Long.MaxValue) Long.MinValue else slowest
  }

  /** Refuses state written with another group count, or by the single-group `deduplicate` of
    * kstreams before the spread (its one group 0 kept `streamTimes` but no group count). */
  private def checkLayout(group: Int): Unit =
    if (groups.exists()) {
      val written = groups.get()
      if (written != SpreadRecord.Groups)
        throw new KStreamsException(
          s"this checkpoint's deduplicate state is spread over $written id groups, this version of " +
            s"kstreams uses ${SpreadRecord.Groups}: run the query from a new checkpoint")
    } else if (streamTimes.exists()) {
      throw new KStreamsException(OneGroupCheckpoint)
    } else groups.update(SpreadRecord.Groups)

  override def handleExpiredTimer(
      group: Int,
      timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo): Iterator[CompactOutput] = {
    checkLayout(group)
    sweeper.fired(timerValues, streamTimes) { sweepTime =>
      dropDeadBuckets(sweepTime - intervalMicros)
      buckets.nonEmpty
    }
    Iterator.empty
  }
}

/** An id's entry in the global store: the forwarded record's timestamp and position. */
private[kstreams] final case class GlobalDedupEntry(timestampMicros: Long, partition: Int, offset: Long)

private[kstreams] object GlobalDedupProcessor {
  val OneGroupCheckpoint: String =
    "this checkpoint was written by deduplicate (global dedup by id) of kstreams before its state " +
      s"was spread over ${SpreadRecord.Groups} id groups, and cannot be read by this version: run " +
      "the query from a new checkpoint (to lose no duplicates, start it from the old query's last " +
      "committed offsets minus the dedup interval)"

  /** Heap bytes per touched id besides the key: the map node, the key's buffer, the slot. */
  private val SlotBytes = 160

  /** One id as a micro-batch sees it; `changed` when it must be written back. */
  final class Slot(val key: Array[Byte]) {
    var present = false
    var timestampMicros = 0L
    var partition = 0
    var offset = 0L
    var changed = false

    def set(ts: Long, p: Int, o: Long): Unit = {
      present = true; timestampMicros = ts; partition = p; offset = o; changed = true
    }

    def purge(): Unit = { present = false; changed = true }
  }

  /** Ids as `[length][bytes]`, one after the other, in chunks of at most
    * [[TimeBucketChunks.MaxChunkEntries]]. */
  def encodeKeys(keys: Seq[Array[Byte]]): Seq[Array[Byte]] =
    keys
      .grouped(TimeBucketChunks.MaxChunkEntries)
      .map { part =>
        val out = ByteBuffer.allocate(part.iterator.map(4 + _.length).sum)
        part.foreach(k => out.putInt(k.length).put(k))
        out.array()
      }
      .toSeq

  def decodeKeys(bytes: Array[Byte])(f: Array[Byte] => Unit): Unit = {
    val in = ByteBuffer.wrap(bytes)
    while (in.hasRemaining) {
      val key = new Array[Byte](in.getInt())
      in.get(key)
      f(key)
    }
  }
}
