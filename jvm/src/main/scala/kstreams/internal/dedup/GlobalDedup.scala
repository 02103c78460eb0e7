package kstreams
package internal
package dedup

import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming._

import kstreams.internal.plan._
import kstreams.internal.state._

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
  * Unlike in one partition, an id's entry can be replaced by one with a smaller timestamp (a slow
  * partition storing an id a fast one stored long before), and purged by a partition for which it
  * is dead while it is live for another. Eviction therefore removes an id only if its current
  * entry is dead: it reads the ids written under the buckets (`max(interval, 1 s)` of event time)
  * that died for every partition the group knows (`ts < slowest stream time - interval`) when a
  * micro-batch starts, or behind the watermark when the group's timer fires (spec section 8), and
  * removes those whose entry is older than that bound; it never scans all ids.
  *
  * Where the entries are, per group (as in [[PerPartitionDedupProcessor]], bounded by
  * [[DedupCaches.MemoryConf]]):
  *  - *in memory* (the usual case): the ids live in an [[IdMap]] kept in the executor between
  *    micro-batches ([[DedupCaches]], used only under the token of the state version it matches);
  *    a micro-batch reads no entry from the store and appends what it changed to `log`, a
  *    [[TimeBucketChunks]] of entry writes and tombstones from which a lost map is rebuilt.
  *  - *spilled*: when the ids need more than the group's share of memory, `entries` holds one
  *    RocksDB row per id (read once per id and micro-batch, written once per changed id) and
  *    `chunks` ([[TimeBucketChunks]]) the ids written under each bucket, for eviction. A group
  *    returns to memory when its store has emptied. (A checkpoint written before the in-memory
  *    mode existed is in this layout, and is read as a spilled store.)
  *
  * Why the log rebuilds exactly the entries: every write carries the group's micro-batch
  * sequence number and goes under its entry's bucket; an id's entry is its write with the largest
  * number, unless a tombstone of the id voids it (tombstones void the id's writes numbered below
  * theirs). A write is only ever superseded by one numbered higher; when the new entry's bucket is
  * older than the entry it replaces (or the entry is purged, or evicted while its bucket stays),
  * a tombstone goes under the replaced entry's bucket. So every write that is not the id's entry
  * is either voided by a tombstone or in a bucket no younger than the entry's, and buckets are
  * dropped oldest first (all those that ended before the bound at once): a dropped bucket never
  * uncovers an older write.
  *
  * A restart may change the interval: the entries a partition had already seen die stay dead for
  * it, by marks ([[EarlierDeaths]]) rather than deletion, since they may be live for another.
  */
private[kstreams] final class GlobalDedupProcessor(settings: DedupSettings)
    extends StatefulProcessor[Int, SpreadRecord, CompactOutput]
    with RecordedSettings {

  import settings._
  import GlobalDedupProcessor._
  import GlobalLog._

  private val intervalHistory = new SettingHistory("interval")

  override def recorded(queryId: String, history: Seq[String]): Unit = intervalHistory.record(queryId, history)

  /** This query's intervals, from the checkpoint's first run's to this run's ([[SettingHistory]]).
    * The first one's bucket width (`max(interval, 1 s)`) stays the store's for good, since chunk
    * keys are bucket numbers. */
  @transient private var intervals: Vector[Long] = _

  /** Tells this operator's maps apart in [[DedupCaches]]; made once on the driver. */
  private val operatorId = java.util.UUID.randomUUID().toString

  @transient private var entries: MapState[Array[Byte], GlobalDedupEntry] = _
  @transient private var idBuckets: TimeBucketChunks = _
  @transient private var log: TimeBucketChunks = _
  @transient private var streamTimes: MapState[Int, Long] = _
  @transient private var groups: ValueState[Int] = _
  @transient private var mode: ValueState[GlobalStoreMode] = _
  @transient private var sweeper: Sweeper = _
  @transient private var clocks: PartitionClocks = _
  @transient private var earlierDeaths: EarlierDeaths = _
  @transient private lazy val budgetBytes = DedupCaches.budgetBytes(memorySetting)

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    entries = getHandle.getMapState[Array[Byte], GlobalDedupEntry](
      "entries",
      Encoders.BINARY,
      StateEncoders.product(Encoders.product[GlobalDedupEntry]),
      TTLConfig.NONE)
    intervals = intervalHistory.inTask(getHandle, streaming = useTimers, current = intervalMicros)
    val bucketMicros = math.max(intervals.head, 1000000L)
    idBuckets = new TimeBucketChunks(getHandle, bucketMicros)
    log = new TimeBucketChunks(getHandle, bucketMicros, name = "logChunks")
    streamTimes = getHandle.getMapState[Int, Long]("streamTimes", Encoders.scalaInt, Encoders.scalaLong, TTLConfig.NONE)
    groups = getHandle.getValueState[Int]("groups", Encoders.scalaInt, TTLConfig.NONE)
    mode = getHandle.getValueState[GlobalStoreMode](
      "storeMode",
      StateEncoders.product(Encoders.product[GlobalStoreMode]),
      TTLConfig.NONE)
    sweeper = new Sweeper(getHandle, math.max(intervalMicros, PerPartitionDedupProcessor.IdleSweepMicros))
    // `streamTimes` is where the clocks were kept before idleness counted (read once, then empty)
    clocks = new PartitionClocks(getHandle, idleMs, Some(streamTimes))
    earlierDeaths = new EarlierDeaths(getHandle)
  }

  override def handleInputRows(
      group: Int,
      rows: Iterator[SpreadRecord],
      timerValues: TimerValues): Iterator[CompactOutput] = {
    val marks = earlierDeaths.load(intervals)
    val store = new GroupStore(group, checkLayout(group), marks)
    val nowMs = timerValues.getCurrentProcessingTimeInMs()
    clocks.begin(nowMs)
    store.open(deadBelow(clocks.slowestWaitedFor(nowMs)))
    // before any record moves a stream time (the clocks are the partitions' as the run stopped)
    earlierDeaths.judge(marks, intervals, clocks.streamTimes.toSeq)(store.storedEntries)
    val emit = new CompactEmitter(lateRecords)
    var lastPartition = Int.MinValue
    var lastOrder = Long.MinValue
    val emitted = rows
      .map { r =>
        // a group's rows come partition by partition, each in its order
        if (r.partition == lastPartition && r.ordering < lastOrder)
          throw OrderCheck.outOfOrder(r.partition, r.ordering, lastOrder)
        if (r.partition < lastPartition)
          throw OrderCheck.outOfOrder(r.partition, s"after partition $lastPartition")
        lastPartition = r.partition; lastOrder = r.ordering
        if (r.marker) {
          clocks.marker(r.partition, r.timestampMicros)
          null
        } else {
          val liveFrom = clocks.streamTime(r.partition, r.streamTimeMicros) - intervalMicros
          if (r.keyNull) emit.forward(r.payload)
          else if (!shouldForward(r, liveFrom, store, marks)) emit.duplicate()
          else emit.forwardable(r.payload, late = r.timestampMicros < liveFrom)
        }
      }
      .filter(_ != null)
    emitted ++ {
      store.close(Long.MinValue) // (the global store judges liveness per partition, not by one bound)
      clocks.end(nowMs)
      if (useTimers) sweeper.ensureArmed(timerValues)
      emit.counts
    }
  }

  /** The spec's rule for a record with a non-null id whose partition's `S - interval` is
    * `liveFrom`; an entry a restart found dead for the record's partition stays dead
    * ([[EarlierDeaths]]). */
  private def shouldForward(r: SpreadRecord, liveFrom: Long, store: GroupStore, marks: EarlierDeaths.Marks): Boolean = {
    val e = store.entry(r.key)
    val isLive = e.present && e.timestampMicros >= liveFrom &&
      !marks.deadFor(r.key, e.timestampMicros, e.partition, e.offset, r.partition)
    if (isLive && math.abs(e.timestampMicros - r.timestampMicros) <= intervalMicros) {
      // a duplicate; the same record re-delivered after a failure is forwarded again
      hasOffset && r.offset != Long.MinValue && e.offset == r.offset && e.partition == r.partition
    } else {
      if (r.timestampMicros >= liveFrom) store.set(e, r.timestampMicros, r.partition, r.offset)
      else if (e.present && !isLive) store.purge(e) // late, and the entry is dead for this partition
      true
    }
  }

  /** Maps are kept between micro-batches only for streaming queries (a batch DataFrame is one). */
  private def cacheId(group: Int): Option[String] =
    if (!useTimers) None else Some(s"${getHandle.getQueryInfo().getQueryId}/$operatorId/$group")

  /** One group's ids during one micro-batch (or one timer), numbered `stored.seq + 1`, on the
    * protocol of [[SpillableStore]]: its map is an [[IdMap]], its in-memory layout the log, its
    * RocksDB rows `entries` (with `chunks`, the ids under each bucket, for eviction). */
  private final class GroupStore(group: Int, stored: GlobalStoreMode, marks: EarlierDeaths.Marks)
      extends SpillableStore[IdMap](cacheId(group), budgetBytes, stored.token, stored.spilled) {
    private val seq = stored.seq + 1
    // slots this micro-batch changed, each once, and the tombstones it owes, by bucket
    private val changed = mutable.ArrayBuffer.empty[Slot]
    private val tombstones = mutable.LongMap.empty[mutable.ArrayBuffer[(Array[Byte], Long)]]
    // a map rebuilt from the log that was too big to keep: what spillFromStore writes
    private var tooBig: IdMap = _

    /** Finds the group's ids and evicts those dead below `evictBelow`. */
    def open(evictBelow: Long): Unit = {
      val spilledAtStart = spilled
      if (spilled) dropDeadIds(evictBelow)
      openEntries()
      // a group spilled at the start has no log (moveToEntries cleared it) whether or not it
      // returned to memory: nothing more to evict
      if (!spilledAtStart) { if (spilled) dropDeadIds(evictBelow) else dropDeadLog(evictBelow) }
    }

    /** The slot of `key`, read from `entries` the first time a spilled micro-batch sees it. A key
      * the map does not hold gets a detached absent slot, added by [[set]]. */
    def entry(key: Array[Byte]): Slot = {
      withinBudget(Long.MinValue)
      var slot = map.get(key)
      if (slot == null) {
        slot = new Slot(key)
        if (spilled) {
          val e = entries.getValue(key)
          if (e != null) slot.load(e.timestampMicros, e.partition, e.offset)
          map.add(slot)
        }
      }
      slot
    }

    /** Every entry the group holds as it opens (all of them: read once per run that changed the
      * interval, [[EarlierDeaths]]). */
    def storedEntries: Iterator[(Array[Byte], GlobalDedupEntry)] =
      if (spilled) entries.iterator()
      else
        map.iterator.collect {
          case s if s.present => s.key -> GlobalDedupEntry(s.timestampMicros, s.partition, s.offset)
        }

    def set(slot: Slot, ts: Long, partition: Int, offset: Long): Unit = {
      marks.forget(slot.key)
      touched(slot)
      slot.present = true; slot.timestampMicros = ts; slot.partition = partition; slot.offset = offset
    }

    def purge(slot: Slot): Unit = { marks.forget(slot.key); touched(slot); slot.present = false }

    private def touched(slot: Slot): Unit = if (!slot.changed) {
      slot.changed = true
      changed += slot
      if (!slot.held) map.add(slot)
    }

    /** Timer: evicts ids dead below `evictBelow`, says whether any state is left. */
    def sweep(evictBelow: Long): Boolean = {
      open(evictBelow)
      close(Long.MinValue)
      if (spilled) idBuckets.nonEmpty else log.nonEmpty
    }

    override protected def emptyMap(): IdMap = new IdMap
    override protected def mapSize: Int = map.size
    override protected def storeEmptied: Boolean = !idBuckets.nonEmpty
    override protected def layoutEmpty: Boolean = !log.nonEmpty
    override protected def clearEntries(): Unit = entries.clear()
    override protected def markSpilled(): Unit = mode.update(GlobalStoreMode(0L, spilled = true, seq))
    override protected def markInMemory(token: Long): Unit = mode.update(GlobalStoreMode(token, spilled = false, seq))
    override protected def writeInMemory(liveFrom: Long): Unit = writeLog()

    // ---- spilled: `entries` and `chunks` ----

    /** Writes the changed ids to `entries` and their ids under their buckets; empties the map. */
    override protected def flushSpilled(liveFrom: Long): Unit = {
      writeSpilled(changed.iterator)
      changed.clear(); map = new IdMap
    }

    /** `slots` as rows of `entries` (an absent one deleted), each present id listed under its
      * bucket in `chunks`. */
    private def writeSpilled(slots: Iterator[Slot]): Unit = {
      val byBucket = mutable.LongMap.empty[mutable.ArrayBuffer[Array[Byte]]]
      slots.foreach { s =>
        if (!s.present) entries.removeKey(s.key)
        else {
          entries.updateValue(s.key, GlobalDedupEntry(s.timestampMicros, s.partition, s.offset))
          byBucket.getOrElseUpdate(idBuckets.bucketOf(s.timestampMicros), mutable.ArrayBuffer.empty) += s.key
        }
      }
      byBucket.foreach { case (bucket, keys) => idBuckets.append(bucket, encodeKeys(keys.toSeq))(eachIdOnce) }
    }

    /** Removes the ids of the buckets that cannot hold `ts >= evictBelow` whose current entry is
      * dead (an id written again later keeps its newer entry). */
    private def dropDeadIds(evictBelow: Long): Unit =
      idBuckets.removeDead(evictBelow) { bytes =>
        decodeKeys(bytes) { key =>
          val e = entries.getValue(key)
          if (e != null && e.timestampMicros < evictBelow) { entries.removeKey(key); marks.forget(key) }
        }
      }

    /** The map outgrew the budget: every id it holds (this micro-batch's changes included) becomes
      * a row of `entries`, listed under its bucket in `chunks`; the log is dropped. */
    override protected def moveToEntries(): Unit = {
      writeSpilled(map.iterator.filter(_.present)) // `entries` is empty while the group is in memory
      log.clear()
      changed.clear(); tombstones.clear()
      map = new IdMap
    }

    /** The rebuilt map ([[rebuildWithin]]) written as [[moveToEntries]] writes it. */
    override protected def spillFromStore(): Unit = {
      map = Option(tooBig).getOrElse(readLog())
      tooBig = null
      moveToEntries()
    }

    // ---- in memory: the map and the log ----

    private def tombstone(bucket: Long, key: Array[Byte], voidBelow: Long): Unit =
      tombstones.getOrElseUpdate(bucket, mutable.ArrayBuffer.empty) += ((key, voidBelow))

    /** Appends this micro-batch's writes and tombstones to the log (see the class comment). */
    private def writeLog(): Unit = {
      val writes = mutable.LongMap.empty[mutable.ArrayBuffer[Slot]]
      changed.foreach { s =>
        if (s.present) {
          val bucket = log.bucketOf(s.timestampMicros)
          writes.getOrElseUpdate(bucket, mutable.ArrayBuffer.empty) += s
          // replaced by an entry of an older bucket: void the replaced one where it outlives it
          if (s.storedPresent && log.bucketOf(s.storedMicros) > bucket)
            tombstone(log.bucketOf(s.storedMicros), s.key, seq)
        } else {
          if (s.storedPresent) tombstone(log.bucketOf(s.storedMicros), s.key, seq + 1) // purged
          map.remove(s.key)
        }
        s.committed()
      }
      changed.clear()
      (writes.keySet ++ tombstones.keySet).foreach { bucket =>
        val w = writes.getOrElse(bucket, mutable.ArrayBuffer.empty[Slot])
        val t = tombstones.getOrElse(bucket, mutable.ArrayBuffer.empty[(Array[Byte], Long)])
        log.append(
          bucket,
          encodeLog(w.iterator.map(s => LogRecord.write(s, seq)) ++ t.iterator.map { case (key, voidBelow) =>
            LogRecord.tombstone(key, voidBelow)
          }))(compactLog)
      }
      tombstones.clear()
    }

    /** [[dropDeadIds]] for the in-memory store: the ids written under the dead buckets are read
      * from the log; one evicted while its entry's bucket stays gets a tombstone there. */
    private def dropDeadLog(evictBelow: Long): Unit =
      log.removeDead(evictBelow) { bytes =>
        decodeLog(bytes) { rec =>
          if (!rec.isTombstone) {
            val slot = map.get(rec.key)
            if (slot != null && slot.present && slot.timestampMicros < evictBelow) {
              val entryBucket = log.bucketOf(slot.timestampMicros)
              if (log.bucketEnd(entryBucket) > evictBelow) tombstone(entryBucket, rec.key, seq)
              map.remove(rec.key)
              marks.forget(rec.key)
            }
          }
        }
      }

    /** The map as the log says, unless it needs more than `limitBytes`. */
    override protected def rebuildWithin(limitBytes: Long): Option[IdMap] = {
      val latest = readLog()
      if (latest.estimatedBytes > limitBytes) { tooBig = latest; None }
      else Some(latest)
    }

    /** The map as the log says: an id's entry is its highest-numbered write no tombstone voids. */
    private def readLog(): IdMap = {
      val latest = new IdMap
      val voidBelow = mutable.HashMap.empty[ByteBuffer, Long]
      log
        .all()
        .foreach(bytes =>
          decodeLog(bytes) { rec =>
            if (rec.isTombstone) {
              val k = ByteBuffer.wrap(rec.key)
              voidBelow(k) = math.max(voidBelow.getOrElse(k, Long.MinValue), rec.seq)
            } else {
              var slot = latest.get(rec.key)
              if (slot == null) { slot = new Slot(rec.key); latest.add(slot) }
              if (!slot.present || slot.seq < rec.seq) {
                slot.load(rec.timestampMicros, rec.partition, rec.offset)
                slot.seq = rec.seq
              }
            }
          })
      voidBelow.foreach { case (key, below) =>
        val slot = latest.get(key.array())
        if (slot != null && slot.seq < below) latest.remove(key.array())
      }
      latest
    }
  }

  /** A full bucket of `chunks` rewritten with each id once. */
  private def eachIdOnce(all: Seq[Array[Byte]]): Seq[Array[Byte]] = {
    val ids = mutable.LinkedHashMap.empty[ByteBuffer, Array[Byte]]
    all.foreach(c => decodeKeys(c)(k => ids(ByteBuffer.wrap(k)) = k))
    encodeKeys(ids.values.toSeq)
  }

  /** A full bucket of the log rewritten with each id's highest-numbered write and tombstone. */
  private def compactLog(all: Seq[Array[Byte]]): Seq[Array[Byte]] = {
    val writes = mutable.LinkedHashMap.empty[ByteBuffer, LogRecord]
    val voids = mutable.LinkedHashMap.empty[ByteBuffer, LogRecord]
    all.foreach(c =>
      decodeLog(c) { rec =>
        val kept = if (rec.isTombstone) voids else writes
        val k = ByteBuffer.wrap(rec.key)
        if (kept.get(k).forall(_.seq < rec.seq)) kept(k) = rec
      })
    encodeLog(writes.valuesIterator ++ voids.valuesIterator)
  }

  /** The smallest stream time of the partitions this group knows (Long.MinValue for none). */
  /** The bound below which an entry is dead for every partition awaited when the slowest of them
    * is at `slowest` (nothing is dead while that is unknown; Long.MinValue - interval would wrap
    * around). */
  private def deadBelow(slowest: Long): Long = if (slowest == Long.MinValue) Long.MinValue else slowest - intervalMicros

  /** The group's store mode; refuses state written with another group count, or by the
    * single-group `deduplicate` of kstreams before the spread (its one group 0 kept `streamTimes`
    * but no group count). State of the spread store from before the in-memory mode has a group
    * count but no mode: it is spilled. */
  private def checkLayout(group: Int): GlobalStoreMode =
    if (groups.exists()) {
      val written = groups.get()
      if (written != SpreadRecord.Groups)
        throw new KStreamsException(
          s"this checkpoint's deduplicate state is spread over $written id groups, this version of " +
            s"kstreams uses ${SpreadRecord.Groups}: run the query from a new checkpoint")
      Option(mode.get()).getOrElse(GlobalStoreMode(0L, spilled = true, 0L))
    } else if (streamTimes.exists()) {
      throw new KStreamsException(OneGroupCheckpoint)
    } else {
      groups.update(SpreadRecord.Groups)
      GlobalStoreMode(0L, spilled = false, 0L)
    }

  override def handleExpiredTimer(
      group: Int,
      timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo): Iterator[CompactOutput] = {
    val stored = checkLayout(group)
    // by the partitions' own clocks, never by the watermark (which follows the fastest partition:
    // it would evict entries still live for a slower one)
    val nowMs = timerValues.getCurrentProcessingTimeInMs()
    clocks.begin(nowMs)
    sweeper.firedAt(timerValues, clocks.slowestWaitedFor(nowMs))(sweepTime =>
      new GroupStore(group, stored, earlierDeaths.load(intervals)).sweep(deadBelow(sweepTime)))
    Iterator.empty
  }
}

/** An id's entry in the spilled global store: the forwarded record's timestamp and position. */
private[kstreams] final case class GlobalDedupEntry(timestampMicros: Long, partition: Int, offset: Long)

/** Whether a group of the global store is spilled, the token of its kept map ([[DedupCaches]]),
  * and the number of its latest micro-batch (or timer), which numbers its log records. */
private[kstreams] final case class GlobalStoreMode(token: Long, spilled: Boolean, seq: Long)

private[kstreams] object GlobalDedupProcessor {
  val OneGroupCheckpoint: String =
    "this checkpoint was written by deduplicate (global dedup by id) of kstreams before its state " +
      s"was spread over ${SpreadRecord.Groups} id groups, and cannot be read by this version: run " +
      "the query from a new checkpoint (to lose no duplicates, start it from the old query's last " +
      "committed offsets minus the dedup interval)"
}
