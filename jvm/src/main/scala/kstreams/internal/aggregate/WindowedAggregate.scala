package kstreams
package internal
package aggregate

import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.kstreams.{ColumnFunction, ValueSerializer}
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

import kstreams.internal.plan._
import kstreams.internal.state.{ClosedFloors, KeyBuckets, PartitionClocks}

/** One window of a key: its bounds (micros), aggregate and result timestamp (KIP-258). */
private[aggregate] final case class KeyWindow(start: Long, end: Long, aggregate: Any, ts: Long)

/** A key's windows while one micro-batch of its group runs, sorted by start. */
private[aggregate] final class KeyWindows(val key: Any, var windows: Vector[KeyWindow]) {
  var changed = false
}

/** The windowed and session-windowed aggregations (spec section 5): each record folded into its
  * key's windows in arrival order, each record judged late by its own input partition's stream
  * time as a Kafka Streams task judges it, never by another partition's progress (a lagging
  * partition loses nothing) nor by a watermark.
  *
  * Input: [[TaskClocks]] groups (a hash of the key), each partition's records in arrival order
  * with their stream time within the micro-batch, then its markers. State per group:
  *  - `windows`: key (its serialized bytes) -> the key and its windows (few per key: a tumbling
  *    window per `size` of its grace, or its sessions);
  *  - `chunks`/`chunkCounts` ([[KeyBuckets]]): the keys written under each bucket of their
  *    windows' expiry, so eviction reads only the keys of buckets that died;
  *  - `partitionClocks` ([[PartitionClocks]]): every partition's stream time;
  *  - `closedBelow` ([[ClosedFloors]]): per partition, the window end up to which windows stay
  *    closed whatever the grace, set by a restart that changed the grace.
  *
  * Why the result never depends on when eviction ran: a window is removed only once it has
  * expired ([[expiryMicros]] below the smallest stream time of the partitions still delivering);
  * a record of such a partition would then find it closed, and [[fold]] treats a closed or expired
  * window as the rule says whether or not it is still stored. Only a partition idle for longer
  * than `idleMs` is not waited for (the manual, "Stream time per partition").
  */
private[kstreams] abstract class WindowedAggregateProcessor(
    layout: TaskClocks.Layout,
    keyType: DataType,
    adder: ColumnFunction,
    idleMs: Long,
    graceMicros: Long,
    streaming: Boolean,
    drop: DropMarker,
    late: LateRows)
    extends StatefulProcessor[Int, Row, Row]
    with RealTimeCapable
    with RecordedSettings {

  @transient private var entries: MapState[Array[Byte], Row] = _
  // across calls: in a real-time batch each call holds one row
  @transient private lazy val order = new TaskOrderCheck(layout)
  @transient private var index: KeyBuckets = _
  @transient private var clocks: PartitionClocks = _
  @transient private lazy val keyBytes = new ValueSerializer(keyType)

  private val graceHistory = new SettingHistory("grace")

  /** The grace of each run of the checkpoint since a restart first changed it (one value if none). */
  @transient protected var graces: Vector[Long] = _

  /** Per input partition, the window end up to which (tumbling: at or below; sessions: the merged
    * end plus gap below) every window stays closed, whatever the grace: set by a restart that
    * changed it. */
  @transient private var closedBelow: ClosedFloors = _

  /** This run's grace is longer than an earlier run's: windows listed then expire later now. */
  @transient private lazy val graceGrew = graces.size > 1 && graces.last > graces.init.min

  /** Per group, its partitions' floors of `closedBelow`, read once per task. */
  @transient private lazy val floors = mutable.HashMap.empty[Int, Map[Int, Long]]

  protected val keyed: Keyed.Layout = layout.keyed

  override def recorded(queryId: String, history: Seq[String]): Unit = graceHistory.record(queryId, history)

  /** The width of the eviction index's time buckets: fixed by the checkpoint's first grace
    * (`firstGraceMicros`), since the buckets' keys depend on it. */
  protected def bucketMicros(firstGraceMicros: Long): Long

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    val window = StructType(
      Seq(
        StructField("start", LongType, nullable = false),
        StructField("end", LongType, nullable = false),
        StructField("aggregate", adder.dataType),
        StructField("ts", LongType, nullable = false)
      ))
    val entry = StructType(
      Seq(StructField("key", keyType), StructField("windows", ArrayType(window, containsNull = false))))
    entries = getHandle.getMapState[Array[Byte], Row]("windows", Encoders.BINARY, Encoders.row(entry), TTLConfig.NONE)
    graces = graceHistory.inTask(getHandle, streaming, current = graceMicros)
    index = new KeyBuckets(getHandle, bucketMicros(graces.head), "chunks")
    clocks = new PartitionClocks(getHandle, idleMs)
    closedBelow = new ClosedFloors(getHandle)
  }

  /** The stream time from which on the window can go: no record of a partition whose stream time
    * is past it would be folded into it (it is late, or starts a window of its own). */
  protected def expiryMicros(w: KeyWindow): Long

  /** The windows of a key to keep once every partition still delivering is at `evictBefore` (by
    * default those not expired). */
  protected def keep(windows: Vector[KeyWindow], evictBefore: Long): Vector[KeyWindow] =
    windows.filter(w => expiryMicros(w) >= evictBefore)

  /** Folds record `r` of timestamp `ts` into `entry` (setting `changed`), its partition being at
    * `streamTime` (this record included) with the floor `closedUpTo` ([[ClosedFloors]];
    * Long.MinValue without one), adding what it emits to `out`; returns the windows it wrote, for
    * the eviction index. */
  protected def fold(
      entry: KeyWindows,
      r: Row,
      ts: Long,
      streamTime: Long,
      closedUpTo: Long,
      out: mutable.ArrayBuffer[Row]): Seq[KeyWindow]

  override def handleInputRows(group: Int, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val nowMs = timerValues.getCurrentProcessingTimeInMs()
    clocks.begin(nowMs)
    // before any stream time moves
    val groupFloors = floors.getOrElseUpdate(group, closedBelow.judge(graces, clocks.streamTimes))
    val cache = mutable.HashMap.empty[ByteBuffer, KeyWindows]
    val out = mutable.ArrayBuffer.empty[Row]
    rows.foreach { r =>
      val partition = order.check(group, r)
      if (r.getBoolean(layout.markerIndex)) clocks.marker(partition, r.getLong(layout.batchStreamTimeIndex))
      else if (r.isNullAt(keyed.keyIndex)) out += drop(DropReasons.NullKey)
      else {
        val key = r.get(keyed.keyIndex)
        val bytes = ByteBuffer.wrap(keyBytes(key))
        val entry = cache.getOrElseUpdate(bytes, load(bytes).getOrElse(new KeyWindows(key, Vector.empty)))
        val streamTime = clocks.streamTime(partition, r.getLong(layout.batchStreamTimeIndex))
        val closedUpTo = groupFloors.getOrElse(partition, Long.MinValue)
        fold(entry, r, r.getLong(keyed.timestampMicrosIndex), streamTime, closedUpTo, out).foreach(w =>
          index.add(expiryMicros(w), bytes))
      }
    }
    val evictBefore = clocks.end(nowMs)
    index.flush()
    if (evictBefore != Long.MinValue) index.removeDead(evictBefore) { bytes =>
      cache.get(bytes).orElse(load(bytes)).foreach { entry =>
        cache(bytes) = entry
        val kept = keep(entry.windows, evictBefore)
        if (kept.size != entry.windows.size) { entry.windows = kept; entry.changed = true }
        // a window listed under an earlier, shorter grace outlives the bucket it was listed under
        // now: list it again (only then; with a grace that never grew every listing still holds)
        if (graceGrew) kept.foreach(w => index.add(expiryMicros(w), bytes))
      }
    }
    index.flush()
    cache.foreach { case (bytes, entry) =>
      if (entry.changed) {
        if (entry.windows.isEmpty) entries.removeKey(bytes.array())
        else
          entries.updateValue(
            bytes.array(),
            Row(entry.key, entry.windows.map(w => Row(w.start, w.end, w.aggregate, w.ts))))
      }
    }
    out.iterator
  }

  private def load(bytes: ByteBuffer): Option[KeyWindows] =
    if (!entries.containsKey(bytes.array())) None
    else {
      val row = entries.getValue(bytes.array())
      Some(
        new KeyWindows(
          row.get(0),
          row.getSeq[Row](1).map(w => KeyWindow(w.getLong(0), w.getLong(1), w.get(2), w.getLong(3))).toVector))
    }
}

/** Tumbling windows (Kafka's `TimeWindows`, `KStreamWindowAggregate`): a record of timestamp `ts`
  * belongs to `[floor(ts / size) * size, + size)`, which closes when its partition's stream time
  * reaches `end + grace`; a record of a closed window is late. An update that changes neither the
  * value nor makes the timestamp older is dropped (KIP-557, spec section 6). */
private[kstreams] final class TumblingAggregateProcessor(
    layout: TaskClocks.Layout,
    keyType: DataType,
    initial: Option[Any],
    adder: ColumnFunction,
    windows: TimeWindows,
    idleMs: Long,
    streaming: Boolean,
    drop: DropMarker,
    late: LateRows)
    extends WindowedAggregateProcessor(layout, keyType, adder, idleMs, windows.graceMicros, streaming, drop, late) {

  override protected def bucketMicros(firstGraceMicros: Long): Long = windows.sizeMicros

  // closed (end + grace <= stream time) is expired: the window can go once every partition is there
  override protected def expiryMicros(w: KeyWindow): Long = w.end + windows.graceMicros - 1

  override protected def fold(
      entry: KeyWindows,
      r: Row,
      ts: Long,
      streamTime: Long,
      closedUpTo: Long,
      out: mutable.ArrayBuffer[Row]): Seq[KeyWindow] = {
    val valueIndex = keyed.valueIndex(0)
    val start = Math.floorDiv(ts, windows.sizeMicros) * windows.sizeMicros
    val end = start + windows.sizeMicros
    // Kafka's rule: the window is closed once the stream time reaches end + grace (or it closed
    // under an earlier run's grace: [[ClosedFloors]])
    if (end + windows.graceMicros <= streamTime || end <= closedUpTo) { out += late(r, valueIndex); Nil }
    else {
      val stored = entry.windows.find(_.start == start)
      // a null aggregate is no aggregate, as in Kafka's stores (a put of null deletes): the next
      // record starts from the initializer again (reduce: from its own value)
      val old = stored.filter(_.aggregate != null)
      val value = late.value(r, valueIndex)
      val folded = old match {
        case Some(o) => adder(o.aggregate, value)
        case None => initial.map(i => adder(i, value)).getOrElse(value)
      }
      val newTs = old.map(o => Math.max(o.ts, ts)).getOrElse(ts)
      val idempotent =
        old.exists(o => newTs >= o.ts && java.util.Arrays.equals(adder.serialize(folded), adder.serialize(o.aggregate)))
      if (idempotent) { out += drop(DropReasons.Idempotent); Nil }
      else {
        val written = KeyWindow(start, end, folded, newTs)
        entry.windows = (entry.windows.filter(_.start != start) :+ written).sortBy(_.start)
        entry.changed = true
        out += late.update(entry.key, start, end, folded, newTs)
        if (stored.isEmpty) Seq(written) else Nil
      }
    }
  }
}

/** Session windows (Kafka's `SessionWindows`, `KStreamSessionWindowAggregate` of 4.3): a record
  * joins every session of its key that it is within `gap` of (inclusive); those merge into one
  * whose aggregate is the merged aggregates plus the record. Unless the record is a session of its
  * own, each session it touches gets a tombstone (null value, timestamped with that session's end)
  * and the merged session its result, timestamped with its latest record. A record whose merged
  * session ends before its partition's `stream time - grace - gap` is late. Sessions are kept while
  * a record that is not late could still touch them, so every session such a record touches is
  * found, as in a Kafka session store whose retention is long enough (its default, segmented
  * RocksDB store keeps them at least a minute). */
private[kstreams] final class SessionAggregateProcessor(
    layout: TaskClocks.Layout,
    keyType: DataType,
    initial: Option[Any],
    adder: ColumnFunction,
    merger: ColumnFunction,
    windows: SessionWindows,
    idleMs: Long,
    streaming: Boolean,
    drop: DropMarker,
    late: LateRows)
    extends WindowedAggregateProcessor(layout, keyType, adder, idleMs, windows.graceMicros, streaming, drop, late) {

  override protected def bucketMicros(firstGraceMicros: Long): Long =
    math.max(windows.gapMicros + firstGraceMicros, 1000L)

  /** A record that is not late and touches session `s` has `ts <= s.end + gap` and a merged session
    * that ends at `streamTime - grace - gap` or later; only a later session of the key within
    * `2 gap` of `s` (one record can touch both) can end that late. Such a session is either there
    * already (see [[keep]]) or made by a record at `streamTime - grace - gap` or later, which is
    * within `2 gap` of `s` only while `s.end + 3 gap + grace` is not behind the stream time. */
  override protected def expiryMicros(w: KeyWindow): Long = w.end + 3 * windows.gapMicros + windows.graceMicros

  /** Expired sessions go, but not one that a record could still bridge to a later session kept. */
  override protected def keep(sessions: Vector[KeyWindow], evictBefore: Long): Vector[KeyWindow] = {
    val kept = new Array[Boolean](sessions.size)
    for (i <- sessions.indices.reverse) {
      val bridged = i + 1 < sessions.size && sessions(i + 1).start - sessions(i).end <= 2 * windows.gapMicros
      kept(i) = expiryMicros(sessions(i)) >= evictBefore || (bridged && kept(i + 1))
    }
    sessions.indices.collect { case i if kept(i) => sessions(i) }.toVector
  }

  override protected def fold(
      entry: KeyWindows,
      r: Row,
      ts: Long,
      streamTime: Long,
      closedUpTo: Long,
      out: mutable.ArrayBuffer[Row]): Seq[KeyWindow] = {
    val valueIndex = keyed.valueIndex(0)
    // every session the record touches: none that could change its result has been evicted
    // ([[expiryMicros]]), so the result does not depend on when eviction ran
    val touching = entry.windows.filter { s =>
      ts >= s.start - windows.gapMicros && ts <= s.end + windows.gapMicros
    }
    val start = (ts +: touching.map(_.start)).min
    val end = (ts +: touching.map(_.end)).max
    // Kafka's rule (KStreamSessionWindowAggregate): late when the merged session ends before
    // `streamTime - grace - gap` (or before `floor - gap`, closed under an earlier run's grace:
    // [[ClosedFloors]])
    if (end + windows.graceMicros + windows.gapMicros < streamTime || end + windows.gapMicros < closedUpTo) {
      out += late(r, valueIndex); Nil
    } else {
      // As Kafka: the touched sessions' aggregates are merged into a fresh initial aggregate
      // (reduce has none: the first session's aggregate starts it)
      val aggregates = touching.map(_.aggregate)
      val merged =
        if (aggregates.isEmpty) None
        else
          Some(
            initial
              .map(i => aggregates.foldLeft(i)((a, b) => merger(a, b)))
              .getOrElse(aggregates.reduce((a, b) => merger(a, b))))
      val value = late.value(r, valueIndex)
      val folded = merged match {
        case Some(agg) => adder(agg, value)
        case None => initial.map(i => adder(i, value)).getOrElse(value)
      }
      val newTs = (ts +: touching.map(_.ts)).max
      // As Kafka: unless the record is a session of its own ([ts, ts]), every session it touches is
      // removed with a tombstone timestamped with that session's own end, even one the record
      // lands inside without changing it; then the merged session is written.
      val alone = start == ts && end == ts
      val same = alone && folded != null && touching.exists { old =>
        old.aggregate != null && newTs >= old.ts &&
        java.util.Arrays.equals(adder.serialize(folded), adder.serialize(old.aggregate))
      }
      if (same) { out += drop(DropReasons.Idempotent); Nil }
      else {
        val replaced: Set[Long] = if (alone) Set(start) else touching.map(_.start).toSet
        if (!alone) touching.foreach(old => out += late.update(entry.key, old.start, old.end, null, old.end))
        // a null aggregate deletes the session, as a put of null does in Kafka's session store
        val written = if (folded == null) None else Some(KeyWindow(start, end, folded, newTs))
        entry.windows = (entry.windows.filterNot(w => replaced(w.start)) ++ written).sortBy(_.start)
        entry.changed = true
        out += late.update(entry.key, start, end, folded, newTs)
        written.toSeq
      }
    }
  }
}
