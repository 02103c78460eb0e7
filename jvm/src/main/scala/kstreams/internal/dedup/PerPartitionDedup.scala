package kstreams
package internal
package dedup

import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming._

import kstreams.internal.plan._
import kstreams.internal.state._

/** The dedup rule of spec section 2 for state scoped to one input partition
  * (`deduplicateByKey`, `deduplicateByKeyValue`): work per micro-batch follows the micro-batch's
  * records (plus what expired), whatever the interval and the number of live keys, and memory is
  * bounded by [[DedupCaches.MemoryConf]].
  *
  * Store, per group (one input partition):
  *  - [[TimeBucketChunks]]: every entry the group stored, appended once per micro-batch as
  *    chunks of serialized `(key, ts, offset)` under the entry's time bucket
  *    (`max(interval, 1 s)` of event time). Eviction deletes whole buckets once stream time has
  *    passed them (Kafka's segment drop), never scanning keys;
  *  - `entries`: one RocksDB row per key, written only while the group is *spilled* (below);
  *  - [[PerPartitionGroupValues]]: the partition's stream time, whether the group is spilled (and
  *    the token of its in-memory map), when it last delivered and its sweep timer; in the `chunks`
  *    map for a new checkpoint (layout 2, with the chunk counts: 2 state variables), in variables of
  *    their own for one written before it (layout 1: 7).
  *
  * Two ways to look a record's key up (the protocol, shared with the global store, is
  * [[SpillableStore]]'s):
  *  - *in memory* (the usual case): the group's live entries are in an [[EntryMap]] that stays in
  *    the executor between micro-batches ([[DedupCaches]]); a micro-batch reads nothing from the
  *    store, decides every record in memory and appends its entries to their buckets' chunks. The map is used
  *    only when the token stored with the state version this micro-batch was given is the one the
  *    map was filed under, i.e. the map is exactly that committed state; otherwise (restart,
  *    retried batch, another executor) it is rebuilt from the chunks once.
  *  - *spilled*: when a group's live entries need more than its share of memory, they are written
  *    to `entries` once and from then on each key is a point lookup (a RocksDB get) the first time
  *    a micro-batch sees it, and each stored entry a put at the end of the micro-batch. Memory is
  *    then what one micro-batch touches, flushed whenever it reaches the budget. A group leaves
  *    this mode when its store has emptied.
  *
  * Why this is exact: in one partition stream time only grows, so an entry that is dead
  * (`ts < streamTime - interval`) stays dead, and ignoring or never writing dead entries is the
  * spec's purge; an entry replaces a key's entry only with a larger timestamp (a record younger
  * than a live entry by at most `interval` is a duplicate, and one older than `streamTime -
  * interval` is late and never stored), so the largest timestamp read for a key is its current
  * entry, in the chunks as in `entries`.
  *
  * Real-time mode (spec section 8) runs the same rule and store: a partition's store is opened at
  * its first record of the batch, each record is decided in memory as it arrives (forwarded at
  * once), and the store is closed, as at the end of a micro-batch, at the partition's end-of-batch
  * marker. So a record's cost does not depend on the batch duration or on the live keys, and
  * eviction follows the partition's own stream time record by record (a dead entry is ignored by
  * timestamp and dropped when the map next grows), needing no watermark.
  *
  * Output: forwarded records (and late ones routed to the side output, [[CompactEmitter]]), then one
  * row per micro-batch and drop reason with the number of records dropped (not one marker row per
  * dropped record), read by [[Stateful.runCounted]].
  */
private[kstreams] final class PerPartitionDedupProcessor(settings: DedupSettings)
    extends StatefulProcessor[Int, CompactRecord, CompactOutput]
    with RealTimeCapable
    with RecordedSettings
    with LaidOutState {

  import settings._
  import PerPartitionDedupProcessor._

  private val intervalHistory = new SettingHistory("interval")

  override def recorded(queryId: String, history: Seq[String]): Unit = intervalHistory.record(queryId, history)

  /** Layout 2 (the group's small values and chunk counts in the `chunks` map) for a new checkpoint,
    * unless the session asks for layout 1 ([[PerPartitionDedupProcessor.StateLayoutConf]]). */
  override val stateLayout: StateLayout =
    new StateLayout(current = settings.newStateLayout, PerPartitionDedupProcessor.layoutOfVariables)

  /** This query's intervals, from the checkpoint's first run's to this run's (only this run's for a
    * new checkpoint or a batch query). The first one's bucket width stays the store's layout for
    * good, since chunk keys depend on it; a group's [[TimeBucketChunks.tag]] is the index of the
    * one it was last judged under (none: the first). */
  @transient private var intervals: Vector[Long] = _

  /** Tells this operator's maps apart from other operators' of the same query in [[DedupCaches]];
    * made once on the driver, so the same in every micro-batch of a run. */
  private val operatorId = java.util.UUID.randomUUID().toString

  @transient private var buckets: TimeBucketChunks = _
  @transient private var entries: MapState[Array[Byte], DedupEntry] = _
  @transient private var values: PerPartitionGroupValues = _
  @transient private var sweeper: Sweeper = _
  @transient private lazy val budgetBytes = DedupCaches.budgetBytes(memorySetting)

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    intervals = intervalHistory.inTask(getHandle, streaming = useTimers, current = intervalMicros)
    val layout = stateLayout.inTask(getHandle, streaming = useTimers)
    buckets = new TimeBucketChunks(getHandle, math.max(intervals.head, 1000000L), countsInChunks = layout == 2)
    val sweepMicros = math.max(intervalMicros, IdleSweepMicros)
    def declareEntries() = getHandle.getMapState[Array[Byte], DedupEntry](
      "entries",
      Encoders.BINARY,
      StateEncoders.product(Encoders.product[DedupEntry]),
      TTLConfig.NONE)
    if (layout == 1) { // in the order layout 1 always had
      val streamTimes =
        getHandle.getMapState[Int, Long]("streamTimes", Encoders.scalaInt, Encoders.scalaLong, TTLConfig.NONE)
      entries = declareEntries()
      val mode = getHandle
        .getValueState[DedupStoreMode]("mode", StateEncoders.product(Encoders.product[DedupStoreMode]), TTLConfig.NONE)
      sweeper = new Sweeper(getHandle, sweepMicros)
      val lastRecordMs = getHandle.getValueState[Long]("lastRecordMs", Encoders.scalaLong, TTLConfig.NONE)
      values = new PerPartitionGroupValues.Separate(streamTimes, mode, lastRecordMs)
    } else {
      entries = declareEntries()
      values = new PerPartitionGroupValues.InChunks(buckets)
      sweeper = new Sweeper(getHandle, sweepMicros, values.pendingSweep)
    }
  }

  /** Groups whose store is open in this task. In a micro-batch a group's records come in one
    * call and its store is closed at the end of it; in a real-time query each record comes in a
    * call of its own, and the store stays open (decisions in memory, no state written per record)
    * until the partition's end-of-batch marker ([[kstreams.internal.plan.EndMarkers]]), which
    * arrives before the task commits. */
  @transient private lazy val open = mutable.HashMap.empty[Int, OpenGroup]

  override def handleInputRows(
      group: Int,
      rows: Iterator[CompactRecord],
      timerValues: TimerValues): Iterator[CompactOutput] = {
    var ended = false
    // looked up once per call, not per record: a micro-batch's records come in one call
    var current = open.getOrElse(group, null)
    val emitted = rows
      .map { r =>
        if (r.endOfBatch) { ended = true; null }
        else {
          if (current == null) { current = new OpenGroup(group, r); open(group) = current }
          current.decide(r)
        }
      }
      .filter(_ != null)
    emitted ++ {
      if (current != null && (ended || !current.realTime)) {
        open.remove(group)
        current.close(timerValues)
      } else Iterator.empty
    }
  }

  /** One group (input partition) from its first record in this task until its store closes. */
  private final class OpenGroup(group: Int, first: CompactRecord) {
    val realTime: Boolean = first.realTime
    private val partition = first.partition
    private val streamTimeAtStart = values.streamTime(partition) // of the group's one partition
    private var streamTime = streamTimeAtStart
    judgeUnderThisInterval(group, streamTime) // before the store reads its entries
    private val store = new GroupStore(group, liveFromOf(streamTime), values.mode) // null before its first batch
    private val emit = new CompactEmitter(lateRecords)
    private var lastOrder = Long.MinValue
    // the sweep timer waits out the batch: close arms it again (Sweeper.disarm says why)
    if (realTime && useTimers) sweeper.disarm()

    /** The spec's rule for `r`: what to emit, or null. */
    def decide(r: CompactRecord): CompactOutput = {
      if (r.ordering < lastOrder) throw OrderCheck.outOfOrder(r.partition, r.ordering, lastOrder)
      lastOrder = r.ordering
      if (r.timestampMicros > streamTime) streamTime = r.timestampMicros
      val liveFrom = streamTime - intervalMicros
      if (r.keyNull) emit.forward(r.payload)
      else if (!store.shouldForward(r, liveFrom)) emit.duplicate()
      else emit.forwardable(r.payload, late = r.timestampMicros < liveFrom)
    }

    /** Writes what the group stored and its stream time; the drop counts to emit. */
    def close(timerValues: TimerValues): Iterator[CompactOutput] = {
      if (streamTime > streamTimeAtStart) values.advance(partition, streamTime)
      val nowMs = timerValues.getCurrentProcessingTimeInMs()
      if (nowMs >= 0) values.lastRecordMs = nowMs
      store.close(streamTime - intervalMicros)
      if (useTimers) sweeper.ensureArmed(timerValues)
      emit.counts
    }
  }

  /** Makes a group's entries those this run's interval judges, once per run that changed it.
    *
    * Why this is exact (the manual, "Operating a query": from the first record after a restart every
    * stored entry is judged by the new interval, and an entry already dead under the old one when
    * the query stopped stays dead): a group's stream time moves only while it gets records, so from
    * the run that last judged it (its tag) to this one it stayed where it is now, and an entry
    * that was dead at the end of any of those runs is one with `ts < streamTime - that run's
    * interval`: together, `ts < streamTime - the smallest of their intervals`. Those are deleted
    * here, whole buckets below that and the rest of the bucket across it (and a spilled group's
    * `entries` rows of them), so no longer interval can bring them back; what is left is judged by
    * this run's interval from the first record on. The tag then records this run, so the deletion
    * happens once per group and run that changed the interval, whatever runs come between. */
  private def judgeUnderThisInterval(group: Int, streamTime: Long): Unit =
    SettingHistory.smallestSince(intervals, buckets.tag.fold(0)(_.toInt)).foreach { smallest =>
      val stored = values.mode
      val spilled = stored != null && stored.spilled
      if (streamTime != Long.MinValue) {
        val deadBelow = streamTime - smallest
        removeBuckets(buckets.deadBuckets(deadBelow), deadBelow, spilled)
        buckets.rewrite(buckets.bucketOf(deadBelow)) { chunks =>
          val kept = new EntryMap
          chunks.foreach(bytes =>
            decode(bytes) { (key, ts, offset) =>
              if (ts >= deadBelow) kept.putIfNewer(key, ts, offset)
              else if (spilled) {
                val e = entries.getValue(key)
                if (e != null && e.timestampMicros < deadBelow) entries.removeKey(key)
              }
            })
          encode(kept, kept.occupiedSlots)
        }
      }
      buckets.tag = Some(intervals.size - 1L)
      // a map kept in this executor holds what was just deleted: never use it again
      if (stored != null && !stored.spilled) values.mode = stored.copy(token = SpillableStore.newToken())
      cacheId(group).foreach(DedupCaches.drop)
    }

  private def liveFromOf(streamTime: Long): Long =
    if (streamTime == Long.MinValue) Long.MinValue else streamTime - intervalMicros

  /** Maps are kept between micro-batches only for streaming queries (a batch DataFrame is one). */
  private def cacheId(group: Int): Option[String] =
    if (!useTimers) None else Some(s"${getHandle.getQueryInfo().getQueryId}/$operatorId/$group")

  /** One group's store from its first record of a batch until the batch's end, on the protocol of
    * [[SpillableStore]]: its map is an [[EntryMap]], its in-memory layout the time-bucket chunks,
    * its RocksDB rows `entries`. */
  private final class GroupStore(group: Int, liveFromAtStart: Long, stored: DedupStoreMode)
      extends SpillableStore[EntryMap](
        cacheId(group),
        budgetBytes,
        if (stored == null) 0L else stored.token,
        stored != null && stored.spilled) {

    // last in the constructor: openEntries reads the store through the hooks below
    dropDeadBuckets(liveFromAtStart)
    openEntries()

    /** The spec's rule for a record with a non-null key; updates the entries. */
    def shouldForward(r: CompactRecord, liveFrom: Long): Boolean = {
      withinBudget(liveFrom)
      // dead entries dropped whenever the map has doubled since the last time (amortized O(1) per
      // record): in a real-time batch, which may last minutes, the map stays near its live size
      if (!spilled && map.size >= map.compactAt) map.dropDead(liveFrom)
      val live = map
      val ts = r.timestampMicros
      var slot = live.slotOf(r.key)
      if (spilled && !live.occupied(slot)) { // first sight of the key in this micro-batch
        val e = entries.getValue(r.key)
        slot =
          if (e == null) live.set(slot, r.key, Long.MinValue, Long.MinValue, added = false)
          else live.set(slot, r.key, e.timestampMicros, e.offset, added = false)
      }
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

    override protected def emptyMap(): EntryMap = new EntryMap
    override protected def mapSize: Int = map.size
    override protected def shrink(liveFrom: Long): Unit = map.dropDead(liveFrom)
    override protected def storeEmptied: Boolean = !buckets.nonEmpty
    override protected def layoutEmpty: Boolean = !buckets.nonEmpty
    override protected def clearEntries(): Unit = entries.clear()
    override protected def markSpilled(): Unit =
      if (stored == null || !stored.spilled) values.mode = DedupStoreMode(0L, spilled = true)
    override protected def markInMemory(token: Long): Unit = values.mode = DedupStoreMode(token, spilled = false)

    // entries of earlier micro-batches; this one's are written by flushSpilled
    override protected def moveToEntries(): Unit =
      map.occupiedSlots.foreach { s =>
        if (!map.added(s)) entries.updateValue(map.key(s), DedupEntry(map.ts(s), map.offset(s)))
      }

    override protected def flushSpilled(liveFrom: Long): Unit = { writeAdded(liveFrom); map = new EntryMap }

    override protected def writeInMemory(liveFrom: Long): Unit = {
      writeAdded(liveFrom)
      if (map.size >= map.compactAt) map.dropDead(liveFrom)
    }

    /** Appends what this micro-batch stored and is still live to its buckets' chunks (and, spilled,
      * to `entries`). */
    private def writeAdded(liveFrom: Long): Unit = {
      val live = map
      val byBucket = mutable.LongMap.empty[mutable.ArrayBuilder.ofInt]
      val added = live.takeAdded()
      var i = 0
      while (i < added.length) {
        val slot = added(i)
        if (live.ts(slot) >= liveFrom) {
          byBucket.getOrElseUpdate(buckets.bucketOf(live.ts(slot)), new mutable.ArrayBuilder.ofInt).addOne(slot)
          if (spilled) entries.updateValue(live.key(slot), DedupEntry(live.ts(slot), live.offset(slot)))
        }
        i += 1
      }
      buckets.batched {
        byBucket.foreach { case (bucket, slots) =>
          buckets.append(bucket, encode(live, slots.result()))(oneEntryPerKey)
        }
      }
    }

    /** A full bucket's chunks rewritten with each key's newest entry once. */
    private def oneEntryPerKey(all: Seq[Array[Byte]]): Seq[Array[Byte]] = {
      val merged = new EntryMap
      all.foreach(bytes => decode(bytes)((key, ts, offset) => merged.putIfNewer(key, ts, offset)))
      encode(merged, merged.occupiedSlots)
    }

    /** The group's live entries read from the chunks (those of buckets that can hold
      * `ts >= liveFromAtStart`), unless they need more than `limitBytes`. */
    override protected def rebuildWithin(limitBytes: Long): Option[EntryMap] = {
      val rebuilt = new EntryMap
      val it = buckets.all()
      while (it.hasNext) {
        if (rebuilt.estimatedBytes > limitBytes) return None
        decode(it.next()) { (key, ts, offset) => if (ts >= liveFromAtStart) rebuilt.putIfNewer(key, ts, offset) }
      }
      Some(rebuilt)
    }

    /** One row per live key in `entries`, newest wins. */
    override protected def spillFromStore(): Unit =
      buckets
        .all()
        .foreach(bytes =>
          decode(bytes) { (key, ts, offset) =>
            if (ts >= liveFromAtStart) {
              val e = entries.getValue(key)
              if (e == null || e.timestampMicros < ts) entries.updateValue(key, DedupEntry(ts, offset))
            }
          })

    /** Deletes the buckets that cannot hold `ts >= liveFrom` (Kafka's segment drop as stream time
      * advances). */
    private def dropDeadBuckets(liveFrom: Long): Unit = removeBuckets(buckets.deadBuckets(liveFrom), liveFrom, spilled)
  }

  /** Deletes `dead` buckets; for a spilled group also the `entries` rows they hold that are dead
    * (`ts < evictBelow`): a key whose entry was replaced by a younger one keeps it. */
  private def removeBuckets(dead: Seq[(Long, Int)], evictBelow: Long, spilled: Boolean): Unit =
    buckets.removeAll(
      dead,
      if (!spilled) None
      else
        Some(bytes =>
          decode(bytes) { (key, _, _) =>
            val e = entries.getValue(key)
            if (e != null && e.timestampMicros < evictBelow) entries.removeKey(key)
          })
    )

  override def handleExpiredTimer(
      group: Int,
      timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo): Iterator[CompactOutput] = {
    // A real-time query checks timers between records: a group whose store is open here is not
    // idle (it drops its dead buckets itself when it opens), and sweeping under its open map
    // would change the state beneath it, so the timer is only armed again (an open group has
    // none pending, OpenGroup disarms it, unless a timer outlived the time stored for it). Nor is a partition
    // that delivered within the idle time (spark.kstreams.partitionIdleTimeout): it drops what its
    // own stream time passed at its next micro-batch, and the watermark, which follows the
    // fastest partition, would take entries still live for it (spec section 8).
    val nowMs = timerValues.getCurrentProcessingTimeInMs()
    val delivering = nowMs >= 0 && values.lastRecordMs.exists(nowMs - _ <= idleMs)
    val ownStreamTime = values.ownStreamTime // a group is one partition: its slowest and fastest
    if (open.contains(group) || delivering) sweeper.firedBehind(timerValues, ownStreamTime)(_ => true)
    else
      sweeper.firedBehind(timerValues, ownStreamTime) { sweepTime =>
        val evictBelow = sweepTime - intervalMicros
        val dead = buckets.deadBuckets(evictBelow)
        val current = Option(values.mode).getOrElse(DedupStoreMode(0L, spilled = false))
        if (dead.nonEmpty) {
          removeBuckets(dead, evictBelow, current.spilled)
          // The watermark may be past the partition's own stream time (an idle partition): then
          // entries the processor still counts as live are gone, and a kept map would disagree with
          // the store. Such a map is never used again: the token changes.
          val ownLiveFrom = liveFromOf(ownStreamTime)
          if (!current.spilled && dead.exists { case (bucket, _) => buckets.bucketEnd(bucket) > ownLiveFrom }) {
            values.mode = current.copy(token = SpillableStore.newToken())
            cacheId(group).foreach(DedupCaches.drop)
          }
        }
        val left = buckets.nonEmpty
        if (!left && values.mode != null) { // nothing stored any more: neither a map nor spilled entries
          if (current.spilled) entries.clear()
          values.clearMode()
          cacheId(group).foreach(DedupCaches.drop)
        }
        left
      }
    Iterator.empty
  }
}

/** A key's entry in a spilled group's `entries` (see [[PerPartitionDedupProcessor]]). */
private[kstreams] final case class DedupEntry(timestampMicros: Long, offset: Long)

/** Whether a group's entries are spilled to `entries`, and the token its in-memory map is filed
  * under in [[DedupCaches]] (see [[PerPartitionDedupProcessor]]). */
private[kstreams] final case class DedupStoreMode(token: Long, spilled: Boolean)

private[kstreams] object PerPartitionDedupProcessor {

  /** The layout of a new checkpoint's state ([[PerPartitionGroupValues]]): 2, or 1 for a checkpoint
    * that a release before layout 2 must still be able to run (a roll-back), at about 75 ms more
    * per task and micro-batch. A checkpoint keeps the layout it was first written in whatever
    * this says later. */
  val StateLayoutConf = "spark.kstreams.dedup.stateLayout"
  val DefaultStateLayout = 2

  /** The layout of this operator's state that the names of an operator's state variables in
    * Spark's metadata show, `None` for another operator's: layout 1 declares seven variables,
    * `mode` among them; layout 2 exactly these two ([[PerPartitionGroupValues]]). The global dedup
    * has `chunks` and `entries` too, beside others, but never `mode`. */
  def layoutOfVariables(names: Set[String]): Option[Int] =
    if (Set("chunks", "entries", "mode").subsetOf(names)) Some(1)
    else if (names == Set("chunks", "entries")) Some(2)
    else None

  def newStateLayout(session: org.apache.spark.sql.SparkSession): Int =
    session.conf.getOption(StateLayoutConf).map(_.trim) match {
      case None => DefaultStateLayout
      case Some("1") => 1
      case Some("2") => 2
      case Some(other) =>
        throw new KStreamsException(
          s"$StateLayoutConf must be 1 or 2, got '$other' (the manual, \"Operating a query\")")
    }

  /** How often (in watermark time) the timer sweeps a group: at least every 10 minutes. A group
    * that gets records drops its dead buckets as it reads them, so the timer is only for
    * partitions that went idle; a per-interval timer cost about a fifth of the throughput when
    * the watermark moves by minutes per micro-batch (benchmarks/RESULTS.md). */
  val IdleSweepMicros: Long = 10L * 60 * 1000 * 1000

  /** Entries as `[key length][key][timestamp][offset]`, one after the other, in chunks of at most
    * [[TimeBucketChunks.MaxChunkBytes]]. */
  def encode(live: EntryMap, slots: Array[Int]): Seq[Array[Byte]] =
    TimeBucketChunks.encodeChunks(slots.length)(i => 4 + live.key(slots(i)).length + 16) { (out, i) =>
      val s = slots(i)
      out.putInt(live.key(s).length).put(live.key(s)).putLong(live.ts(s)).putLong(live.offset(s))
    }

  def decode(bytes: Array[Byte])(f: (Array[Byte], Long, Long) => Unit): Unit = {
    val in = ByteBuffer.wrap(bytes)
    while (in.hasRemaining) {
      val key = new Array[Byte](in.getInt())
      in.get(key)
      f(key, in.getLong(), in.getLong())
    }
  }
}
