package org.apache.spark.sql.kstreams

import java.util.Optional

import org.apache.spark.connect.proto.{Expression, Relation}
import org.apache.spark.sql.{Dataset, Row}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.classic
import org.apache.spark.sql.classic.ExpressionUtils
import org.apache.spark.sql.connect.planner.SparkConnectPlanner
import org.apache.spark.sql.connect.plugin.RelationPlugin
import org.apache.spark.sql.types.{StringType, StructField, StructType}
import org.sparkproject.connect.protobuf.Any

import kstreams.internal.connect.{CallDecoder, CallResults, CallRunner}

/** The Spark Connect server plugin of kstreams (`spark.connect.extensions.relation.classes`): turns
  * a client's `kstreams.connect.Call` (`proto/kstreams_connect.proto`) into the plan of the
  * DataFrame the same Scala API returns. It only parses: the planner rebuilds the client's
  * DataFrames and Columns, [[kstreams.internal.connect.CallRunner]] makes the call.
  *
  * {{{
  * start-connect-server.sh --jars kstreams-spark_2.13-0.1.0.jar \
  *   --conf spark.connect.extensions.relation.classes=org.apache.spark.sql.kstreams.KStreamsConnectPlugin
  * }}}
  *
  * (In Spark's package: `classic.Dataset.ofRows`, `Dataset.logicalPlan` and `ExpressionUtils`, which
  * turn the client's plans and expressions into DataFrames and Columns and back, are Spark-private.)
  */
class KStreamsConnectPlugin extends RelationPlugin {

  override def transform(relation: Array[Byte], planner: SparkConnectPlanner): Optional[LogicalPlan] = {
    val message = Any.parseFrom(relation)
    if (!message.getTypeUrl.endsWith("/" + KStreamsConnectPlugin.CallType)) return Optional.empty()
    val session = planner.session
    val runner = new CallRunner(
      bytes => classic.Dataset.ofRows(session, planner.transformRelation(Relation.parseFrom(bytes))),
      bytes => ExpressionUtils.column(planner.transformExpression(Expression.parseFrom(bytes)))
    )
    runner.run(CallDecoder.call(message.getValue.toByteArray)) match {
      case df: Dataset[_] => Optional.of(df.asInstanceOf[classic.Dataset[_]].logicalPlan)
      case value =>
        val row = java.util.List.of(Row(CallResults.json(value)))
        Optional.of(session.createDataFrame(row, StructType(Seq(StructField("json", StringType)))).logicalPlan)
    }
  }
}

object KStreamsConnectPlugin {

  /** The message type a client puts in the relation's `extension` (`type.googleapis.com/...`). */
  val CallType = "kstreams.connect.Call"
}
