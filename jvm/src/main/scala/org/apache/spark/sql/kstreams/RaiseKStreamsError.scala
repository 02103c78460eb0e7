package org.apache.spark.sql.kstreams

import org.apache.spark.sql.Column
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode, JavaCode, TrueLiteral}
import org.apache.spark.sql.catalyst.expressions.codegen.Block._
import org.apache.spark.sql.classic.ExpressionUtils
import org.apache.spark.sql.types.{DataType, NullType}

import kstreams.KStreamsException

/** Spark's `raise_error`, throwing a [[kstreams.KStreamsException]]: fails the task with the string
  * its child evaluates to, for the input checks that run inside Catalyst (a null partition, offset
  * or timestamp, named with its partition and offset).
  *
  * Why not `raise_error`: it throws Spark's `USER_RAISED_EXCEPTION`, which looks the same as a
  * user's own, so nothing downstream could tell the library's message from the rest of the error
  * that stops the query. Every error the library raises on purpose is a `KStreamsException`, which
  * the Python layer finds in the cause chain and raises as a `KStreamsError` with our message first
  * (`kstreams_spark._query_errors`). Typed `NullType` like `raise_error`, so it fits any branch of
  * a `when`; it generates code as `raise_error` does (an expression without would take the whole
  * operator that checks the input out of whole-stage codegen). (In Spark's package: `ExpressionUtils`,
  * which makes a Column of a Catalyst expression, is Spark-private.) */
case class RaiseKStreamsError(child: Expression) extends UnaryExpression {
  override def dataType: DataType = NullType
  override def nullable: Boolean = true
  override def foldable: Boolean = false
  override def prettyName: String = "kstreams_raise_error"

  override def eval(input: InternalRow): Any =
    throw new KStreamsException(String.valueOf(child.eval(input)))

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val message = child.genCode(ctx)
    val exception = classOf[KStreamsException].getName
    ExprCode(
      code = code"""${message.code}
        |if (true) {
        |  throw new $exception(${message.isNull} ? "null" : ${message.value}.toString(), null);
        |}""".stripMargin,
      isNull = TrueLiteral,
      value = JavaCode.defaultLiteral(dataType)
    )
  }

  override protected def withNewChildInternal(newChild: Expression): RaiseKStreamsError = copy(child = newChild)
}

object RaiseKStreamsError {

  /** A column that fails the task with `message` (a string column) when evaluated. */
  def column(message: Column): Column = ExpressionUtils.column(RaiseKStreamsError(ExpressionUtils.expression(message)))
}
