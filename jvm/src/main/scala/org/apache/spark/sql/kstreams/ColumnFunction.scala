package org.apache.spark.sql.kstreams

import org.apache.spark.sql.{Column, SparkSession}
import org.apache.spark.sql.catalyst.{CatalystTypeConverters, InternalRow}
import org.apache.spark.sql.catalyst.expressions.{Alias, AttributeReference, BindReferences, Cast, Expression}
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, Project}
import org.apache.spark.sql.classic
import org.apache.spark.sql.types.DataType

/** A user's Column expression over named inputs (e.g. `agg + value`), resolved once on the driver
  * and evaluated row by row inside a stateful processor (an aggregation's adder, which must fold
  * records one at a time in arrival order). Values go in and out as plain Scala values (what
  * `Row.get` gives), so a processor can keep them in its state with a row encoder.
  *
  * {{{ val add = ColumnFunction(spark, Seq("agg" -> LongType, "value" -> LongType), col("agg") + 1) }}}
  *
  * (In Spark's package: `classic.Dataset.ofRows`, which analyzes the expression over a plan, is
  * Spark-private.)
  */
final class ColumnFunction private (bound: Expression, inputTypes: Seq[DataType], val dataType: DataType)
    extends Serializable {

  @transient private lazy val toCatalyst = inputTypes.map(CatalystTypeConverters.createToCatalystConverter)
  @transient private lazy val toScala = CatalystTypeConverters.createToScalaConverter(dataType)
  private val serializer = new ValueSerializer(dataType)

  /** The expression's value for these inputs (Scala values, in the order of the input names). */
  def apply(inputs: Any*): Any = {
    val row = InternalRow.fromSeq(inputs.zip(toCatalyst).map { case (v, conv) => conv(v) })
    toScala(bound.eval(row))
  }

  /** `value` (of [[dataType]]) serialized: equal values give equal bytes (KIP-557's comparison). */
  def serialize(value: Any): Array[Byte] = serializer(value)
}

object ColumnFunction {

  /** Resolves `expression` against inputs of the given names and types; with `resultType`, the
    * result is cast to it (an aggregate keeps its initializer's type). Throws Spark's
    * AnalysisException when the expression does not resolve. */
  def apply(
      spark: SparkSession,
      inputs: Seq[(String, DataType)],
      expression: Column,
      resultType: Option[DataType] = None): ColumnFunction = {
    val attributes = inputs.map { case (name, dataType) => AttributeReference(name, dataType)() }
    val relation = LocalRelation(attributes)
    val analyzed = classic.Dataset
      .ofRows(spark.asInstanceOf[classic.SparkSession], relation)
      .select(expression)
      .queryExecution
      .analyzed
    val resolved = analyzed match {
      case Project(Seq(Alias(child, _)), _) => child
      case Project(Seq(other), _) => other
      case other => throw new IllegalStateException(s"unexpected plan for $expression: $other")
    }
    val typed = resultType match {
      case Some(t) if t != resolved.dataType => Cast(resolved, t)
      case _ => resolved
    }
    val bound = BindReferences.bindReference(typed, relation.output)
    new ColumnFunction(bound, inputs.map(_._2), typed.dataType)
  }

  /** The value of a constant expression (an aggregate's initializer), as a Scala value. */
  def constant(spark: SparkSession, expression: Column): (Any, DataType) = {
    val f = apply(spark, Seq.empty, expression)
    (f(), f.dataType)
  }
}
