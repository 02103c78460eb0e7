package kstreams
package internal
package dedup

import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}

import kstreams.internal.plan.{SettingHistory, StateEncoders}

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
  * before the change has no stream time to have killed anything by.
  *
  * A mark lives as long as its entry: it goes when the entry is replaced, purged or evicted
  * ([[Marks.forget]], also for an entry that looks the same, as without an offset column). And it
  * names partition `p` only while the entry is live for `p` by this run's interval: once
  * `ts < S(p) - interval` the entry is dead for `p` anyway, and `S(p)` only grows (a later change
  * judges it again). So what is marked is what a longer interval would bring back: entries between
  * the partitions' stream times minus the old interval and minus the new one, held in memory while
  * the group runs.
  */
private[kstreams] final class EarlierDeaths(handle: StatefulProcessorHandle) {
  import EarlierDeaths._

  private val state: MapState[Array[Byte], DeadForPartitions] =
    handle.getMapState[Array[Byte], DeadForPartitions](
      "deadFor",
      Encoders.BINARY,
      StateEncoders.product(Encoders.product[DeadForPartitions]),
      TTLConfig.NONE)

  /** The group's marks as stored: `intervals` from the checkpoint's first run to this one
    * ([[SettingHistory.inTask]]; one interval: never changed, so none, and nothing is read). */
  def load(intervals: Vector[Long]): Marks = {
    val marks = new Marks(if (intervals.size == 1) null else state)
    if (intervals.size > 1)
      state.iterator().foreach { case (k, m) => if (k.nonEmpty) marks.byKey(ByteBuffer.wrap(k)) = m }
    marks
  }

  /** Judges the group under this run's interval once per run that changed it, before any record:
    * `streamTimes` each partition's stream time as the micro-batch starts (read only after a
    * change), `entries` the group's stored entries (read only on a change). Then drops from `marks` the partitions an entry is dead
    * for by this run's interval anyway. */
  def judge(marks: Marks, intervals: Vector[Long], streamTimes: => Seq[(Int, Long)])(
      entries: => Iterator[(Array[Byte], GlobalDedupEntry)]): Unit =
    if (intervals.size > 1) {
      val times = streamTimes.filter(_._2 != Long.MinValue).toMap
      // the partitions of `ps` for which `ts` is still live by this run's interval
      def stillLive(ts: Long, ps: Seq[Int]): Seq[Int] =
        ps.filter(p => times.get(p).forall(s => ts >= s - intervals.last))
      val judgedAt = if (state.containsKey(TagKey)) state.getValue(TagKey).timestampMicros.toInt else 0
      SettingHistory.smallestSince(intervals, judgedAt).foreach { smallest =>
        val earlier = marks.byKey.clone()
        marks.byKey.clear()
        state.clear()
        entries.foreach { case (key, e) =>
          val before = earlier
            .get(ByteBuffer.wrap(key))
            .filter(_.marks(e.timestampMicros, e.partition, e.offset))
            .fold(Seq.empty[Int])(_.partitions)
          val now = times.collect { case (p, s) if e.timestampMicros < s - smallest => p }
          val dead = stillLive(e.timestampMicros, (before ++ now).distinct.sorted)
          if (dead.nonEmpty) {
            val mark = DeadForPartitions(e.timestampMicros, e.partition, e.offset, dead)
            marks.byKey(ByteBuffer.wrap(key)) = mark
            state.updateValue(key, mark)
          }
        }
        state.updateValue(TagKey, DeadForPartitions(intervals.size - 1L, 0, 0L, Nil))
      }
      marks.byKey.toSeq.foreach { case (k, m) =>
        val left = stillLive(m.timestampMicros, m.partitions)
        if (left.isEmpty) marks.forget(k.array())
        else if (left.size != m.partitions.size) {
          marks.byKey(k) = m.copy(partitions = left)
          state.updateValue(k.array(), m.copy(partitions = left))
        }
      }
    }
}

private[kstreams] object EarlierDeaths {

  /** The key of `deadFor` that holds the index of the run that last judged the group: no id is
    * empty (an id is the bytes of an `UnsafeRow`, at least its null bits). */
  val TagKey: Array[Byte] = Array.emptyByteArray

  /** A group's marks while a micro-batch (or a timer) runs; `state` null when the interval never
    * changed (then there are none). */
  final class Marks private[EarlierDeaths] (state: MapState[Array[Byte], DeadForPartitions]) {
    private[EarlierDeaths] val byKey = mutable.HashMap.empty[ByteBuffer, DeadForPartitions]

    /** Whether the stored entry `(ts, p, o)` of `key` was already dead for `partition` when a
      * restart changed the interval. */
    def deadFor(key: Array[Byte], ts: Long, p: Int, o: Long, partition: Int): Boolean =
      byKey.nonEmpty && byKey
        .get(ByteBuffer.wrap(key))
        .exists(m => m.marks(ts, p, o) && m.partitions.contains(partition))

    /** `key`'s entry was replaced, purged or evicted: its mark, if any, goes with it. */
    def forget(key: Array[Byte]): Unit =
      if (byKey.nonEmpty && byKey.remove(ByteBuffer.wrap(key)).isDefined) state.removeKey(key)
  }
}
