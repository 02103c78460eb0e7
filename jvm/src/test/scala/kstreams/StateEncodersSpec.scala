package kstreams

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.catalyst.encoders.encoderFor
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.types.StructType
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

import kstreams.internal.plan.StateEncoders

final case class EncodedEntry(key: String, at: Long, bytes: Array[Byte])

/** [[StateEncoders]]: a state variable's encoder resolved once per JVM (what Spark otherwise
  * analyzes in every task of every micro-batch), against Spark's own resolution. The operators'
  * suites run every state variable through it. */
class StateEncodersSpec extends AnyFunSuite {
  private val entry = EncodedEntry("k", 5L, Array[Byte](1, 2))

  private def same(e: EncodedEntry): (String, Long, Seq[Byte]) = (e.key, e.at, e.bytes.toSeq)

  test("resolved once against its own columns, the same as Spark resolves it, for every encoder kind") {
    val once = encoderFor(StateEncoders.boundOnce(Encoders.product[EncodedEntry]))
    // one per type description, whatever instance asks
    assert(encoderFor(StateEncoders.boundOnce(Encoders.product[EncodedEntry])) eq once)
    val resolved = once.resolveAndBind()
    assert(once.resolveAndBind() eq resolved, "analyzed again")
    assert(resolved.objDeserializer == encoderFor(Encoders.product[EncodedEntry]).resolveAndBind().objDeserializer)
    assert(same(resolved.createDeserializer()(once.createSerializer()(entry))) == same(entry))
    val long = encoderFor(StateEncoders.boundOnce(Encoders.scalaLong))
    assert(long.resolveAndBind() eq long.resolveAndBind())
    assert(long.resolveAndBind().createDeserializer()(long.createSerializer()(42L)) == 42L)
    val binary = encoderFor(StateEncoders.boundOnce(Encoders.BINARY))
    assert(
      binary.resolveAndBind().createDeserializer()(binary.createSerializer()(Array[Byte](3))).toSeq == Seq[Byte](3))
  }

  test("an encoder that holds a function (a serialization codec) is left to Spark") {
    // compared by reference, and its codec must not serve two tasks at once
    val kryo = Encoders.kryo[EncodedEntry]
    assert(StateEncoders.boundOnce(kryo) eq kryo)
  }

  test("resolved against other columns, it is analyzed as Spark would") {
    val once = encoderFor(StateEncoders.boundOnce(Encoders.product[EncodedEntry]))
    val reversed = StructType(once.schema.fields.reverse)
    val byName = once.resolveAndBind(DataTypeUtils.toAttributes(reversed))
    assert(byName ne once.resolveAndBind())
    val row = new GenericInternalRow(Array[Any](Array[Byte](1, 2), 5L, UTF8String.fromString("k")))
    assert(same(byName.createDeserializer()(row)) == same(entry))
  }
}
