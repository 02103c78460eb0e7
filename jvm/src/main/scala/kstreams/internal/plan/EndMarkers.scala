package kstreams
package internal
package plan

import scala.collection.mutable

/** The end-of-batch markers of a real-time query's arrival-order input (spec section 8).
  *
  * In real-time mode Spark calls `handleInputRows` once per row and has no hook between a task's
  * last row and its state store's commit (`StatefulProcessor.close` runs after the commit). A
  * processor that keeps a partition's store open across rows (decides in memory, writes its
  * entries once per batch) must be told where the batch ends. Each source task therefore appends,
  * once its input is exhausted (the batch duration is over), one marker per partition it read;
  * the marker is shuffled on the partition's group like its records and, since the pipelined
  * shuffle delivers each upstream task's rows in the order sent, reaches the processor after the
  * partition's last record and before the commit. Why not write every row through instead: that
  * is a chunk (or a bucket index entry) per row, whose cost grows with the batch duration.
  */
private[kstreams] object EndMarkers {

  /** `records` as they come (lazily: each row goes on at once), then one marker per group seen. */
  def append(records: Iterator[CompactRecord]): Iterator[CompactRecord] = {
    val seen = mutable.LinkedHashSet.empty[Int]
    records.map { r => seen += r.__kstreams_group; r } ++ seen.iterator.map(marker)
  }

  private def marker(group: Int): CompactRecord =
    CompactRecord(
      __kstreams_group = group,
      partition = group,
      ordering = Long.MaxValue,
      timestampMicros = Long.MinValue,
      offset = Long.MinValue,
      keyNull = true,
      key = Empty,
      payload = Empty,
      realTime = true,
      endOfBatch = true
    )

  private val Empty = Array.emptyByteArray
}
