package kstreams
package internal
package join

import scala.collection.mutable

import org.apache.spark.sql.{Column, Encoders, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types._

import kstreams.internal.plan._

/** KStream-KStream windowed join (spec section 5). Per key, each side's records stay buffered for
  * Kafka's window-store retention (watermark below `t + 2 * difference + grace`); a new record
  * joins every buffered record of the other side within the time difference, and the result is
  * timestamped max(t1, t2). Left/outer joins emit a record that never matched when its window
  * closes (watermark past `t + difference + grace`), at the record's timestamp (or at the end of
  * a batch DataFrame). Records are never dropped for being late: a late record still joins what is
  * buffered, and an unmatched one is emitted at once. As in Kafka Streams 4.3, records with a null
  * value are skipped, and so are null keys except on an outer side, where they are emitted
  * unmatched at once (KIP-962).
  */
private[kstreams] object StreamJoin {
  def apply(
      left: KStream,
      right: KStream,
      joiner: (Column, Column) => Column,
      windows: JoinWindows,
      kind: JoinKind): KStream = {
    val input = Keyed.prepare(Seq(Keyed.SideInput(left), Keyed.SideInput(right)))
    val outputSchema = Stateful.outputSchema(
      Seq(
        input.keyField.copy(name = HelperColumns.Key, nullable = true),
        StructField(HelperColumns.value(0), input.valueTypes(0)),
        StructField(HelperColumns.value(1), input.valueTypes(1)),
        StructField(HelperColumns.TimestampMicros, LongType)
      ))
    val processor = new StreamJoinProcessor(
      input.layout,
      kind,
      windows,
      input.valueTypes,
      input.streaming,
      new DropMarker(outputSchema))
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
        input.descriptor(name).windows(windows),
        Stateful.eventTime(input.streaming),
        outputSchema,
        name,
        Seq(DropReasons.NullKey, DropReasons.NullValue)
      )
      .select(
        col(HelperColumns.Key).as(cols.key),
        joiner(col(HelperColumns.value(0)), col(HelperColumns.value(1))).as(cols.value),
        Keyed.timestampColumn(col(HelperColumns.TimestampMicros), cols.timestamp, input.watermarkDelayMs)
      )
    KStream(result, StreamColumns(cols.key, cols.value, cols.timestamp, None, None, cols.onNullTimestamp))
  }
}

/** One key's join buffers: per side an array of (ts, matched, value) in timestamp order, kept in
  * one ValueState and rewritten once per micro-batch; one event-time timer at the earliest window
  * close or expiry. `matched` means no unmatched result is owed: the record joined, its window
  * closed (and a left/outer join emitted it unmatched) while it stays joinable, or its side never
  * emits unmatched records (both sides of an inner join, the right of a left join), so such a
  * record wakes the processor only to expire. */
private[kstreams] final class StreamJoinProcessor(
    layout: Keyed.Layout,
    kind: JoinKind,
    windows: JoinWindows,
    valueTypes: Seq[DataType],
    streaming: Boolean,
    drop: DropMarker)
    extends StatefulProcessor[Row, Row, Row] {

  private final class Buffered(val ts: Long, var matched: Boolean, val value: Any)

  @transient private var buffers: ValueState[Row] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    def entries(valueType: DataType) = ArrayType(
      StructType(
        Seq(StructField("ts", LongType), StructField("matched", BooleanType), StructField("value", valueType))))
    val schema = StructType(
      Seq(StructField("left", entries(valueTypes(0))), StructField("right", entries(valueTypes(1)))))
    buffers = getHandle.getValueState[Row]("buffers", Encoders.row(schema), TTLConfig.NONE)
  }

  /** Once the watermark passes this, the record's window is closed: no record of the other side
    * that is not late can still match it, so a left/outer join emits it unmatched (Kafka's
    * KStreamKStreamJoin emits a non-joined record once stream time passes `t + after + grace`). */
  private def closeMicros(ts: Long): Long = ts + windows.timeDifferenceMicros + windows.graceMicros

  /** Once the watermark reaches this, the record is dropped from the buffer. Why not at close: a
    * record of the other side at `t2` is not late until the watermark passes `t2 + difference +
    * grace`, and it joins records down to `t2 - difference`; so a record must stay joinable until
    * `t + 2 * difference + grace`, which is the retention Kafka Streams gives its join window stores
    * (`JoinWindows.size() + grace`; its in-memory store expires a record once stream time reaches
    * `t + retention`). */
  private def expireMicros(ts: Long): Long = ts + 2 * windows.timeDifferenceMicros + windows.graceMicros

  private def emitsUnmatched(side: Int): Boolean = kind match {
    case JoinKind.Inner => false
    case JoinKind.Left => side == 0
    case JoinKind.Outer => true
  }

  private def load(): Array[mutable.ArrayBuffer[Buffered]] = {
    val sides = Array.fill(2)(mutable.ArrayBuffer.empty[Buffered])
    Option(buffers.get()).foreach { state =>
      (0 to 1).foreach { side =>
        state.getSeq[Row](side).foreach(e => sides(side) += new Buffered(e.getLong(0), e.getBoolean(1), e.get(2)))
        sides(side) = sides(side).sortBy(_.ts) // stable; buffers written by older versions were in arrival order
      }
    }
    sides
  }

  /** Adds `e` after every buffered record with a timestamp not later than its own: a record meets
    * the other side's records in timestamp order (ties in arrival order), as Kafka's window store
    * fetch returns them. */
  private def insertByTimestamp(buffer: mutable.ArrayBuffer[Buffered], e: Buffered): Unit = {
    var at = buffer.size
    while (at > 0 && buffer(at - 1).ts > e.ts) at -= 1
    buffer.insert(at, e)
  }

  private def store(sides: Array[mutable.ArrayBuffer[Buffered]]): Unit = {
    getHandle.listTimers().foreach(getHandle.deleteTimer)
    if (sides.forall(_.isEmpty)) buffers.clear()
    else {
      buffers.update(
        Row(
          sides(0).map(e => Row(e.ts, e.matched, e.value)).toSeq,
          sides(1).map(e => Row(e.ts, e.matched, e.value)).toSeq))
      if (streaming) {
        // a timer fires once the watermark (ms) reaches it: at close, once the watermark passes
        // it; at expiry, once the watermark reaches it
        val earliestMs = sides.flatten.map { e =>
          if (e.matched) Math.floorDiv(expireMicros(e.ts) + 999L, 1000L)
          else Math.floorDiv(closeMicros(e.ts), 1000L) + 1
        }.min
        getHandle.registerTimer(earliestMs)
      }
    }
  }

  private def result(key: Any, side: Int, value: Any, otherValue: Any, ts: Long): Row =
    if (side == 0) Row(key, value, otherValue, ts, null) else Row(key, otherValue, value, ts, null)

  /** Settles the entries whose window closed (all of them when `everything`), emitting unmatched
    * ones if the join kind asks, then drops the expired ones. Unmatched results leave in timestamp
    * order, the right side first on a tie, as Kafka's outer-join store orders them (key: timestamp,
    * then the side flag, 0 for right). */
  private def evict(
      key: Any,
      sides: Array[mutable.ArrayBuffer[Buffered]],
      watermarkMicros: Long,
      everything: Boolean,
      out: mutable.ArrayBuffer[Row]): Unit = {
    val closing = (0 to 1).flatMap(side =>
      sides(side).collect {
        case e if !e.matched && (everything || closeMicros(e.ts) < watermarkMicros) => (side, e)
      })
    closing.sortBy { case (side, e) => (e.ts, 1 - side) }.foreach { case (side, e) =>
      if (emitsUnmatched(side)) out += result(key, side, e.value, null, e.ts)
      e.matched = true
    }
    (0 to 1).foreach { side =>
      sides(side) = sides(side).filterNot(e => everything || expireMicros(e.ts) <= watermarkMicros)
    }
  }

  override def handleInputRows(key: Row, rows: Iterator[Row], timerValues: TimerValues): Iterator[Row] = {
    val keyValue = key.get(0)
    val watermarkMicros = if (streaming) timerValues.getCurrentWatermarkInMs() * 1000L else Long.MinValue
    val sides = load()
    val out = mutable.ArrayBuffer.empty[Row]
    evict(keyValue, sides, watermarkMicros, everything = false, out)
    Keyed.arrivalOrder(rows, layout).foreach { r =>
      val side = r.getInt(layout.sideIndex)
      val value = r.get(layout.valueIndex(side))
      // Kafka Streams 4.3 (KStreamKStreamJoin, KIP-962): a null-key record of an outer side (left of
      // a left join, either side of an outer join) is emitted unmatched at once; other null keys
      // and every null value are skipped (StreamStreamJoinUtil.skipRecord)
      if (keyValue == null && value != null && emitsUnmatched(side))
        out += result(keyValue, side, value, null, r.getLong(layout.tsIndex))
      else if (keyValue == null) out += drop(DropReasons.NullKey)
      else if (value == null) out += drop(DropReasons.NullValue)
      else {
        val ts = r.getLong(layout.tsIndex)
        var matched = false
        sides(1 - side).foreach { other =>
          if (Math.abs(ts - other.ts) <= windows.timeDifferenceMicros) {
            out += result(keyValue, side, value, other.value, Math.max(ts, other.ts))
            other.matched = true
            matched = true
          }
        }
        // a late record (its window already closed) is emitted unmatched at once, and stays
        // joinable for later records of the other side until it expires, as in Kafka's window store
        val closed = closeMicros(ts) < watermarkMicros
        if (closed && !matched && emitsUnmatched(side)) out += result(keyValue, side, value, null, ts)
        if (expireMicros(ts) > watermarkMicros)
          insertByTimestamp(sides(side), new Buffered(ts, matched || closed || !emitsUnmatched(side), value))
      }
    }
    // a batch DataFrame is the whole input: every window closes at its end
    if (!streaming) evict(keyValue, sides, watermarkMicros, everything = true, out)
    else store(sides)
    out.iterator
  }

  override def handleExpiredTimer(
      key: Row,
      timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo): Iterator[Row] = {
    val sides = load()
    val out = mutable.ArrayBuffer.empty[Row]
    evict(key.get(0), sides, timerValues.getCurrentWatermarkInMs() * 1000L, everything = false, out)
    store(sides)
    out.iterator
  }
}
