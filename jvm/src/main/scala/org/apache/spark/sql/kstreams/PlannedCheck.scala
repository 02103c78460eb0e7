package org.apache.spark.sql.kstreams

import org.apache.spark.sql.{classic, DataFrame, Row}
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, UnaryNode}

/** A plan node that calls `check` each time Spark plans it in a streaming plan (on the driver,
  * on the query's thread, once or more per micro-batch), then plans as its child: the one moment
  * code of the library's can see a query that runs no JVM processor of ours (a Python processor's
  * plan), and so its checkpoint. Planned by [[ArrivalOrderStrategy]]. (In Spark's package: a
  * planner strategy for its own node.) */
case class PlannedCheck(check: PlannedCheck.Check, child: LogicalPlan) extends UnaryNode {
  override def output: Seq[Attribute] = child.output
  override protected def withNewChildInternal(newChild: LogicalPlan): PlannedCheck = copy(child = newChild)
}

object PlannedCheck {

  /** What to run; one instance per DataFrame made, which checks may tell apart by identity. */
  trait Check {
    def apply(): Unit
  }

  /** `df`, with `check` run whenever a query over it is planned. */
  def around(df: DataFrame, check: Check): DataFrame = {
    val ds = df.asInstanceOf[classic.Dataset[Row]]
    ArrivalOrderStrategy.register(ds.sparkSession)
    classic.Dataset.ofRows(ds.sparkSession, PlannedCheck(check, ds.queryExecution.analyzed))
  }
}
