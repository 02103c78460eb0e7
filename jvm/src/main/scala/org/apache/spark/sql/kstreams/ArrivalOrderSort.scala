package org.apache.spark.sql.kstreams

import org.apache.spark.sql.{DataFrame, Row}
import org.apache.spark.sql.catalyst.expressions.{Attribute, SortOrder, Ascending}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, UnaryNode}
import org.apache.spark.sql.classic
import org.apache.spark.sql.execution.{SortExec, SparkPlan, SparkStrategy}

/** A per-partition sort that is allowed on streaming plans.
  *
  * Spark refuses `sortWithinPartitions` on streaming DataFrames, because a sort there usually means
  * a global order Spark cannot give. We need only the per-task order of one micro-batch (records of
  * a Kafka partition in offset order), which is exactly what a local `SortExec` gives. Lives in
  * Spark's package to build a Dataset from a logical plan.
  */
case class ArrivalOrderSort(order: Seq[SortOrder], child: LogicalPlan) extends UnaryNode {
  override def output: Seq[Attribute] = child.output
  override def maxRows: Option[Long] = child.maxRows
  override protected def withNewChildInternal(newChild: LogicalPlan): ArrivalOrderSort =
    copy(child = newChild)
}

/** Plans [[ArrivalOrderSort]] as a local (non-global) sort. */
object ArrivalOrderStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case ArrivalOrderSort(order, child) => SortExec(order, global = false, planLater(child)) :: Nil
    case _ => Nil
  }
}

object ArrivalOrderSort {
  /** `df` sorted inside each partition by the named columns, ascending; streaming or batch. */
  def sortWithinPartitions(df: DataFrame, columnNames: Seq[String]): DataFrame = {
    val ds = df.asInstanceOf[classic.Dataset[Row]]
    val session = ds.sparkSession
    val strategies = session.experimental.extraStrategies
    if (!strategies.contains(ArrivalOrderStrategy)) {
      session.experimental.extraStrategies = strategies :+ ArrivalOrderStrategy
    }
    val plan = ds.queryExecution.analyzed
    val order = columnNames.map { name =>
      val attribute = plan.output.find(_.name == name).getOrElse(
        throw new IllegalArgumentException(s"no column $name to sort by"))
      SortOrder(attribute, Ascending)
    }
    classic.Dataset.ofRows(session, ArrivalOrderSort(order, plan))
  }
}
