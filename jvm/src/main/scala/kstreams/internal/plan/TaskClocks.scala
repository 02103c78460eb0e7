package kstreams
package internal
package plan

import org.apache.spark.sql.{DataFrame, Encoders, KeyValueGroupedDataset, Row}
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
  *    up to and including itself ([[HelperColumns.BatchStreamTime]]; whether records with a null
  *    key move it is the operator's, as in Kafka), and after a partition's
  *    records one marker row per group carries the partition's largest timestamp
  *    ([[HelperColumns.Marker]]), so that a group hears of every partition that delivered;
  *  - a second shuffle by group (placed round-robin, [[org.apache.spark.sql.kstreams.GroupPlacement]])
  *    sorts each group's rows by (partition, place), each partition's markers after its records.
  * A record's stream time is then the larger of its partition's clock at the micro-batch's start
  * (kept by the group from the markers) and its [[HelperColumns.BatchStreamTime]]: exactly the
  * largest timestamp of its partition up to and including it, whatever other partitions did.
  *
  * The sides of a two-sided input meet in the task as a Kafka Streams task takes its partitions:
  * each side in offset order, merged by timestamp, ties to the lower side ([[ArrivalMerge.merge]]).
  */
private[kstreams] object TaskClocks {

  /** The error for partition `partition`'s records not coming as one run in its task's order:
    * never in a micro-batch (the first shuffle sorts them); in a real-time batch when a partition
    * is not read by exactly one source task in offset order. */
  def notOneRun(partition: Int): KStreamsException =
    new KStreamsException(
      s"input partition $partition did not reach a windowed aggregation or join as one run in its order: in " +
        "real-time mode each input partition must be read by one source task, in order, as Spark's Kafka " +
        "source reads a topic partition (not so with partition=None, a merge of two topics, or a shuffle " +
        "before the operator); run this query with a micro-batch trigger, e.g. trigger(processingTime='0 seconds')")

  /** Number of key hash groups: part of every checkpoint of these operators (as
    * [[kstreams.internal.dedup.SpreadRecord.Groups]] is of `deduplicate`'s). 64 keep up to 64 tasks
    * busy and cost 64 marker rows per input partition and micro-batch. */
  val Groups = 64

  /** `descriptor` of an operator over this input: its state is kept per key hash group, by each
    * partition's clock, so a checkpoint written by the operator's earlier per-key, watermark-clocked
    * form (which has no such setting) is refused with both named ([[CheckpointOperators]]). */
  def describe(descriptor: OperatorDescriptor): OperatorDescriptor =
    descriptor.setting("clock", "partition").setting("groups", Groups.toString)

  /** Positions in a group's rows: [[Keyed.Layout]]'s, then these; clock `i` of a record at
    * `clockIndex(i)` (see [[prepare]]; clock 0 is [[HelperColumns.BatchStreamTime]]). */
  final case class Layout(keyed: Keyed.Layout, taskSeqIndex: Int, clockCount: Int) {
    def clockIndex(clock: Int): Int = taskSeqIndex + 1 + clock
    val batchStreamTimeIndex: Int = clockIndex(0)
    val markerIndex: Int = clockIndex(clockCount)
  }

  /** `keyed`'s rows grouped by key hash, in the order above. */
  final case class Input(grouped: KeyValueGroupedDataset[Int, Row], layout: Layout)

  /** Clocks of a join's task, in the order [[prepare]] gives them with `join`. */
  val TaskClock = 0
  def sideClock(side: Int): Int = 1 + side
  val EmitClock = 3

  /** @param join the clocks of a stream-stream join (Kafka's `KStreamKStreamJoin`): 0 the task's
    *             stream time over every record (it advances before a record with a null key or
    *             value is skipped), 1 and 2 each side's window-store time (the largest timestamp
    *             of that side's records with a key: `KStreamJoinWindow` puts those), 3 the time at
    *             which closed unmatched records are emitted (the largest timestamp of records with
    *             a key and a value that did not go back in time: Kafka emits before such a record
    *             only). Without: one clock, over the records with a key (Kafka's windowed
    *             aggregations skip a null-key record before it moves their stream time). */
  def prepare(keyed: Keyed.Input, join: Boolean): Input = {
    val rows = keyed.rows.select(col("*"), col(Partition).as(Task), pmod(hash(col(Key)), lit(Groups)).as(Group))
    val inSchema = rows.schema
    val clockCount = if (join) 4 else 1
    // every column nullable: a marker row has no key or value
    val schema = StructType(
      inSchema.fields.toSeq.map(_.copy(nullable = true)) ++
        Seq(StructField(TaskSeq, LongType, nullable = false)) ++
        (0 until clockCount).map(i =>
          StructField(if (i == 0) BatchStreamTime else s"$BatchStreamTime$i", LongType, nullable = false)) ++
        Seq(StructField(Marker, BooleanType, nullable = false)))
    val annotate =
      new Annotate(keyed.layout, inSchema.size, inSchema.fieldIndex(Task), inSchema.fieldIndex(Group), join)
    def microBatch(in: DataFrame): DataFrame = {
      val byTask = ArrivalOrderSort.partitionAndSort(in, Task, Seq(Side, Order), roundRobin = true)
      val annotated = byTask.mapPartitions(annotate.apply _)(Encoders.row(schema)).toDF()
      ArrivalOrderSort.partitionAndSort(annotated, Group, Seq(Partition, TaskSeq), roundRobin = true)
    }
    // A real-time query (spec section 8) may not sort, and needs no first shuffle: each Kafka
    // partition is read by one source task, in offset order, so the source task annotates its
    // records as they come and, once its batch duration is over, appends the markers; the
    // pipelined shuffle to the groups keeps each task's order. Only one-sided input: a join's
    // two sides are two source tasks, which would have to meet in one task to be merged.
    def realTime(in: DataFrame): DataFrame = {
      val annotated = in.mapPartitions(annotate.apply _)(Encoders.row(schema)).toDF()
      ArrivalOrderSort.partitionAndSort(annotated, Group, Nil, roundRobin = true)
    }
    val ordered =
      if (join || !keyed.streaming) microBatch(rows)
      else ArrivalOrderSort.byTrigger(rows)(microBatch, realTime)
    Input(
      ordered.groupBy(col(Group)).as[Int, Row](StateEncoders.groupNumber, Encoders.row(schema)),
      Layout(keyed.layout, inSchema.size, clockCount))
  }

  /** The first shuffle's per-task work (see the object's doc), over one task's rows sorted by
    * (partition, side, order). */
  private final class Annotate(layout: Keyed.Layout, width: Int, taskIndex: Int, groupIndex: Int, join: Boolean)
      extends Serializable {
    private val clockCount = if (join) 4 else 1
    private val rowWidth = width + 2 + clockCount

    def apply(rows: Iterator[Row]): Iterator[Row] = {
      val in = rows.buffered
      val seen = scala.collection.mutable.HashSet.empty[Int]
      new Iterator[Iterator[Row]] {
        def hasNext: Boolean = in.hasNext
        def next(): Iterator[Row] = {
          val current = in.head.getInt(layout.partitionIndex)
          // a partition's records must come as one run: after the first shuffle's sort they do;
          // in a real-time batch only if one source task reads the partition, in order
          if (!seen.add(current)) throw TaskClocks.notOneRun(current)
          task(
            current,
            new Iterator[Row] {
              def hasNext: Boolean = in.hasNext && in.head.getInt(layout.partitionIndex) == current
              def next(): Row = in.next()
            })
        }
      }.flatten
    }

    private def ts(r: Row): Long = r.getLong(layout.timestampMicrosIndex)

    /** Advances `clocks` by record `r` (see [[prepare]]). */
    private def advance(clocks: Array[Long], r: Row): Unit = {
      val t = ts(r)
      val keyed = !r.isNullAt(layout.keyIndex)
      if (!join) { if (keyed) clocks(0) = math.max(clocks(0), t) }
      else {
        val inOrder = t >= clocks(TaskClock)
        clocks(TaskClock) = math.max(clocks(TaskClock), t)
        val side = r.getInt(layout.sideIndex)
        if (keyed) clocks(sideClock(side)) = math.max(clocks(sideClock(side)), t)
        if (keyed && inOrder && !r.isNullAt(layout.valueIndex(side))) clocks(EmitClock) = math.max(clocks(EmitClock), t)
      }
    }

    /** One partition's records in its task's order, annotated, then its markers. */
    private def task(partition: Int, rows: Iterator[Row]): Iterator[Row] = {
      val ordered =
        if (layout.sides == 1) rows
        else {
          val bySide = rows.toVector.groupBy(_.getInt(layout.sideIndex))
          ArrivalMerge.merge((0 until layout.sides).map(s => bySide.getOrElse(s, Vector.empty)), ts).iterator
        }
      val clocks = Array.fill(clockCount)(Long.MinValue)
      var seq = 0L
      val annotated = ordered.map { r =>
        advance(clocks, r)
        seq += 1
        val values = new Array[Any](rowWidth)
        var i = 0
        while (i < width) { values(i) = r.get(i); i += 1 }
        values(width) = seq
        (0 until clockCount).foreach(c => values(width + 1 + c) = clocks(c))
        values(rowWidth - 1) = false
        Row.fromSeq(values.toSeq)
      }
      // evaluated once the records are through (Iterator.++ takes its argument by name)
      annotated ++ markers(partition, clocks)
    }

    /** One row per group with the partition's clocks at the end of its micro-batch. */
    private def markers(partition: Int, clocks: Array[Long]): Iterator[Row] = Iterator.range(0, Groups).map { g =>
      val values = new Array[Any](rowWidth)
      values(layout.sideIndex) = 0
      values(layout.partitionIndex) = partition
      values(layout.orderIndex) = Long.MaxValue
      values(layout.timestampMicrosIndex) = clocks(0)
      values(taskIndex) = partition
      values(groupIndex) = g
      values(width) = Long.MaxValue
      (0 until clockCount).foreach(c => values(width + 1 + c) = clocks(c))
      values(rowWidth - 1) = true
      Row.fromSeq(values.toSeq)
    }
  }
}

/** Checks, as a [[TaskClocks]] processor reads its groups' rows, that each partition's rows of a
  * group come in task order (its records by [[HelperColumns.TaskSeq]], then its markers): the
  * second shuffle's sort in a micro-batch, the pipelined shuffle's order in a real-time batch,
  * where a group's rows of several partitions interleave and come one per call. Fails loudly if a
  * planner ever broke it. One per processor instance (a task's batch), across its calls. */
private[kstreams] final class TaskOrderCheck(layout: TaskClocks.Layout) {
  private val lastSeq = scala.collection.mutable.HashMap.empty[(Int, Int), Long]
  // the run being read: a micro-batch's group is one run per partition, so the map is touched
  // only where a run ends, not per row
  private var runGroup = Int.MinValue
  private var runPartition = Int.MinValue
  private var runSeq = Long.MinValue

  /** `row`'s partition, after checking its place among its group's rows of that partition. */
  def check(group: Int, row: Row): Int = {
    val partition = row.getInt(layout.keyed.partitionIndex)
    val seq = row.getLong(layout.taskSeqIndex)
    if (group != runGroup || partition != runPartition) {
      if (runGroup != Int.MinValue) lastSeq((runGroup, runPartition)) = runSeq
      runGroup = group
      runPartition = partition
      runSeq = lastSeq.getOrElse((group, partition), Long.MinValue)
    }
    // in a real-time batch, two source tasks delivering one partition number restart its places
    if (seq < runSeq) throw TaskClocks.notOneRun(partition)
    runSeq = seq
    partition
  }
}
