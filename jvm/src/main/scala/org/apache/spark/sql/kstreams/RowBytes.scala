package org.apache.spark.sql.kstreams

import org.apache.spark.sql.Column
import org.apache.spark.sql.catalyst.{CatalystTypeConverters, InternalRow}
import org.apache.spark.sql.catalyst.expressions.{
  Expression,
  KnownNotNull,
  UnaryExpression,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode, GenerateUnsafeProjection}
import org.apache.spark.sql.catalyst.expressions.codegen.Block._
import org.apache.spark.sql.classic.ExpressionUtils
import org.apache.spark.sql.types.{BinaryType, DataType, StructType}

/** Values as the bytes of one `UnsafeRow` (one field per child): equal values give equal bytes,
  * so the bytes can key an in-memory map, and a record's columns can travel through a stateful
  * processor as one byte array instead of being converted to and from JVM objects.
  *
  * Generates code (Spark's own UnsafeRow writer) rather than evaluating per row: it runs once per
  * record on the hot path of the dedup operators. Never null: null values are null fields. (In
  * Spark's package: `ExpressionUtils`, which makes a Column of a Catalyst expression, is
  * Spark-private.) */
case class EncodeRow(children: Seq[Expression]) extends Expression {
  override def nullable: Boolean = false
  override def dataType: DataType = BinaryType

  @transient private lazy val projection = UnsafeProjection.create(children)
  override def eval(input: InternalRow): Any = projection(input).getBytes.clone()

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val row = GenerateUnsafeProjection.createCode(ctx, children, false)
    // getBytes may return the writer's reused buffer; the copy is what leaves the expression
    ev.copy(
      code = code"""
      |${row.code}
      |byte[] ${ev.value} = ${row.value}.getBytes();
      |if (${ev.value} == ${row.value}.getBaseObject()) ${ev.value} = (byte[]) ${ev.value}.clone();""".stripMargin,
      isNull = org.apache.spark.sql.catalyst.expressions.codegen.FalseLiteral
    )
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): EncodeRow =
    copy(children = newChildren)
}

/** The row of `schema` that [[EncodeRow]] wrote, read in place from its bytes. */
case class DecodeRow(child: Expression, schema: StructType) extends UnaryExpression {
  override def dataType: DataType = schema
  override protected def nullSafeEval(value: Any): Any = {
    val bytes = value.asInstanceOf[Array[Byte]]
    val row = new UnsafeRow(schema.length)
    row.pointTo(bytes, bytes.length)
    row
  }
  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode =
    nullSafeCodeGen(
      ctx,
      ev,
      bytes => {
        val rowClass = classOf[UnsafeRow].getName
        s"""${ev.value} = new $rowClass(${schema.length});
         |(($rowClass) ${ev.value}).pointTo($bytes, $bytes.length);""".stripMargin
      }
    )
  override protected def withNewChildInternal(newChild: Expression): DecodeRow =
    copy(child = newChild)
}

object RowBytes {
  private def column(e: Expression): Column = ExpressionUtils.column(e)

  /** `columns` encoded together as the bytes of one UnsafeRow (never null). */
  def encode(columns: Seq[Column]): Column = column(EncodeRow(columns.map(toExpression)))

  /** The row of `schema` decoded from `c`, known not null (callers filter nulls first). */
  def decodeNotNull(c: Column, schema: StructType): Column =
    column(KnownNotNull(DecodeRow(toExpression(c), schema)))

  private def toExpression(c: Column): Expression =
    ExpressionUtils.expression(c)
}

/** Serializes Scala values (as `Row.get` returns them) of one type to the bytes of a one-field
  * UnsafeRow: equal values give equal bytes, which is KIP-557's "same serialized value". */
final class ValueSerializer(dataType: DataType) extends Serializable {
  @transient private lazy val toCatalyst = CatalystTypeConverters.createToCatalystConverter(dataType)
  @transient private lazy val projection = UnsafeProjection.create(Array(dataType))

  // a copy: getBytes may return the projection's reused buffer
  def apply(value: Any): Array[Byte] = projection(InternalRow(toCatalyst(value))).getBytes.clone()
}
