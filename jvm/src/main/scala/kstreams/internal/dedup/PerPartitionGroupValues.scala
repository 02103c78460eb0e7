package kstreams
package internal
package dedup

import java.nio.ByteBuffer

import org.apache.spark.sql.streaming.{MapState, ValueState}

import kstreams.internal.state.Sweeper

/** A per-partition dedup group's small values ([[PerPartitionDedupProcessor]]): its partition's
  * stream time, its store's mode ([[DedupStoreMode]]), when its partition last delivered
  * (processing time) and its pending sweep timer. Kept in one of two layouts
  * ([[kstreams.internal.plan.StateLayout]]):
  *  - 1, every checkpoint written before layout 2 existed: a state variable each, `streamTimes`
  *    (partition -> stream time), `mode`, `lastRecordMs` and the [[Sweeper]]'s `sweepTimer`;
  *  - 2, every new checkpoint: one value under [[TimeBucketChunks.MetaKey]] of the `chunks` map
  *    the store declares anyway ([[PerPartitionGroupValues.Packed]]); with the chunk counts there
  *    too (`countsInChunks`), a task builds two map states and three value states fewer (issue 33:
  *    about 75 ms of each task's start on the project's 2-core machine).
  *
  * Layout 2 reads and writes its one value per call (a RocksDB get of 38 bytes, and a put per
  * change): a group makes a handful per micro-batch (when its store opens and closes), not per
  * record.
  */
private[kstreams] sealed trait PerPartitionGroupValues {

  /** `partition`'s stream time (Long.MinValue before its first record). */
  def streamTime(partition: Int): Long

  /** Sets `partition`'s stream time to `micros`, a later one than it had. */
  def advance(partition: Int, micros: Long): Unit

  /** The stream time of the group's partition (Long.MinValue before its first record). */
  def ownStreamTime: Long

  /** The store's mode; null before the group's first store. */
  def mode: DedupStoreMode
  def mode_=(mode: DedupStoreMode): Unit
  def clearMode(): Unit

  /** When (processing time, ms) the group's partition last delivered records. */
  def lastRecordMs: Option[Long]
  def lastRecordMs_=(ms: Long): Unit

  /** Where the [[Sweeper]] keeps its pending timer: `None` for its own `sweepTimer` variable. */
  def pendingSweep: Option[Sweeper.PendingTimer]
}

private[kstreams] object PerPartitionGroupValues {

  /** Layout 1's variables (declared by the processor's `init`, in layout 1's order). */
  final class Separate(
      streamTimes: MapState[Int, Long],
      modeState: ValueState[DedupStoreMode],
      lastRecord: ValueState[Long])
      extends PerPartitionGroupValues {
    def streamTime(partition: Int): Long =
      if (streamTimes.containsKey(partition)) streamTimes.getValue(partition) else Long.MinValue
    def advance(partition: Int, micros: Long): Unit = streamTimes.updateValue(partition, micros)
    def ownStreamTime: Long = streamTimes.values().foldLeft(Long.MinValue)(math.max)
    def mode: DedupStoreMode = modeState.get()
    def mode_=(mode: DedupStoreMode): Unit = modeState.update(mode)
    def clearMode(): Unit = modeState.clear()
    def lastRecordMs: Option[Long] = if (lastRecord.exists()) Some(lastRecord.get()) else None
    def lastRecordMs_=(ms: Long): Unit = lastRecord.update(ms)
    def pendingSweep: Option[Sweeper.PendingTimer] = None
  }

  /** Layout 2's one value (Long.MinValue: none; partition -1: none yet). */
  final case class Packed(
      partition: Int,
      streamTimeMicros: Long,
      mode: DedupStoreMode,
      lastRecordMs: Long,
      sweepAtMs: Long) {
    def encode: Array[Byte] = {
      val out = ByteBuffer.allocate(Packed.Bytes).put(Packed.Version).putInt(partition).putLong(streamTimeMicros)
      if (mode == null) out.put(0: Byte).putLong(0L)
      else out.put((if (mode.spilled) 2 else 1).toByte).putLong(mode.token)
      out.putLong(lastRecordMs).putLong(sweepAtMs).array()
    }
  }

  object Packed {
    val Version: Byte = 1
    val Bytes: Int = 1 + 4 + 8 + 1 + 8 + 8 + 8
    val Empty: Packed = Packed(-1, Long.MinValue, null, Long.MinValue, Long.MinValue)

    def decode(bytes: Array[Byte]): Packed = {
      val in = ByteBuffer.wrap(bytes)
      val version = in.get()
      if (version != Version)
        throw new KStreamsException(
          s"this dedup state was written by a later kstreams release (values version $version): run it with that release")
      val partition = in.getInt()
      val streamTime = in.getLong()
      val modeTag = in.get()
      val token = in.getLong()
      val mode = modeTag match {
        case 0 => null
        case 1 => DedupStoreMode(token, spilled = false)
        case _ => DedupStoreMode(token, spilled = true)
      }
      Packed(partition, streamTime, mode, in.getLong(), in.getLong())
    }
  }

  /** Layout 2: the values in `buckets`' `chunks` map ([[TimeBucketChunks.meta]]). */
  final class InChunks(buckets: TimeBucketChunks) extends PerPartitionGroupValues {
    private def read: Packed = buckets.meta.fold(Packed.Empty)(Packed.decode)
    private def change(f: Packed => Packed): Unit = buckets.meta = Some(f(read).encode)

    def streamTime(partition: Int): Long = {
      val p = read
      // a group is one input partition (CompactInput): another one here would be a planning bug
      if (p.partition != -1 && p.partition != partition)
        throw new IllegalStateException(s"dedup group of partition ${p.partition} got a record of partition $partition")
      p.streamTimeMicros
    }
    def advance(partition: Int, micros: Long): Unit = change(_.copy(partition = partition, streamTimeMicros = micros))
    def ownStreamTime: Long = read.streamTimeMicros
    def mode: DedupStoreMode = read.mode
    def mode_=(mode: DedupStoreMode): Unit = change(_.copy(mode = mode))
    def clearMode(): Unit = change(_.copy(mode = null))
    def lastRecordMs: Option[Long] = Some(read.lastRecordMs).filter(_ != Long.MinValue)
    def lastRecordMs_=(ms: Long): Unit = change(_.copy(lastRecordMs = ms))
    val pendingSweep: Option[Sweeper.PendingTimer] = Some(new Sweeper.PendingTimer {
      def atMs: Long = read.sweepAtMs
      def clear(): Unit = change(_.copy(sweepAtMs = Long.MinValue))
      def update(atMs: Long): Unit = change(_.copy(sweepAtMs = atMs))
    })
  }
}
