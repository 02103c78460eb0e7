package org.apache.spark.sql.kstreams

import org.apache.spark.sql.Column
import org.apache.spark.sql.catalyst.{CatalystTypeConverters, InternalRow}
import org.apache.spark.sql.catalyst.expressions.{Expression, KnownNotNull, UnaryExpression, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.classic.ExpressionUtils
import org.apache.spark.sql.types.{BinaryType, DataType, StructType}

/** A value (of any type) as the bytes of a one-field `UnsafeRow`: equal values give equal bytes,
  * so the bytes can key an in-memory map, and a row's columns can travel through a stateful
  * processor as one byte array instead of being converted to and from JVM objects. */
case class EncodeBytes(child: Expression) extends UnaryExpression with CodegenFallback {
  override def dataType: DataType = BinaryType
  @transient private lazy val projection = UnsafeProjection.create(Array(child.dataType))
  override protected def nullSafeEval(value: Any): Any =
    projection(InternalRow(value)).getBytes
  override protected def withNewChildInternal(newChild: Expression): EncodeBytes =
    copy(child = newChild)
}

/** The struct that [[EncodeBytes]] encoded, read back from its bytes. */
case class DecodeStruct(child: Expression, schema: StructType)
    extends UnaryExpression with CodegenFallback {
  override def dataType: DataType = schema
  override protected def nullSafeEval(value: Any): Any = {
    val bytes = value.asInstanceOf[Array[Byte]]
    val row = new UnsafeRow(1)
    row.pointTo(bytes, bytes.length)
    row.getStruct(0, schema.length)
  }
  override protected def withNewChildInternal(newChild: Expression): DecodeStruct =
    copy(child = newChild)
}

object RowBytes {
  private def column(e: Expression): Column = ExpressionUtils.column(e)

  /** `c` encoded as bytes (null stays null). */
  def encode(c: Column): Column = column(EncodeBytes(toExpression(c)))

  /** The struct of `schema` decoded from `c`, known not null (callers filter nulls first). */
  def decodeNotNull(c: Column, schema: StructType): Column =
    column(KnownNotNull(DecodeStruct(toExpression(c), schema)))

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
