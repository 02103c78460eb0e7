package org.apache.spark.sql.kstreams

import scala.collection.mutable

import org.apache.spark.sql.{DataFrame, Row}
import org.apache.spark.sql.catalyst.plans.logical.{CollectMetrics, LogicalPlan}
import org.apache.spark.sql.classic

/** Spark requires an observed metric's name to be unique within a query unless both uses compute
  * the same thing. When an operator combines inputs that each carry a kstreams metric of the same
  * name (two `toTable` results being joined), the later inputs' clashing metrics are renamed
  * `name_2`, `name_3`, ... (the same names each time the same code builds the query). (In Spark's
  * package: `classic.Dataset.ofRows`, which makes the renamed plan a DataFrame, is Spark-private.) */
object ObservedNames {
  def distinct(inputs: Seq[DataFrame]): Seq[DataFrame] = {
    def analyzed(df: DataFrame): LogicalPlan =
      df.asInstanceOf[classic.Dataset[Row]].queryExecution.analyzed
    def metrics(plan: LogicalPlan): Seq[CollectMetrics] = plan.collect { case c: CollectMetrics => c }
    val names = mutable.Set.empty[String] ++ inputs.flatMap(df => metrics(analyzed(df)).map(_.name))
    val seen = mutable.ArrayBuffer.empty[CollectMetrics]
    inputs.map { df =>
      val plan = analyzed(df)
      var renamed = false
      val newPlan = plan.transformUp {
        case c: CollectMetrics if seen.exists(s => s.name == c.name && !s.sameResult(c)) =>
          val free = Iterator.from(2).map(i => s"${c.name}_$i").find(n => !names.contains(n)).get
          names += free
          renamed = true
          c.copy(name = free)
      }
      seen ++= metrics(newPlan)
      if (!renamed) df
      else classic.Dataset.ofRows(df.sparkSession.asInstanceOf[classic.SparkSession], newPlan)
    }
  }
}
