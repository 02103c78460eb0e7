package org.apache.spark.sql.kstreams

import org.apache.spark.sql.Column
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.catalyst.expressions.codegen.Block._
import org.apache.spark.sql.classic.ExpressionUtils
import org.apache.spark.sql.types.DataType

import kstreams.KStreamsException

/** `value`, or, where it is null, a [[kstreams.KStreamsException]] that fails the task: the input
  * checks that run inside Catalyst (a null partition, offset or timestamp), their message naming
  * where the record came from. The message is `texts(0) + context(0) + texts(1) + ... +
  * texts(last)`, each context value (the record's partition, offset) as a string, "null" for a null.
  *
  * Why one expression and not `when(value.isNull, raise_error(concat(...))).otherwise(value)`:
  * that spelling is about fifteen expression nodes per check, and Spark analyzes, optimizes and
  * generates code for every node of a plan again in every micro-batch; with three checks per
  * arrival-order operator it was a third of the input's expression tree. This is one node over
  * its inputs, and the message is built only when a record fails.
  *
  * Why not Spark's `raise_error`: it throws Spark's `USER_RAISED_EXCEPTION`, which looks the same
  * as a user's own, so nothing downstream could tell the library's message from the rest of the
  * error that stops the query. Every error the library raises on purpose is a `KStreamsException`,
  * which the Python layer finds in the cause chain and raises as a `KStreamsError` with our message
  * first (`kstreams_spark._query_errors`).
  *
  * Nullable, as the `when` it replaced was, so that the schemas (and the state a checkpoint stored
  * under them) stay as they were. It generates code (an expression without would take the whole
  * operator that checks the input out of whole-stage codegen). (In Spark's package:
  * `ExpressionUtils`, which makes a Column of a Catalyst expression, is Spark-private.) */
case class NotNullOrFail(value: Expression, context: Seq[Expression], texts: Seq[String]) extends Expression {
  require(texts.size == context.size + 1, "one more text than context values")

  override def children: Seq[Expression] = value +: context
  override def dataType: DataType = value.dataType
  override def nullable: Boolean = true
  override def foldable: Boolean = false
  override def prettyName: String = "kstreams_not_null_or_fail"

  override def eval(input: InternalRow): Any = {
    val v = value.eval(input)
    if (v == null) throw new KStreamsException(message(context.map(e => String.valueOf(e.eval(input))).toArray))
    v
  }

  /** The message for the context values, as strings ("null" for a null). */
  def message(values: Array[String]): String =
    texts.head + values.zip(texts.tail).map { case (v, text) => v + text }.mkString

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val checked = value.genCode(ctx)
    // the context is evaluated in the failing branch only: nothing is added to a record that passes
    val values = context.map(_.genCode(ctx))
    val self = ctx.addReferenceObj("check", this)
    val exception = classOf[KStreamsException].getName
    val strings = values.map(v => s"""${v.isNull} ? "null" : String.valueOf(${v.value})""")
    ev.copy(
      code = code"""${checked.code}
        |if (${checked.isNull}) {
        |  ${values.map(_.code).mkString("\n")}
        |  throw new $exception($self.message(new String[] {${strings.mkString(", ")}}), null);
        |}""".stripMargin,
      isNull = checked.isNull,
      value = checked.value
    )
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): NotNullOrFail =
    copy(value = newChildren.head, context = newChildren.tail)
}

object NotNullOrFail {

  /** `value`, failing the task where it is null with the message `texts` interleaved with the
    * `context` values ([[NotNullOrFail]]). */
  def column(value: Column, context: Seq[Column], texts: Seq[String]): Column =
    ExpressionUtils.column(
      NotNullOrFail(ExpressionUtils.expression(value), context.map(ExpressionUtils.expression), texts))
}
