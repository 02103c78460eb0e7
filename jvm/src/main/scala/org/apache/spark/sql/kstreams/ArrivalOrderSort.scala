package org.apache.spark.sql.kstreams

import org.apache.spark.SparkContext
import org.apache.spark.sql.{DataFrame, Row}
import org.apache.spark.sql.catalyst.expressions.{Alias, Ascending, Attribute, SortOrder}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, UnaryNode}
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.classic
import org.apache.spark.sql.execution.{ProjectExec, SortExec, SparkPlan, SparkStrategy}
import org.apache.spark.sql.execution.exchange.{REQUIRED_BY_STATEFUL_OPERATOR, ShuffleExchangeExec}
import org.apache.spark.sql.execution.streaming.runtime.StreamExecution
import org.apache.spark.sql.internal.SQLConf

/** Hash-partitions rows on `groupBy` and sorts each partition by `order`; allowed on streaming
  * plans.
  *
  * Spark refuses `sortWithinPartitions` on streaming DataFrames, because a sort there usually means
  * a global order Spark cannot give. We need only the per-task order of one micro-batch (records of
  * a Kafka partition in offset order), which a shuffle followed by a local `SortExec` gives. The
  * shuffle is planned here, not left to `EnsureRequirements`, so that it sits *below* the sort and
  * is exactly the partitioning a stateful operator grouped on `groupBy` requires (Spark then adds
  * no shuffle or sort of its own), even when the optimizer folds a constant grouping column.
  * With `roundRobin`, the single int grouping column holds group numbers that are placed on
  * state partitions round-robin ([[GroupPlacement]]): the planned shuffle is of their keys.
  * Lives in Spark's package to build a Dataset from a logical plan.
  */
case class ArrivalOrderSort(groupBy: Seq[Attribute], order: Seq[SortOrder], roundRobin: Boolean, child: LogicalPlan)
    extends UnaryNode {
  override def output: Seq[Attribute] = child.output
  override protected def withNewChildInternal(newChild: LogicalPlan): ArrivalOrderSort =
    copy(child = newChild)
}

/** Plans [[ArrivalOrderSort]] as a hash shuffle (state-store partitioning) and a local sort. */
object ArrivalOrderStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case ArrivalOrderSort(groupBy, order, roundRobin, child) =>
      val input =
        if (!roundRobin || !GroupPlacement.roundRobin(currentQuery())) planLater(child)
        else {
          // the group number replaced by its key under the same attribute, so that the stateful
          // operator above, grouped on that attribute, needs no shuffle of its own
          val group = groupBy.head
          ProjectExec(
            child.output.map(a => if (a.exprId == group.exprId) Alias(GroupKey(a), a.name)(exprId = a.exprId) else a),
            planLater(child))
        }
      val partitioning = HashPartitioning(groupBy, statePartitions())
      val shuffle = ShuffleExchangeExec(partitioning, input, REQUIRED_BY_STATEFUL_OPERATOR)
      SortExec(order, global = false, shuffle) :: Nil
    case _ => Nil
  }

  /** The streaming query being planned on this thread, if any: Spark sets the query id as a
    * local property of a stream's thread ([[RunningQueries]] finds the query by it). */
  private def currentQuery(): Option[StreamExecution] =
    Option(SparkContext.getOrCreate().getLocalProperty(StreamExecution.QUERY_ID_KEY)).flatMap(RunningQueries.get)

  /** The partition count of the state store a stateful operator of this plan will use.
    *
    * A restarted query keeps the count its checkpoint was created with, whatever the session says
    * now (Spark's own stateful operators read it from the offset log). When planning runs on a
    * stream's thread, read it from that stream's offset log too; otherwise use the session's.
    */
  private def statePartitions(): Int = {
    val fallback = SQLConf.get.numShufflePartitions
    val restored = currentQuery()
      .flatMap(_.offsetLog.getLatest())
      .flatMap { case (_, offsets) => offsets.metadataOpt }
      .flatMap(_.conf.get(SQLConf.SHUFFLE_PARTITIONS.key))
    restored.map(_.toInt).getOrElse(fallback)
  }
}

object ArrivalOrderSort {

  /** `df` hash-partitioned on `groupBy` and sorted inside each partition by `orderBy` (ascending,
    * after `groupBy`); streaming or batch. With `roundRobin`, `groupBy` is an int group number
    * placed as [[GroupPlacement]] says, and the processor sees its key. */
  def partitionAndSort(df: DataFrame, groupBy: String, orderBy: Seq[String], roundRobin: Boolean): DataFrame = {
    val ds = df.asInstanceOf[classic.Dataset[Row]]
    val session = ds.sparkSession
    val strategies = session.experimental.extraStrategies
    if (!strategies.contains(ArrivalOrderStrategy)) {
      session.experimental.extraStrategies = strategies :+ ArrivalOrderStrategy
    }
    val plan = ds.queryExecution.analyzed
    def attribute(name: String) =
      plan.output.find(_.name == name).getOrElse(throw new IllegalArgumentException(s"no column $name"))
    val order = (groupBy +: orderBy).map(name => SortOrder(attribute(name), Ascending))
    classic.Dataset.ofRows(session, ArrivalOrderSort(Seq(attribute(groupBy)), order, roundRobin, plan))
  }
}
