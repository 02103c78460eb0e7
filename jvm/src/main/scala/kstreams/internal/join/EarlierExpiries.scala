package kstreams
package internal
package join

import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}

import kstreams.internal.plan.{SettingHistory, StateEncoders}

/** The first `count` records, in buffer order, of one side of a key's join buffers with timestamp
  * `ts` from input partition `partition`, and the partitions for which they were no longer joinable
  * when a restart changed the grace ([[EarlierExpiries]]). */
private[kstreams] final case class ExpiredRun(side: Int, ts: Long, partition: Int, count: Int, partitions: Seq[Int])

/** A key's [[ExpiredRun]]s, in buffer order per side. */
private[kstreams] final case class ExpiredRuns(runs: Seq[ExpiredRun])

/** What a restart that changed a stream-stream join's grace must keep unjoinable in one group of
  * the join (map state `expiredFor`: key bytes -> [[ExpiredRuns]]; under [[EarlierExpiries.TagKey]]
  * the run, an index in the grace's history, that last judged the group, in the one run's `ts`).
  *
  * Why this is exact (the manual, "Operating a query": from the first record after a restart every
  * record is judged by the new grace, and one no longer joinable under the old grace when the query
  * stopped stays so, whether or not eviction removed it): a buffered record of side `s` is joinable
  * for a record of partition `p` only while `t + 2 * difference + grace` is after `p`'s window-store
  * time of side `s` ([[StreamJoinProcessor]]), so it can be unjoinable for one partition and
  * joinable for another, and cannot simply be deleted. Every group gets the markers of every
  * partition that delivered in a micro-batch, so its clocks are the partitions' own; a clock moves
  * only while its partition delivers, so from the run that last judged the group to this one it
  * stayed where it is now, and a record unjoinable for `p` at the end of any of those runs is one
  * with `t + 2 * difference + that run's grace <= p's time`: together, with the smallest of their
  * graces. At the group's first micro-batch of a run after a change, every buffered record is marked
  * with the partitions it is unjoinable for (with those an earlier mark named); a record buffered
  * later is judged by the new grace alone. Records of one side with the same timestamp and partition
  * are told apart by their order: a later one is inserted after them, and all of them expire
  * together. A mark leaves with its records (evicted once unjoinable for every partition awaited),
  * and a group's marks are held in memory while it runs.
  */
private[join] final class EarlierExpiries(handle: StatefulProcessorHandle) {
  import EarlierExpiries._

  private val state: MapState[Array[Byte], ExpiredRuns] =
    handle.getMapState[Array[Byte], ExpiredRuns](
      "expiredFor",
      Encoders.BINARY,
      StateEncoders.product(Encoders.product[ExpiredRuns]),
      TTLConfig.NONE)

  /** The group's marks, after judging it under this run's grace once per run that changed it:
    * `graces` from the checkpoint's first run to this one ([[SettingHistory.inTask]]), `sideTimes`
    * each partition's window-store time of a side as the micro-batch starts, `buffered` the group's
    * keys and buffers (read only on a change); `judged` is called with each key judged and the
    * smallest grace of the runs since the group was last judged. */
  def judge(graces: Vector[Long], differenceMicros: Long, sideTimes: Int => Seq[(Int, Long)])(
      buffered: => Iterator[(Array[Byte], KeyBuffers)])(judged: (ByteBuffer, KeyBuffers, Long) => Unit): Marks =
    if (graces.size == 1) new Marks(mutable.HashMap.empty) // never changed: nothing judged under another
    else {
      val judgedAt = if (state.containsKey(TagKey)) state.getValue(TagKey).runs.head.ts.toInt else 0
      SettingHistory.smallestSince(graces, judgedAt).foreach { smallest =>
        val times = (0 to 1).map(sideTimes)
        val earlier = read()
        state.clear()
        buffered.foreach { case (key, entry) =>
          val before = earlier.getOrElse(ByteBuffer.wrap(key), Nil)
          val runs = (0 to 1).flatMap { side =>
            // a record unjoinable for `p`: t + 2 * difference + smallest <= p's time of its side
            def unjoinableFor(ts: Long) =
              times(side).collect { case (p, time) if ts + 2 * differenceMicros + smallest <= time => p }
            runsOf(entry.sides(side)).flatMap { case (ts, partition, count) =>
              // the first of them may carry an earlier mark of their own
              val marked = before.filter(r => r.side == side && r.ts == ts && r.partition == partition)
              val now = unjoinableFor(ts)
              val segments = mutable.ArrayBuffer.empty[ExpiredRun]
              var left = count
              marked.foreach { r =>
                val n = math.min(r.count, left)
                if (n > 0) segments += ExpiredRun(side, ts, partition, n, (r.partitions ++ now).distinct.sorted)
                left -= n
              }
              if (left > 0) segments += ExpiredRun(side, ts, partition, left, now.distinct.sorted)
              // only the last can be empty (an earlier mark names some partition): dropping it
              // leaves the others' positions as they are
              segments.filter(_.partitions.nonEmpty)
            }
          }
          if (runs.nonEmpty) state.updateValue(key, ExpiredRuns(runs))
          judged(ByteBuffer.wrap(key), entry, smallest)
        }
        state.updateValue(TagKey, ExpiredRuns(Seq(ExpiredRun(0, graces.size - 1L, 0, 0, Nil))))
      }
      new Marks(read())
    }

  private def read(): mutable.HashMap[ByteBuffer, Seq[ExpiredRun]] = {
    val out = mutable.HashMap.empty[ByteBuffer, Seq[ExpiredRun]]
    state.iterator().foreach { case (k, v) => if (k.nonEmpty) out(ByteBuffer.wrap(k)) = v.runs }
    out
  }

  /** A group's marks while a micro-batch runs. */
  final class Marks(byKey: mutable.HashMap[ByteBuffer, Seq[ExpiredRun]]) {

    /** Per record of `buffer` (one side of `key`'s buffers, in order), the partitions it is
      * unjoinable for by a mark; null where none (the usual case: no marks at all). */
    def of(key: ByteBuffer, side: Int, buffer: collection.Seq[Buffered]): Array[Seq[Int]] =
      if (byKey.isEmpty) null // per joined record: no hash of the key when the grace never changed
      else
        byKey.get(key).map(_.filter(_.side == side)).filter(_.nonEmpty).fold[Array[Seq[Int]]](null) { runs =>
          val segments = runs.groupBy(r => (r.ts, r.partition)) // each in buffer order
          val seen = mutable.HashMap.empty[(Long, Int), Int]
          buffer.map { e =>
            val id = (e.ts, e.partition)
            val at = seen.getOrElse(id, 0) // this record is occurrence `at` of its (ts, partition)
            seen(id) = at + 1
            var start = 0
            var partitions: Seq[Int] = null
            segments.getOrElse(id, Nil).foreach { r =>
              if (partitions == null && at < start + r.count) partitions = r.partitions
              start += r.count
            }
            partitions
          }.toArray
        }

    /** Drops the marks of `key`'s records that left its buffers (all those of a timestamp leave
      * together). */
    def kept(key: ByteBuffer, entry: KeyBuffers): Unit =
      byKey.get(key).foreach { runs =>
        val left = runs.filter(r => entry.sides(r.side).exists(e => e.ts == r.ts && e.partition == r.partition))
        if (left.size != runs.size) {
          if (left.isEmpty) { byKey.remove(key); state.removeKey(key.array()) }
          else { byKey(key) = left; state.updateValue(key.array(), ExpiredRuns(left)) }
        }
      }
  }
}

private[join] object EarlierExpiries {

  /** The key of `expiredFor` that holds the index of the run that last judged the group: no key is
    * empty (a key is the bytes of an `UnsafeRow`, at least its null bits). */
  val TagKey: Array[Byte] = Array.emptyByteArray

  /** `buffer`'s records counted by (timestamp, partition), in no particular order. */
  private def runsOf(buffer: collection.Seq[Buffered]): Seq[(Long, Int, Int)] =
    buffer.groupBy(e => (e.ts, e.partition)).toSeq.map { case ((ts, p), es) => (ts, p, es.size) }
}
