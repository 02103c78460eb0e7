package kstreams
package internal
package state

import scala.collection.mutable

import org.apache.spark.sql.{Encoders, SparkSession}
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig, ValueState}

import kstreams.internal.plan.StateEncoders

/** What one group of a [[kstreams.internal.plan.TaskClocks]] processor knows of an input
  * partition: its stream time (largest timestamp so far, micros) and the processing time of the
  * last micro-batch it delivered a record in (ms; Spark's batch timestamp, which a re-run batch
  * keeps, so a restart decides the same). */
private[kstreams] final case class PartitionClock(streamTimeMicros: Long, lastRecordMs: Long)

/** Every input partition's clock as one group of a [[kstreams.internal.plan.TaskClocks]]
  * processor keeps it (map state `name`, by default `partitionClocks`; a join keeps four), read when a micro-batch starts and advanced
  * from the markers when it ends.
  *
  * [[end]] gives the stream time that every partition that can still send records has reached:
  * state that every such partition's clock has passed can go (spec section 8). A partition that
  * delivered nothing for longer than `idleMs` of processing time is not waited for, so that a
  * partition gone quiet does not hold back the eviction of the others' state (the manual, "Stream
  * time per partition"); should it come back, its records may find state of theirs evicted. A
  * partition not seen yet is waited for during the first `idleMs` of the group (a query's
  * partitions need not all deliver in its first micro-batch).
  *
  * {{{
  *   clocks.begin(timerValues.getCurrentProcessingTimeInMs())
  *   rows.foreach(r => if (marker) clocks.marker(p, ts) else judge(r, clocks.streamTime(p, batchStreamTime)))
  *   val evictBefore = clocks.end(timerValues.getCurrentProcessingTimeInMs())
  * }}}
  */
private[kstreams] final class PartitionClocks(
    handle: StatefulProcessorHandle,
    idleMs: Long,
    legacyStreamTimes: Option[MapState[Int, Long]] = None,
    name: String = "partitionClocks") {
  private val state: MapState[Int, PartitionClock] =
    handle.getMapState[Int, PartitionClock](
      name,
      Encoders.scalaInt,
      StateEncoders.product(Encoders.product[PartitionClock]),
      TTLConfig.NONE)
  private val started: ValueState[Long] =
    handle.getValueState[Long](name + "StartedMs", Encoders.scalaLong, TTLConfig.NONE)
  private val clocks = mutable.HashMap.empty[Int, PartitionClock]
  private val batchMax = mutable.HashMap.empty[Int, Long]
  private var startedMs = -1L

  /** Reads the clocks as the micro-batch starts. A store that kept only stream times
    * (`legacyStreamTimes`, written before the clocks existed) is taken over once, its partitions
    * counted as delivering now. */
  def begin(nowMs: Long): Unit = {
    clocks.clear()
    batchMax.clear()
    state.iterator().foreach { case (p, c) => clocks(p) = c }
    legacyStreamTimes.filter(_.exists()).foreach { legacy =>
      legacy.iterator().foreach { case (p, ts) =>
        val clock = PartitionClock(ts, nowMs)
        clocks(p) = clock
        state.updateValue(p, clock)
      }
      legacy.clear()
    }
    startedMs = if (started.exists()) started.get() else -1L
    if (startedMs < 0 && nowMs >= 0) { startedMs = nowMs; started.update(nowMs) }
  }

  /** The stream time of `partition` at one of its records whose stream time within the
    * micro-batch is `batchStreamTimeMicros` (its [[kstreams.internal.plan.HelperColumns.BatchStreamTime]]). */
  def streamTime(partition: Int, batchStreamTimeMicros: Long): Long =
    clocks.get(partition) match {
      case Some(c) => math.max(c.streamTimeMicros, batchStreamTimeMicros)
      case None => batchStreamTimeMicros
    }

  /** The stream time of `partition` so far (after [[end]]: at the micro-batch's end), Long.MinValue
    * before its first record. */
  def current(partition: Int): Long = clocks.get(partition).map(_.streamTimeMicros).getOrElse(Long.MinValue)

  /** Every partition's stream time so far (after [[begin]]: as the micro-batch starts). */
  def streamTimes: Iterator[(Int, Long)] = clocks.iterator.map { case (p, c) => p -> c.streamTimeMicros }

  /** The most advanced partition's stream time (Long.MinValue before any). */
  def fastest: Long = if (clocks.isEmpty) Long.MinValue else clocks.values.map(_.streamTimeMicros).max

  /** A marker: `partition` delivered records up to `maxMicros` in this micro-batch. */
  def marker(partition: Int, maxMicros: Long): Unit =
    batchMax(partition) = math.max(batchMax.getOrElse(partition, Long.MinValue), maxMicros)

  /** The stream time every partition that can still deliver has reached, at processing time
    * `nowMs`: the smallest clock of the partitions not idle (of all, the largest, when all are
    * idle); Long.MinValue while a partition not
    * seen yet may still come (within the idle time of this group's first micro-batch, since its
    * clock is unknown) or when none is known. With `nowMs` negative (unknown: a batch
    * DataFrame) no partition is idle and none is awaited. */
  def slowestWaitedFor(nowMs: Long): Long =
    if (nowMs >= 0 && nowMs - startedMs <= idleMs) Long.MinValue
    else {
      val waitedFor = clocks.values.filter(c => nowMs < 0 || c.lastRecordMs < 0 || nowMs - c.lastRecordMs <= idleMs)
      if (waitedFor.nonEmpty) waitedFor.map(_.streamTimeMicros).min
      // every partition idle: none holds the others back, the most advanced clock counts
      else if (clocks.nonEmpty) clocks.values.map(_.streamTimeMicros).max
      else Long.MinValue
    }

  /** Ends the micro-batch run at processing time `nowMs`: advances and stores the clocks of the
    * partitions that delivered, and returns [[slowestWaitedFor]]. */
  def end(nowMs: Long): Long = {
    batchMax.foreach { case (p, maxMicros) =>
      val before = clocks.get(p).map(_.streamTimeMicros).getOrElse(Long.MinValue)
      val clock = PartitionClock(math.max(before, maxMicros), nowMs)
      clocks(p) = clock
      state.updateValue(p, clock)
    }
    slowestWaitedFor(nowMs)
  }
}

private[kstreams] object PartitionClocks {

  /** The Spark setting for how long a partition may deliver nothing before it is not waited for. */
  val IdleTimeoutConf = "spark.kstreams.partitionIdleTimeout"

  /** Its default: long enough that a producer's hiccup or a slow partition of a catch-up is waited
    * for, short enough that the state a quiet partition holds back stays small. */
  val DefaultIdleTimeout = "10 minutes"

  /** The session's idle timeout in ms (an interval such as `10 minutes`, as [[kstreams.Intervals]]
    * reads it), read when the query is planned. */
  def idleTimeoutMs(spark: SparkSession): Long = {
    val text = spark.conf.get(IdleTimeoutConf, DefaultIdleTimeout)
    val micros =
      try Intervals.micros(text)
      catch {
        case e: KStreamsException =>
          throw new KStreamsException(s"$IdleTimeoutConf: ${e.getMessage}", e)
      }
    if (micros < 0) throw new KStreamsException(s"$IdleTimeoutConf must not be negative, got '$text'")
    micros / 1000
  }
}
