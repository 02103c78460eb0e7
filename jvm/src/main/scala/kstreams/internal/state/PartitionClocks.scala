package kstreams
package internal
package state

import scala.collection.mutable

import org.apache.spark.sql.{Encoders, SparkSession}
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}

/** What one group of a [[kstreams.internal.plan.TaskClocks]] processor knows of an input
  * partition: its stream time (largest timestamp so far, micros) and the processing time of the
  * last micro-batch it delivered a record in (ms; Spark's batch timestamp, which a re-run batch
  * keeps, so a restart decides the same). */
private[kstreams] final case class PartitionClock(streamTimeMicros: Long, lastRecordMs: Long)

/** Every input partition's clock as one group of a [[kstreams.internal.plan.TaskClocks]]
  * processor keeps it (map state `partitionClocks`), read when a micro-batch starts and advanced
  * from the markers when it ends.
  *
  * [[end]] gives the stream time that every partition that can still send records has reached:
  * state that every such partition's clock has passed can go (spec section 8). A partition that
  * delivered nothing for longer than `idleMs` of processing time is not waited for, so that a
  * partition gone quiet does not hold back the eviction of the others' state (README, "Stream
  * time per partition"); should it come back, its records may find state of theirs evicted.
  *
  * {{{
  *   clocks.begin()
  *   rows.foreach(r => if (marker) clocks.marker(p, ts) else judge(r, clocks.streamTime(p, batchStreamTime)))
  *   val evictBefore = clocks.end(timerValues.getCurrentProcessingTimeInMs())
  * }}}
  */
private[kstreams] final class PartitionClocks(handle: StatefulProcessorHandle, idleMs: Long) {
  private val state: MapState[Int, PartitionClock] = handle.getMapState[Int, PartitionClock](
    "partitionClocks",
    Encoders.scalaInt,
    StateEncoders.product[PartitionClock],
    TTLConfig.NONE)
  private val clocks = mutable.HashMap.empty[Int, PartitionClock]
  private val batchMax = mutable.HashMap.empty[Int, Long]

  /** Reads the clocks as the micro-batch starts. */
  def begin(): Unit = {
    clocks.clear()
    batchMax.clear()
    state.iterator().foreach { case (p, c) => clocks(p) = c }
  }

  /** The stream time of `partition` at one of its records whose stream time within the
    * micro-batch is `batchStreamTimeMicros` (its [[kstreams.internal.plan.HelperColumns.BatchStreamTime]]). */
  def streamTime(partition: Int, batchStreamTimeMicros: Long): Long =
    clocks.get(partition) match {
      case Some(c) => math.max(c.streamTimeMicros, batchStreamTimeMicros)
      case None => batchStreamTimeMicros
    }

  /** A marker: `partition` delivered records up to `maxMicros` in this micro-batch. */
  def marker(partition: Int, maxMicros: Long): Unit =
    batchMax(partition) = math.max(batchMax.getOrElse(partition, Long.MinValue), maxMicros)

  /** Ends the micro-batch run at processing time `nowMs` (negative: unknown, then no partition is
    * idle): advances and stores the clocks of the partitions that delivered, and returns the
    * smallest stream time of the partitions not idle (Long.MinValue when none is known). */
  def end(nowMs: Long): Long = {
    batchMax.foreach { case (p, maxMicros) =>
      val before = clocks.get(p).map(_.streamTimeMicros).getOrElse(Long.MinValue)
      val clock = PartitionClock(math.max(before, maxMicros), nowMs)
      clocks(p) = clock
      state.updateValue(p, clock)
    }
    val waitedFor = clocks.values.filter(c => nowMs < 0 || c.lastRecordMs < 0 || nowMs - c.lastRecordMs <= idleMs)
    if (waitedFor.isEmpty) Long.MinValue else waitedFor.map(_.streamTimeMicros).min
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
