package kstreams
package internal
package plan

import org.apache.spark.sql.{Encoders, KeyValueGroupedDataset, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.ArrivalOrderSort
import org.apache.spark.sql.types._

import kstreams.internal.plan.HelperColumns._

/** Input of the per-key processors that close windows by each input partition's own stream time
  * (spec sections 1, 5 and 8), as a Kafka Streams task does: the windowed and session
  * aggregations.
  *
  * Why not one `transformWithState` group per key ([[Keyed.Input.grouped]]): a record's lateness
  * depends on its partition's stream time, so on every earlier record of the partition, not only
  * on its key's; and a key's windows may only go once every partition that can still send to them
  * is past them, which a key group never learns when no record of the key comes. So the rows go to
  * [[TaskClocks.Groups]] groups by a hash of the key, each group keeps its keys' state in map
  * states ([[kstreams.internal.state.PartitionClocks]] for the clocks) and is told every
  * partition's progress in every micro-batch:
  *  - a first shuffle by partition (a task: partition `p` of every side, co-partitioned as in
  *    Kafka) sorts each partition's records in arrival order; there each record gets its place in
  *    the task ([[HelperColumns.TaskSeq]]) and its partition's stream time within the micro-batch
  *    up to and including itself ([[HelperColumns.BatchStreamTime]]; records with a null key do
  *    not move it, as in Kafka), and after a partition's
  *    records one marker row per group carries the partition's largest timestamp
  *    ([[HelperColumns.Marker]]), so that a group hears of every partition that delivered;
  *  - a second shuffle by group (placed round-robin, [[org.apache.spark.sql.kstreams.GroupPlacement]])
  *    sorts each group's rows by (partition, place), each partition's markers after its records.
  * A record's stream time is then the larger of its partition's clock at the micro-batch's start
  * (kept by the group from the markers) and its [[HelperColumns.BatchStreamTime]]: exactly the
  * largest timestamp of its partition up to and including it, whatever other partitions did.
  *
  * The sides of a two-sided input meet in the task as a Kafka Streams task takes its partitions:
  * each side in offset order, merged by timestamp, ties to the lower side ([[ArrivalOrder.merge]]).
  */
private[kstreams] object TaskClocks {

  /** Number of key hash groups: part of every checkpoint of these operators (as
    * [[kstreams.internal.dedup.SpreadRecord.Groups]] is of `deduplicate`'s). 64 keep up to 64 tasks
    * busy and cost 64 marker rows per input partition and micro-batch. */
  val Groups = 64

  /** `descriptor` of an operator over this input: its state is kept per key hash group, by each
    * partition's clock, so a checkpoint written by the operator's earlier per-key, watermark-clocked
    * form (which has no such setting) is refused with both named ([[CheckpointOperators]]). */
  def describe(descriptor: OperatorDescriptor): OperatorDescriptor =
    descriptor.setting("clock", "partition").setting("groups", Groups.toString)

  /** Positions in a group's rows: [[Keyed.Layout]]'s, then these. */
  final case class Layout(keyed: Keyed.Layout, taskSeqIndex: Int, batchStreamTimeIndex: Int, markerIndex: Int)

  /** `keyed`'s rows grouped by key hash, in the order above. */
  final case class Input(grouped: KeyValueGroupedDataset[Int, Row], layout: Layout)

  def prepare(keyed: Keyed.Input): Input = {
    val rows = keyed.rows.select(col("*"), col(Partition).as(Task), pmod(hash(col(Key)), lit(Groups)).as(Group))
    val byTask = ArrivalOrderSort.partitionAndSort(rows, Task, Seq(Side, Order), roundRobin = true)
    val inSchema = byTask.schema
    // every column nullable: a marker row has no key or value
    val schema = StructType(
      inSchema.fields.toSeq.map(_.copy(nullable = true)) ++ Seq(
        StructField(TaskSeq, LongType, nullable = false),
        StructField(BatchStreamTime, LongType, nullable = false),
        StructField(Marker, BooleanType, nullable = false)))
    val annotate = new Annotate(keyed.layout, inSchema.size, inSchema.fieldIndex(Task), inSchema.fieldIndex(Group))
    val annotated = byTask.mapPartitions(annotate.apply _)(Encoders.row(schema)).toDF()
    val sorted = ArrivalOrderSort.partitionAndSort(annotated, Group, Seq(Partition, TaskSeq), roundRobin = true)
    Input(
      sorted.groupBy(col(Group)).as[Int, Row](Encoders.scalaInt, Encoders.row(schema)),
      Layout(keyed.layout, inSchema.size, inSchema.size + 1, inSchema.size + 2))
  }

  /** The first shuffle's per-task work (see the object's doc), over one task's rows sorted by
    * (partition, side, order). */
  private final class Annotate(layout: Keyed.Layout, width: Int, taskIndex: Int, groupIndex: Int) extends Serializable {

    def apply(rows: Iterator[Row]): Iterator[Row] = {
      val in = rows.buffered
      new Iterator[Iterator[Row]] {
        def hasNext: Boolean = in.hasNext
        def next(): Iterator[Row] = {
          val current = in.head.getInt(layout.partitionIndex)
          task(
            current,
            new Iterator[Row] {
              def hasNext: Boolean = in.hasNext && in.head.getInt(layout.partitionIndex) == current
              def next(): Row = in.next()
            })
        }
      }.flatten
    }

    private def ts(r: Row): Long = r.getLong(layout.tsIndex)

    /** One partition's records in its task's order, annotated, then its markers. */
    private def task(partition: Int, rows: Iterator[Row]): Iterator[Row] = {
      val ordered =
        if (layout.sides == 1) rows
        else {
          val bySide = rows.toVector.groupBy(_.getInt(layout.sideIndex))
          ArrivalOrder.merge((0 until layout.sides).map(s => bySide.getOrElse(s, Vector.empty)), ts).iterator
        }
      var streamTime = Long.MinValue
      var seq = 0L
      val annotated = ordered.map { r =>
        // as in Kafka's windowed processors, a record with a null key is skipped before it moves
        // the stream time (KStreamWindowAggregate, KStreamSessionWindowAggregate)
        if (!r.isNullAt(layout.keyIndex)) streamTime = math.max(streamTime, ts(r))
        seq += 1
        val values = new Array[Any](width + 3)
        var i = 0
        while (i < width) { values(i) = r.get(i); i += 1 }
        values(width) = seq
        values(width + 1) = streamTime
        values(width + 2) = false
        Row.fromSeq(values.toSeq)
      }
      // evaluated once the records are through (Iterator.++ takes its argument by name)
      annotated ++ markers(partition, streamTime)
    }

    private def markers(partition: Int, maxMicros: Long): Iterator[Row] = Iterator.range(0, Groups).map { g =>
      val values = new Array[Any](width + 3)
      values(layout.sideIndex) = 0
      values(layout.partitionIndex) = partition
      values(layout.orderIndex) = Long.MaxValue
      values(layout.tsIndex) = maxMicros
      values(taskIndex) = partition
      values(groupIndex) = g
      values(width) = Long.MaxValue
      values(width + 1) = maxMicros
      values(width + 2) = true
      Row.fromSeq(values.toSeq)
    }
  }
}
