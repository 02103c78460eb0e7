package org.apache.spark.sql.kstreams

import scala.annotation.tailrec

import org.apache.spark.sql.{DataFrame, Row}
import org.apache.spark.{SparkEnv, TaskContext}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  Alias,
  Ascending,
  Attribute,
  NamedExpression,
  NullsFirst,
  RowOrdering,
  SortOrder,
  UnsafeRow
}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LeafNode, LogicalPlan, Project, UnaryNode}
import org.apache.spark.sql.catalyst.plans.physical.{HashPartitioning, Partitioning}
import org.apache.spark.sql.classic
import org.apache.spark.sql.execution.{
  ProjectExec,
  SortExec,
  SparkPlan,
  SparkStrategy,
  UnaryExecNode,
  UnsafeExternalRowSorter
}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.util.collection.unsafe.sort.PrefixComparators
import org.apache.spark.sql.execution.exchange.{REQUIRED_BY_STATEFUL_OPERATOR, ShuffleExchangeExec}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{IntegerType, LongType}

/** Hash-partitions rows on `groupBy` and sorts each partition by `order`; allowed on streaming
  * plans.
  *
  * Spark refuses `sortWithinPartitions` on streaming DataFrames, because a sort there usually means
  * a global order Spark cannot give. We need only the per-task order of one micro-batch (records of
  * a Kafka partition in offset order), which a shuffle followed by a local sort gives. The
  * shuffle is planned here, not left to `EnsureRequirements`, so that it sits *below* the sort and
  * is exactly the partitioning a stateful operator grouped on `groupBy` requires (Spark then adds
  * no shuffle or sort of its own), even when the optimizer folds a constant grouping column.
  * With `roundRobin`, the single int grouping column holds group numbers that are placed on
  * state partitions round-robin ([[GroupPlacement]]): the planned shuffle is of their keys.
  * With an empty `order` only the shuffle is planned: the input of a real-time query, whose
  * pipelined shuffle keeps each upstream task's rows in the order it sent them ([[ByTrigger]]).
  * Lives in Spark's package to build a Dataset from a logical plan.
  */
case class ArrivalOrderSort(groupBy: Seq[Attribute], order: Seq[SortOrder], roundRobin: Boolean, child: LogicalPlan)
    extends UnaryNode {
  override def output: Seq[Attribute] = child.output
  override protected def withNewChildInternal(newChild: LogicalPlan): ArrivalOrderSort =
    copy(child = newChild)
}

/** One operator's input planned for the trigger of the query being planned: `microBatch` for a
  * micro-batch or batch query, `realTime` for a real-time one (Spark 4.3's `trigger(realTime=...)`,
  * spec section 8). Both read the same input, marked by a [[TriggerInput]] in each; `realTime`
  * gives the columns of `microBatch` in the same order, of the same types.
  *
  * Why two plans: a micro-batch orders each partition's records with a sort after the shuffle,
  * which a real-time query may not have (a sort waits for its whole input; Spark's allowlist
  * refuses `SortExec`); a real-time query relies on the pipelined shuffle's order instead and
  * needs an end-of-batch marker per partition behind its records
  * (`kstreams.internal.plan.EndMarkers`), which a micro-batch does not. Why `realTime` is a
  * template and not a second child: a real-time query refuses a plan that reads its source twice
  * (`IDENTICAL_SOURCES_IN_UNION_NOT_SUPPORTED`), and Spark swaps each batch's source into the
  * children only; the planner puts the batch's input (under `microBatch`'s marker) into the
  * template. The template is analyzed once, when the DataFrame is made, and optimized per batch
  * (as Spark optimizes each batch's plan; building it anew took 130-170 ms of each batch's
  * planning, time in which a real-time query reads nothing).
  */
case class ByTrigger(microBatch: LogicalPlan, realTime: LogicalPlan) extends UnaryNode {
  override def child: LogicalPlan = microBatch
  override def output: Seq[Attribute] = microBatch.output
  override protected def withNewChildInternal(newChild: LogicalPlan): ByTrigger = copy(microBatch = newChild)
}

/** Marks the input of a [[ByTrigger]]'s real-time plan; plans as its child. */
case class TriggerInput(child: LogicalPlan) extends UnaryNode {
  override def output: Seq[Attribute] = child.output
  override protected def withNewChildInternal(newChild: LogicalPlan): TriggerInput = copy(child = newChild)
}

/** Plans [[ArrivalOrderSort]] as a hash shuffle (state-store partitioning) and a local sort,
  * [[ByTrigger]] as the branch of the query's trigger, and [[PlannedCheck]] as its check, then its
  * child. */
object ArrivalOrderStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case ByTrigger(microBatch, realTime) =>
      if (!RunningQueries.current().exists(RunningQueries.isRealTime)) planLater(microBatch) :: Nil
      else {
        val input = microBatch
          .collectFirst { case TriggerInput(marked) => marked }
          .getOrElse(throw new IllegalStateException("kstreams internal error: no TriggerInput under ByTrigger"))
        val batch = realTime.transformUp { case TriggerInput(template) =>
          // the same columns; the batch's optimized input may know more columns to be non-null
          // than the template analyzed on the stream (a null check folded away), which the
          // template's references above may keep assuming nullable, never the other way round
          val same = template.output.size == input.output.size && template.output.zip(input.output).forall {
            case (t, i) => t.exprId == i.exprId && t.dataType == i.dataType && (t.nullable || !i.nullable)
          }
          require(
            same,
            s"kstreams internal error: the batch's input changed its columns: ${template.output} against ${input.output}")
          TriggerInput(input)
        }
        val rt = classic.SparkSession.active.sessionState.optimizer.execute(batch)
        // the real-time plan's columns under the micro-batch plan's attributes (by position):
        // ProjectExec carries the shuffle's partitioning through the aliases, so the operator
        // above sees the distribution it requires and Spark adds no shuffle of its own
        val renamed = microBatch.output.zip(rt.output).map { case (mb, r) => Alias(r, mb.name)(exprId = mb.exprId) }
        ProjectExec(renamed, planLater(rt)) :: Nil
      }
    case TriggerInput(child) => planLater(child) :: Nil
    case PlannedCheck(check, child) =>
      // a streaming query's own plan only: a batch planned on its thread (foreachBatch) is not
      // one of its operators
      if (child.isStreaming) check()
      planLater(child) :: Nil
    case ArrivalOrderSort(groupBy, order, roundRobin, child) =>
      val input =
        if (!roundRobin || !GroupPlacement.roundRobin(RunningQueries.current())) planLater(child)
        else {
          // the group number replaced by its key under the same attribute, so that the stateful
          // operator above, grouped on that attribute, needs no shuffle of its own
          val group = groupBy.head
          def keyed(e: NamedExpression): NamedExpression = e match {
            case a: Alias if a.exprId == group.exprId =>
              Alias(GroupKey(a.child), a.name)(
                exprId = a.exprId,
                qualifier = a.qualifier,
                explicitMetadata = a.explicitMetadata,
                nonInheritableMetadataKeys = a.nonInheritableMetadataKeys)
            case a if a.exprId == group.exprId => Alias(GroupKey(a), a.name)(exprId = a.exprId)
            case other => other
          }
          child match {
            // computed where the group number is: one operator less in a plan Spark plans again
            // every micro-batch. Not over a scan: the strategies that plan a scan read only the
            // columns of the Projects and Filters right above it (a batch file source), which
            // planning the Project here would take from them
            case Project(list, grandchild) if !overScan(grandchild) =>
              ProjectExec(list.map(keyed), planLater(grandchild))
            case _ => ProjectExec(child.output.map(keyed), planLater(child))
          }
        }
      val partitioning = HashPartitioning(groupBy, statePartitions())
      val shuffle = ShuffleExchangeExec(partitioning, input, REQUIRED_BY_STATEFUL_OPERATOR)
      (if (order.isEmpty) shuffle else sorted(order, shuffle)) :: Nil
    case _ => Nil
  }

  /** `child` sorted by `order` (the group, then the columns that order a group's records):
    * [[ArrivalSortExec]] where `order` is an int group and one int or long column (an offset or
    * an event time), both ascending with nulls first (as [[ArrivalOrderSort.partitionAndSort]]
    * orders them), else Spark's `SortExec`. (The orders of three columns, `TaskClocks`'s and
    * global `deduplicate`'s, have a side or a partition second, which would leave the packed
    * prefix tied within a partition: nothing gained there.) */
  private def sorted(order: Seq[SortOrder], child: SparkPlan): SparkPlan = order match {
    case Seq(
          SortOrder(group: Attribute, Ascending, NullsFirst, _),
          SortOrder(first: Attribute, Ascending, NullsFirst, _))
        if group.dataType == IntegerType && (first.dataType == IntegerType || first.dataType == LongType) =>
      ArrivalSortExec(order, child)
    case _ => SortExec(order, global = false, child)
  }

  /** Whether `plan` is a scan, with only Projects and Filters above it. */
  @tailrec private def overScan(plan: LogicalPlan): Boolean = plan match {
    case _: LeafNode => true
    case Filter(_, child) => overScan(child)
    case Project(_, child) => overScan(child)
    case _ => false
  }

  /** Adds this strategy to `session`'s planner (once). */
  def register(session: classic.SparkSession): Unit = {
    val strategies = session.experimental.extraStrategies
    if (!strategies.contains(ArrivalOrderStrategy)) {
      session.experimental.extraStrategies = strategies :+ ArrivalOrderStrategy
    }
  }

  /** The partition count of the state store a stateful operator of this plan will use.
    *
    * A restarted query keeps the count its checkpoint was created with, whatever the session says
    * now (Spark's own stateful operators read it from the offset log). When planning runs on a
    * stream's thread, read it from that stream's offset log too; otherwise use the session's.
    */
  private def statePartitions(): Int = {
    val fallback = SQLConf.get.numShufflePartitions
    val restored = RunningQueries
      .current()
      .flatMap(_.offsetLog.getLatest())
      .flatMap { case (_, offsets) => offsets.metadataOpt }
      .flatMap(_.conf.get(SQLConf.SHUFFLE_PARTITIONS.key))
    restored.map(_.toInt).getOrElse(fallback)
  }
}

object ArrivalOrderSort {

  /** `df` hash-partitioned on `groupBy` and sorted inside each partition by `orderBy` (ascending,
    * after `groupBy`; not sorted at all when `orderBy` is empty); streaming or batch. With
    * `roundRobin`, `groupBy` is an int group number placed as [[GroupPlacement]] says, and the
    * processor sees its key. */
  def partitionAndSort(df: DataFrame, groupBy: String, orderBy: Seq[String], roundRobin: Boolean): DataFrame = {
    val ds = df.asInstanceOf[classic.Dataset[Row]]
    val session = ds.sparkSession
    ArrivalOrderStrategy.register(session)
    val plan = ds.queryExecution.analyzed
    def attribute(name: String) =
      plan.output.find(_.name == name).getOrElse(throw new IllegalArgumentException(s"no column $name"))
    val order =
      if (orderBy.isEmpty) Nil else (groupBy +: orderBy).map(name => SortOrder(attribute(name), Ascending))
    classic.Dataset.ofRows(session, ArrivalOrderSort(Seq(attribute(groupBy)), order, roundRobin, plan))
  }

  /** `microBatch(input)` planned as [[ByTrigger]] with `realTime(input)`: both functions of the
    * same input, giving the same columns. */
  def byTrigger(input: DataFrame)(microBatch: DataFrame => DataFrame, realTime: DataFrame => DataFrame): DataFrame = {
    val in = input.asInstanceOf[classic.Dataset[Row]]
    val session = in.sparkSession
    val marked = classic.Dataset.ofRows(session, TriggerInput(in.queryExecution.analyzed))
    val mb = microBatch(marked).asInstanceOf[classic.Dataset[Row]]
    val rt = realTime(marked).asInstanceOf[classic.Dataset[Row]]
    require(
      mb.schema.map(f => (f.name, f.dataType)) == rt.schema.map(f => (f.name, f.dataType)),
      s"the two plans differ: ${mb.schema.simpleString} against ${rt.schema.simpleString}"
    )
    classic.Dataset.ofRows(session, ByTrigger(mb.queryExecution.analyzed, rt.queryExecution.analyzed))
  }
}

/** A task's rows sorted by `order` (an int group, then an integral column), as Spark's
  * `SortExec` sorts them, with a prefix that decides most comparisons.
  *
  * Why not `SortExec`: it compares rows by a 64-bit prefix computed from its first sort column
  * alone, and by the whole rows (in the sorter's pages, a cache miss each) only where two prefixes
  * tie. With the group first, nearly every comparison ties (a task holds a few groups), so a
  * micro-batch's sort compared whole rows for each of its n log n steps. Here the prefix packs the
  * group into its high 32 bits and the next column, clamped to [0, 2^32), into its low ones: it
  * decides every comparison of two records of one group whose offsets differ and lie below 2^32.
  * Elsewhere (a partition past 2^32 records, an event time as the order, a null) it ties and the
  * rows are compared by `order`, as `SortExec` compares them. The prefix is monotone in (group,
  * column), so the order is exactly `order`'s, and `order` is what this operator declares.
  * (Leading `SortExec`'s order with the packed prefix as a column or an expression did as well
  * where the prefix decides, but added a sort key that every tied comparison read too: 18-25% more
  * sort time with offsets past 2^32, benchmarks/RESULTS.md, "Targets".) A `deduplicate_by_key` of
  * 1M rows over 8 partitions, 2 state partitions, warm: `SortExec` took 430 ms (its two tasks
  * together), this sort about 100. */
case class ArrivalSortExec(order: Seq[SortOrder], child: SparkPlan) extends UnaryExecNode {
  require(order.size == 2, "the group and one column, ascending with nulls first")

  override def output: Seq[Attribute] = child.output
  override def outputOrdering: Seq[SortOrder] = order
  override def outputPartitioning: Partitioning = child.outputPartitioning

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "sortTime" -> SQLMetrics.createTimingMetric(sparkContext, "sort time"),
    "peakMemory" -> SQLMetrics.createSizeMetric(sparkContext, "peak memory"),
    "spillSize" -> SQLMetrics.createSizeMetric(sparkContext, "spill size")
  )

  override protected def doExecute(): RDD[InternalRow] = {
    val (sortTime, peakMemory, spillSize) = (longMetric("sortTime"), longMetric("peakMemory"), longMetric("spillSize"))
    val (schema, attributes, sortOrder) = (child.schema, child.output, order)
    // the two sort columns are attributes of the child ([[ArrivalOrderStrategy]]): read by position
    val Seq(group, column) = order.map(o => attributes.indexWhere(_.exprId == o.child.asInstanceOf[Attribute].exprId))
    val columnIsLong = order(1).dataType == LongType
    child.execute().mapPartitionsInternal { rows =>
      // built in the task, as SortExec builds its sorter: a generated ordering is not serializable,
      // and the page size is the executor's
      val pageSizeBytes = SparkEnv.get.memoryManager.pageSizeBytes
      val prefixes = new UnsafeExternalRowSorter.PrefixComputer {
        private val prefix = new UnsafeExternalRowSorter.PrefixComputer.Prefix
        override def computePrefix(row: InternalRow): UnsafeExternalRowSorter.PrefixComputer.Prefix = {
          prefix.value =
            if (row.isNullAt(group)) Long.MinValue // nulls first, as the group's order puts them
            else {
              val low =
                if (row.isNullAt(column)) 0L // nulls first
                else math.min(math.max(if (columnIsLong) row.getLong(column) else row.getInt(column), 0L), 0xffffffffL)
              (row.getInt(group).toLong << 32) | low
            }
          prefix
        }
      }
      val sorter = UnsafeExternalRowSorter.create(
        schema,
        RowOrdering.create(sortOrder, attributes),
        PrefixComparators.LONG,
        prefixes,
        pageSizeBytes,
        false)
      val taskMetrics = TaskContext.get().taskMetrics()
      val spilledBefore = taskMetrics.memoryBytesSpilled
      val sortedRows = sorter.sort(rows.asInstanceOf[Iterator[UnsafeRow]])
      SortExec.recordSortMetrics(sorter, taskMetrics, spilledBefore, sortTime, peakMemory, spillSize)
      sortedRows
    }
  }

  override protected def withNewChildInternal(newChild: SparkPlan): ArrivalSortExec = copy(child = newChild)
}
