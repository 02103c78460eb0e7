package kstreams
package internal
package state

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming.{MapState, StatefulProcessorHandle, TTLConfig}

import kstreams.internal.plan.SettingHistory

/** Per input partition of a windowed processor's group, the floor below which its windows stay
  * closed whatever the grace (map state `closedBelow`: partition -> `stream time - grace`, a window
  * end; under [[ClosedFloors.TagKey]] the run, an index in the grace's history, that last judged
  * the group). Set by the first call of a run after a restart that changed the grace; a window
  * compares its end with its partition's floor as with `stream time - grace` (tumbling: closed at
  * or below it; sessions: the merged end plus the gap below it).
  *
  * {{{
  *   floors = new ClosedFloors(getHandle)                       // in init
  *   val groupFloors = floors.judge(graces, streamTimes)         // once per group and task
  *   late ||= windowEnd <= groupFloors.getOrElse(partition, Long.MinValue)
  * }}}
  */
private[kstreams] final class ClosedFloors(handle: StatefulProcessorHandle) {
  private val closedBelow: MapState[Int, Long] =
    handle.getMapState[Int, Long]("closedBelow", Encoders.scalaInt, Encoders.scalaLong, TTLConfig.NONE)

  /** The group's floors, after judging it under this run's grace once per run that changed it:
    * `graces` from the checkpoint's first run to this one ([[SettingHistory.inTask]]),
    * `streamTimes` each partition's stream time as the run starts (read only on a change).
    *
    * Why this is exact (the manual, "Operating a query": from the first record after a restart
    * every window is judged by the new grace, and a window already closed under the old one when
    * the query stopped stays closed): a partition's stream time moves only while it gets records,
    * so from the run that last judged the group to this one it stayed where it is now, and a
    * window closed for it at the end of any of those runs is one closed under `streamTime - that
    * run's grace`: together, under `streamTime - the smallest of their graces`. That bound is kept
    * per partition (the window's state may be gone already, and without the bound a longer grace
    * would open it again: a windowed distinct would forward its next record as the first, an
    * aggregation fold it into a result already emitted); windows above it are judged by this
    * run's grace. */
  def judge(graces: Vector[Long], streamTimes: => Iterator[(Int, Long)]): Map[Int, Long] =
    if (graces.size == 1) Map.empty // never changed: no floor, and nothing to read
    else {
      val tag = ClosedFloors.TagKey
      val judgedAt = if (closedBelow.containsKey(tag)) closedBelow.getValue(tag).toInt else 0
      SettingHistory.smallestSince(graces, judgedAt).foreach { smallest =>
        streamTimes.foreach { case (partition, streamTime) =>
          val floor = streamTime - smallest
          if (!closedBelow.containsKey(partition) || closedBelow.getValue(partition) < floor)
            closedBelow.updateValue(partition, floor)
        }
        closedBelow.updateValue(tag, graces.size - 1L)
      }
      closedBelow.iterator().filter(_._1 != tag).toMap
    }
}

private[kstreams] object ClosedFloors {

  /** The key of `closedBelow` that holds the index (in the grace's history) of the run that last
    * judged the group: not a partition number. */
  val TagKey: Int = Int.MinValue
}
