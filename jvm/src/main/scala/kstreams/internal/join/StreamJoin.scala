package kstreams
package internal
package join

import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.{Column, Encoders, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.ValueSerializer
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

import kstreams.internal.plan._
import kstreams.internal.state.{KeyBuckets, PartitionClocks}

/** KStream-KStream windowed join (spec section 5), by each input partition's own clock: a Kafka
  * Streams task's, partition `p` of both sides (co-partitioned inputs, as Kafka needs them), its
  * stream time the largest timestamp of either side's partition `p` so far, a record with a null
  * key or value included (`KStreamKStreamJoin` advances it before it skips a record). Per key,
  * each side's records stay joinable until their task's stream time reaches
  * `t + 2 * difference + grace` (Kafka's window-store retention); a new record joins every record
  * of the other side within the time difference that is still joinable, and the result is
  * timestamped max(t1, t2). Left/outer joins emit a record that never matched once its own task's
  * stream time passes `t + difference + grace` (or at the end of a batch DataFrame), at the
  * record's timestamp; a record that comes when that has passed already is emitted unmatched at
  * once and still joins what is joinable. As in Kafka Streams 4.3, records with a null value are
  * skipped, and so are null keys except on an outer side, where they are emitted unmatched at
  * once (KIP-962).
  */
private[kstreams] object StreamJoin {
  def apply(
      left: KStream,
      right: KStream,
      joiner: (Column, Column) => Column,
      windows: JoinWindows,
      kind: JoinKind): KStream = {
    val keyed = Keyed.prepare(Seq(Keyed.SideInput(left), Keyed.SideInput(right)))
    val input = TaskClocks.prepare(keyed, join = true)
    val outputSchema = Stateful.outputSchema(
      Seq(
        keyed.keyField.copy(name = HelperColumns.Key, nullable = true),
        StructField(HelperColumns.value(0), keyed.valueTypes(0)),
        StructField(HelperColumns.value(1), keyed.valueTypes(1)),
        StructField(HelperColumns.TimestampMicros, LongType)
      ))
    val processor = new StreamJoinProcessor(
      input.layout,
      keyed.keyField.dataType,
      kind,
      windows,
      keyed.valueTypes,
      keyed.streaming,
      PartitionClocks.idleTimeoutMs(left.df.sparkSession),
      new DropMarker(outputSchema)
    )
    val name = kind match {
      case JoinKind.Inner => "kstreams_join"
      case JoinKind.Left => "kstreams_left_join"
      case JoinKind.Outer => "kstreams_outer_join"
    }
    val cols = left.columns
    val result = Stateful
      .run(
        input.grouped,
        processor,
        TaskClocks.describe(keyed.descriptor(name).windows(windows).mayChangeOnRestart("grace")),
        TimeMode.None(),
        outputSchema,
        Seq(DropReasons.NullKey, DropReasons.NullValue)
      )
      .select(
        col(HelperColumns.Key).as(cols.key),
        joiner(col(HelperColumns.value(0)), col(HelperColumns.value(1))).as(cols.value),
        Keyed.timestampColumn(col(HelperColumns.TimestampMicros), cols.timestamp, keyed.watermarkDelayMs)
      )
    KStream(result, StreamColumns(cols.key, cols.value, cols.timestamp, None, None, cols.onNullTimestamp))
  }
}

/** One buffered record of a join side: its time, whether an unmatched result is no longer owed
  * (`matched`: it joined, its window closed and a left/outer join emitted it unmatched, or its
  * side never emits unmatched results), its input partition and its value. */
private[join] final class Buffered(val ts: Long, var matched: Boolean, val partition: Int, val value: Any)

/** A key's two join buffers while one micro-batch of its group runs, each in timestamp order. */
private[join] final class KeyBuffers(val key: Any, val sides: Array[mutable.ArrayBuffer[Buffered]]) {
  var changed = false
}

/** The join over [[TaskClocks]] groups (a hash of the key). State per group: `buffers`, key (its
  * serialized bytes) -> the key and both sides' buffered records; two [[KeyBuckets]] indexes, the
  * keys under the bucket of each record's expiry (`expiryChunks`) and of each owed unmatched
  * result's close (`pendingChunks`), so that a micro-batch visits only the keys whose time came;
  * `partitionClocks` ([[PartitionClocks]]).
  *
  * Why no result depends on when eviction ran: a record is joinable for a record whose task's
  * stream time is `S` only while `t + 2 * difference + grace > S`, whether or not it is still
  * stored; it is removed once every partition still delivering is past that, and an unmatched
  * result it owes is emitted first (its own partition's clock may lag, if that partition is idle).
  */
private[kstreams] final class StreamJoinProcessor(
    layout: TaskClocks.Layout,
    keyType: DataType,
    kind: JoinKind,
    windows: JoinWindows,
    valueTypes: Seq[DataType],
    streaming: Boolean,
    idleMs: Long,
    drop: DropMarker)
    extends StatefulProcessor[Int, Row, Row]
    with RecordedSettings {

  private val keyed = layout.keyed

  private val graceHistory = new SettingHistory("grace")

  override def recorded(queryId: String, history: Seq[String]): Unit = graceHistory.record(queryId, history)

  /** This query's graces, from the checkpoint's first run's to this run's ([[SettingHistory]]); the
    * first one's bucket widths stay the indexes' for good, since their chunk keys are bucket
    * numbers. */
  @transient private var graces: Vector[Long] = _
  @transient private var earlierExpiries: EarlierExpiries = _

  @transient private var buffers: MapState[Array[Byte], Row] = _
  @transient private var expiries: KeyBuckets = _
  @transient private var pending: KeyBuckets = _
  @transient private var clocks: Array[PartitionClocks] = _ // by TaskClocks' join clock number
  @transient private lazy val keyBytes = new ValueSerializer(keyType)

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    def entries(valueType: DataType) = ArrayType(
      StructType(
        Seq(
          StructField("ts", LongType),
          StructField("matched", BooleanType),
          StructField("partition", IntegerType),
          StructField("value", valueType))))
    val schema = StructType(
      Seq(
        StructField("key", keyType),
        StructField("left", entries(valueTypes(0))),
        StructField("right", entries(valueTypes(1)))))
    buffers = getHandle.getMapState[Array[Byte], Row]("buffers", Encoders.BINARY, Encoders.row(schema), TTLConfig.NONE)
    graces = graceHistory.inTask(getHandle, streaming = streaming, current = windows.graceMicros)
    val difference = windows.timeDifferenceMicros
    expiries = new KeyBuckets(getHandle, math.max(2 * difference + graces.head, 1000L), "expiryChunks")
    pending = new KeyBuckets(getHandle, math.max(difference + graces.head, 1000L), "pendingChunks")
    earlierExpiries = new EarlierExpiries(getHandle)
    clocks = Array("partitionClocks", "leftClocks", "rightClocks", "emitClocks").map(name =>
      new PartitionClocks(getHandle, idleMs, name = name))
  }

  /** Once its task's stream time passes this, the record's window is closed: no record of the
    * other side that is not late can still match it, so a left/outer join emits it unmatched
    * (Kafka's KStreamKStreamJoin emits a non-joined record once stream time passes
    * `t + after + grace`). */
  private def closeMicros(ts: Long): Long = ts + windows.timeDifferenceMicros + windows.graceMicros

  /** Once its task's stream time reaches this, the record is not joinable any more. Why not at
    * close: a record of the other side at `t2` is not late until the stream time passes `t2 +
    * difference + grace`, and it joins records down to `t2 - difference`; so a record must stay
    * joinable until `t + 2 * difference + grace`, the retention Kafka Streams gives its join window
    * stores (`JoinWindows.size() + grace`). */
  private def expireMicros(ts: Long): Long = ts + 2 * windows.timeDifferenceMicros + windows.graceMicros

  private def emitsUnmatched(side: Int): Boolean = kind match {
    case JoinKind.Inner => false
    case JoinKind.Left => side == 0
    case JoinKind.Outer => true
  }

  private def load(bytes: ByteBuffer): Option[KeyBuffers] =
    if (!buffers.containsKey(bytes.array())) None else Some(parse(buffers.getValue(bytes.array())))

  private def parse(row: Row): KeyBuffers = {
    val sides = (1 to 2).map { i =>
      mutable.ArrayBuffer.from(
        row.getSeq[Row](i).map(e => new Buffered(e.getLong(0), e.getBoolean(1), e.getInt(2), e.get(3))))
    }
    new KeyBuffers(row.get(0), sides.toArray)
  }

  private def store(bytes: ByteBuffer, entry: KeyBuffers): Unit =
    if (entry.sides.forall(_.isEmpty)) buffers.removeKey(bytes.array())
    else {
      def rows(side: Int) = entry.sides(side).map(e => Row(e.ts, e.matched, e.partition, e.value)).toSeq
      buffers.updateValue(bytes.array(), Row(entry.key, rows(0), rows(1)))
    }

  /** Adds `e` after every buffered record with a timestamp not later than its own: a record meets
    * the other side's records in timestamp order (ties in arrival order), as Kafka's window store
    * fetch returns them. */
  private def insertByTimestamp(buffer: mutable.ArrayBuffer[Buffered], e: Buffered): Unit = {
    var at = buffer.size
    while (at > 0 && buffer(at - 1).ts > e.ts) at -= 1
    buffer.insert(at, e)
  }

  private def result(key: Any, side: Int, value: Any, otherValue: Any, ts: Long): Row =
    if (side == 0) Row(key, value, otherValue, ts, null) else Row(key, otherValue, value, ts, null)

  /** Emits the unmatched results `entry` owes whose window `due` says closed, in timestamp order,
    * the right side first on a tie, as Kafka's outer-join store orders them (key: timestamp, then
    * the side flag, 0 for right); returns whether any is still owed. */
  private def settle(entry: KeyBuffers, out: mutable.ArrayBuffer[Row])(due: (Int, Buffered) => Boolean): Boolean = {
    val owed = (0 to 1).flatMap(side => entry.sides(side).collect { case e if !e.matched => (side, e) })
    owed.filter { case (side, e) => due(side, e) }.sortBy { case (side, e) => (e.ts, 1 - side) }.foreach {
      case (side, e) =>
        if (emitsUnmatched(side)) out += result(entry.key, side, e.value, null, e.ts)
        e.matched = true
        entry.changed = true
    }
    owed.exists { case (_, e) => !e.matched }
  }

  override def handleInputRows(group: Int, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val nowMs = timerValues.getCurrentProcessingTimeInMs()
    clocks.foreach(_.begin(nowMs))
    val cache = mutable.HashMap.empty[ByteBuffer, KeyBuffers]
    def cached(bytes: ByteBuffer, key: => Any): Option[KeyBuffers] =
      cache.get(bytes).orElse {
        val found =
          load(bytes).orElse(Option(key).map(k => new KeyBuffers(k, Array.fill(2)(mutable.ArrayBuffer.empty))))
        found.foreach(cache(bytes) = _)
        found
      }
    val emitClock = clocks(TaskClocks.EmitClock)
    val out = mutable.ArrayBuffer.empty[Row]
    // before any clock moves, once per run that changed the grace: every buffered record is marked
    // with the partitions it was no longer joinable for (EarlierExpiries); an unmatched result that
    // was due when the query stopped (its close by the smallest grace since the group was last
    // judged passed: it would have gone out as soon as its key or its bucket was visited) is
    // emitted now, before any record can match it; the others go under their close by the new
    // grace (a shorter one closes them sooner)
    val marks = earlierExpiries.judge(
      graces,
      windows.timeDifferenceMicros,
      side =>
        clocks(TaskClocks.sideClock(side)).streamTimes.filter(_._2 != Long.MinValue).toSeq)(buffers.iterator().map {
      case (k, row) => k -> parse(row)
    }) { (bytes, entry, smallestGrace) =>
      settle(entry, out)((_, e) => e.ts + windows.timeDifferenceMicros + smallestGrace < emitClock.current(e.partition))
      if (entry.changed) store(bytes, entry)
      entry.sides.flatten.filter(!_.matched).foreach(e => pending.add(closeMicros(e.ts), bytes))
    }
    val order = new TaskOrderCheck(layout)
    rows.foreach { r =>
      val partition = order.check(group, r)
      // clock `c` of this record's partition at this record (its own time included)
      def clock(c: Int): Long = clocks(c).streamTime(partition, r.getLong(layout.clockIndex(c)))
      if (r.getBoolean(layout.markerIndex))
        clocks.indices.foreach(c => clocks(c).marker(partition, r.getLong(layout.clockIndex(c))))
      else {
        val ts = r.getLong(keyed.timestampMicrosIndex)
        val side = r.getInt(keyed.sideIndex)
        val value = r.get(keyed.valueIndex(side))
        val keyValue = r.get(keyed.keyIndex)
        // Kafka Streams 4.3 (KStreamKStreamJoin, KIP-962): a null-key record of an outer side (left of
        // a left join, either side of an outer join) is emitted unmatched at once; other null keys
        // and every null value are skipped (StreamStreamJoinUtil.skipRecord)
        if (keyValue == null && value != null && emitsUnmatched(side)) out += result(null, side, value, null, ts)
        else if (keyValue == null) out += drop(DropReasons.NullKey)
        else if (value == null) out += drop(DropReasons.NullValue)
        else {
          val bytes = ByteBuffer.wrap(keyBytes(keyValue))
          val entry = cached(bytes, keyValue).get
          // As Kafka (with its emit interval 0): the unmatched results owed are emitted once the
          // emit clock passes their close, before the record that moved it is joined; so all those
          // it has passed by now leave before this record's results, whichever micro-batch that was in
          val emitTime = clock(TaskClocks.EmitClock)
          settle(entry, out)((_, e) =>
            closeMicros(e.ts) < (if (e.partition == partition) emitTime else emitClock.current(e.partition)))
          // the other side's records still in its window store (its own time: Kafka's in-memory
          // window store keeps a record while `t + retention` is after the largest time put)
          val otherStoreTime = clock(TaskClocks.sideClock(1 - side))
          var matched = false
          val others = entry.sides(1 - side)
          // null: no record of the other side was unjoinable for a partition when the grace changed
          val unjoinable = marks.of(bytes, 1 - side, others)
          others.indices.foreach { i =>
            val other = others(i)
            val joinable = expireMicros(other.ts) > otherStoreTime &&
              (unjoinable == null || unjoinable(i) == null || !unjoinable(i).contains(partition))
            if (joinable && Math.abs(ts - other.ts) <= windows.timeDifferenceMicros) {
              out += result(keyValue, side, value, other.value, Math.max(ts, other.ts))
              if (!other.matched) { other.matched = true; entry.changed = true }
              matched = true
            }
          }
          // Kafka: a record that finds no match and whose window already ended (`t + difference`
          // before the task's stream time) is emitted unmatched at once; it still joins later records
          // of the other side while its window store keeps it
          val ended = ts + windows.timeDifferenceMicros < clock(TaskClocks.TaskClock)
          if (ended && !matched && emitsUnmatched(side)) out += result(keyValue, side, value, null, ts)
          if (expireMicros(ts) > clock(TaskClocks.sideClock(side))) {
            val owed = emitsUnmatched(side) && !matched && !ended
            insertByTimestamp(entry.sides(side), new Buffered(ts, !owed, partition, value))
            entry.changed = true
            expiries.add(expireMicros(ts), bytes)
            if (owed) pending.add(closeMicros(ts), bytes)
          }
        }
      }
    }
    val evictBefore = clocks.map(_.end(nowMs)) // per clock: the slowest partition awaited
    expiries.flush()
    pending.flush()
    if (!streaming) {
      // a batch DataFrame is the whole input: every window closes at its end
      cache.values.foreach(entry => settle(entry, out)((_, _) => true))
    } else {
      // the unmatched results whose close the emit clock of their own partition passed; a key with
      // some still owed is listed again (a lagging partition's are read each micro-batch)
      pending.removeDead(emitClock.fastest) { bytes =>
        cached(bytes, null).foreach { entry =>
          val owedStill = settle(entry, out)((_, e) => closeMicros(e.ts) < emitClock.current(e.partition))
          if (owedStill)
            entry.sides.flatten.filter(!_.matched).foreach(e => pending.add(closeMicros(e.ts), bytes))
        }
      }
      pending.flush()
      // a side's record goes once every partition awaited has put a record of that side
      // `retention` after it (each side's window store by its own time); the keys of the buckets
      // the faster side passed are visited, and list again what the slower side keeps
      val sideBounds = (0 to 1).map(side => evictBefore(TaskClocks.sideClock(side)))
      val visitBefore = sideBounds.max
      if (visitBefore != Long.MinValue) expiries.removeDead(visitBefore) { bytes =>
        cached(bytes, null).foreach { entry =>
          // what an expiring record owes is emitted before it goes (its partition may be idle)
          settle(entry, out)((side, e) => expireMicros(e.ts) <= sideBounds(side))
          (0 to 1).foreach { side =>
            val kept = entry.sides(side).filter(e => expireMicros(e.ts) > sideBounds(side))
            if (kept.size != entry.sides(side).size) { entry.sides(side) = kept; entry.changed = true }
            kept.foreach(e => expiries.add(expireMicros(e.ts), bytes))
          }
          marks.kept(bytes, entry)
        }
      }
      expiries.flush()
      cache.foreach { case (bytes, entry) => if (entry.changed) store(bytes, entry) }
    }
    out.iterator
  }
}
