package kstreams
package internal
package dedup

import java.nio.ByteBuffer

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}

import kstreams.internal.plan.SettingHistory
import kstreams.internal.state.StateEncoders

/** An id's entry of the global store as it was when a restart changed the interval, and the
  * partitions it was already dead for then ([[EarlierDeaths]]). */
private[kstreams] final case class DeadForPartitions(
    timestampMicros: Long,
    partition: Int,
    offset: Long,
    partitions: Seq[Int]) {

  /** Whether this is the mark of the entry `(ts, partition, offset)`: an entry written since (a
    * newer record of the id) is judged by the interval alone. */
  def marks(ts: Long, p: Int, o: Long): Boolean = ts == timestampMicros && p == partition && o == offset
}

/** What a restart that changed the interval of `deduplicate` must keep dead in one id group of the
  * global store (map state `deadFor`: id bytes -> [[DeadForPartitions]]; under
  * [[EarlierDeaths.TagKey]] the run, an index in the interval's history, that last judged the
  * group, in `timestampMicros`).
  *
  * Why this is exact (the manual, "Operating a query": from the first record after a restart every
  * stored entry is judged by the new interval, and an entry already dead under the old one when the
  * query stopped stays dead, whether or not eviction removed it): the global store judges an entry
  * by the stream time of each reading partition (spec section 2), so an entry can be dead for one
  * partition and live for another, and cannot simply be deleted as the per-partition store deletes
  * its dead entries. Every group gets a marker of every partition that delivered in a micro-batch,
  * so it runs in every micro-batch with input and its clocks are the partitions' stream times; a
  * partition's stream time moves only while it delivers, so from the run that last judged the group
  * to this one it stayed where it is now, and an entry dead for partition `p` at the end of any of
  * those runs is one with `ts < S(p) - that run's interval`: together, `ts < S(p) - the smallest of
  * their intervals`. At the group's first micro-batch of a run after a change, every entry stored
  * then is marked with the partitions it is dead for (those its earlier mark named too), and a
  * record of such a partition finds it dead; an entry written from then on is not marked, and is
  * judged by the new interval alone, as the spec's rule 2 judges any entry. A partition not seen
  * before the change has no stream time to have killed anything by. The marks are few: entries are
  * evicted once dead for every partition awaited, so what is marked is what lies between the
  * partitions' stream times; a mark goes once its timestamp is behind the eviction bound.
  */
private[kstreams] final class EarlierDeaths(handle: StatefulProcessorHandle) {
  import EarlierDeaths._

  private val state: MapState[Array[Byte], DeadForPartitions] =
    handle.getMapState[Array[Byte], DeadForPartitions](
      "deadFor",
      Encoders.BINARY,
      StateEncoders.product[DeadForPartitions],
      TTLConfig.NONE)

  /** The group's marks, after judging it under this run's interval once per run that changed it:
    * `intervals` from the checkpoint's first run to this one ([[SettingHistory.inTask]]),
    * `streamTimes` each partition's stream time as the micro-batch starts, `entries` the group's
    * stored entries (read only on a change: once per run that changed the interval), `evictBelow`
    * the bound below which the store has just evicted every id (marks below it are dropped). */
  def judge(intervals: Vector[Long], streamTimes: => Iterator[(Int, Long)], evictBelow: Long)(
      entries: => Iterator[(Array[Byte], GlobalDedupEntry)]): Marks =
    if (intervals.size == 1) NoMarks // never changed: nothing was judged under another interval
    else {
      val judgedAt = if (state.containsKey(TagKey)) state.getValue(TagKey).timestampMicros.toInt else 0
      SettingHistory.smallestSince(intervals, judgedAt).foreach { smallest =>
        val floors = streamTimes.collect { case (p, s) if s != Long.MinValue => p -> (s - smallest) }.toSeq
        val earlier = read()
        state.clear()
        entries.foreach { case (key, e) =>
          val before = earlier
            .get(ByteBuffer.wrap(key))
            .filter(_.marks(e.timestampMicros, e.partition, e.offset))
            .fold(Seq.empty[Int])(_.partitions)
          val dead = (before ++ floors.collect { case (p, floor) if e.timestampMicros < floor => p }).distinct.sorted
          if (dead.nonEmpty) state.updateValue(key, DeadForPartitions(e.timestampMicros, e.partition, e.offset, dead))
        }
        state.updateValue(TagKey, DeadForPartitions(intervals.size - 1L, 0, 0L, Nil))
      }
      val marks = read()
      val (gone, kept) = marks.partition { case (_, m) => m.timestampMicros < evictBelow }
      gone.keys.foreach(k => state.removeKey(k.array()))
      if (kept.isEmpty) NoMarks else new Marks(kept)
    }

  private def read(): Map[ByteBuffer, DeadForPartitions] =
    state.iterator().collect { case (k, m) if k.nonEmpty => ByteBuffer.wrap(k) -> m }.toMap
}

private[kstreams] object EarlierDeaths {

  /** The key of `deadFor` that holds the index of the run that last judged the group: no id is
    * empty (an id is the bytes of an `UnsafeRow`, at least its null bits). */
  val TagKey: Array[Byte] = Array.emptyByteArray

  /** A group's marks while a micro-batch runs. */
  class Marks(byKey: Map[ByteBuffer, DeadForPartitions]) {

    /** Whether the stored entry `(ts, p, o)` of `key` was already dead for `partition` when a
      * restart changed the interval. */
    def deadFor(key: Array[Byte], ts: Long, p: Int, o: Long, partition: Int): Boolean =
      byKey.get(ByteBuffer.wrap(key)).exists(m => m.marks(ts, p, o) && m.partitions.contains(partition))
  }

  object NoMarks extends Marks(Map.empty) {
    override def deadFor(key: Array[Byte], ts: Long, p: Int, o: Long, partition: Int): Boolean = false
  }
}
