package kstreams
package internal
package plan

import java.util.concurrent.ConcurrentHashMap

import scala.reflect.ClassTag

import org.apache.spark.sql.{Encoder, Encoders}
import org.apache.spark.sql.catalyst.analysis.{Analyzer, SimpleAnalyzer}
import org.apache.spark.sql.catalyst.encoders.{encoderFor, AgnosticEncoder, ExpressionEncoder}
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.streaming._

/** The encoders of what processors keep in state, made and resolved once per JVM.
  *
  * Why: Spark builds every state variable again in every task of every micro-batch (a processor's
  * `init` runs there), and with it the variable's encoders:
  *  - `Encoders.product` reflects over the case class, 20-100 ms a call (measured in the tasks of
  *    a real-time query): [[product]] makes each once;
  *  - each state variable's value encoder, and a map's key encoder, is resolved with the analyzer
  *    (`ExpressionEncoder.resolveAndBind`): a JFR profile of 20-row micro-batches of
  *    `deduplicate_by_key` (2026-11-28, rate source, `local[2]`, the tests' settings) had that
  *    analysis at 56% of `init`'s samples and `init` at 30% of the state tasks', where Spark's
  *    own dedup has no `init` at all. [[handle]] resolves each encoder once: the same encoder
  *    resolved against the same columns always binds to the same expressions;
  *  - `transformWithState` resolves the grouping key's encoder again for its timers in every task:
  *    [[groupNumber]] is resolved once too.
  * Such an encoder (of values: primitives, binary, strings, case classes and rows of them) is
  * immutable, so one serves every task; every resolved encoder stays for the JVM's life, one per
  * state type the JVM's operators use. Any other encoder (a user store's `Encoders.kryo`, say) is
  * left to Spark, as before.
  */
private[kstreams] object StateEncoders {
  private val made = new ConcurrentHashMap[Class[_], Encoder[_]]()
  // by type description (an AgnosticEncoder: case classes, equal for equal types, schemas and
  // classes): the encoder handed to Spark, and what it resolves to
  private val boundOnceByType = new ConcurrentHashMap[AnyRef, BoundOnce[_]]()
  private val resolvedByType = new ConcurrentHashMap[AnyRef, ExpressionEncoder[_]]()

  /** `make`, a case class's encoder (`Encoders.product[T]`), made once per JVM and class. By name:
    * the `TypeTag` it needs is materialized where it is written, through a runtime mirror lookup
    * that took a third of a dedup processor's `init` when done per task (JFR, as above). */
  def product[T <: Product: ClassTag](make: => Encoder[T]): Encoder[T] =
    made.computeIfAbsent(implicitly[ClassTag[T]].runtimeClass, _ => make).asInstanceOf[Encoder[T]]

  /** `handle`, whose state variables get encoders resolved once per JVM ([[boundOnce]]). Set as
    * a processor's handle in place of Spark's; the rest is Spark's. */
  def handle(handle: StatefulProcessorHandle): StatefulProcessorHandle = handle match {
    case h: BoundOnceHandle => h
    case h => new BoundOnceHandle(h)
  }

  /** `encoder`, resolved once per JVM when Spark resolves it against its own columns; as it is
    * where that could share what must not be shared (below). */
  def boundOnce[T](encoder: Encoder[T]): Encoder[T] = encoder match {
    case b: BoundOnce[T] @unchecked => b
    // a type description (`Encoders.scalaLong`, `BINARY`, `product`, `row`) made of values only:
    // one that holds a function (a serialization codec such as `Encoders.kryo`, a case class's
    // outer pointer) is compared by reference, so a task's deserialized copy would add an entry
    // per task, and its expressions (a codec, a serializer instance) must not serve two tasks
    case a: AgnosticEncoder[T] @unchecked if comparesByValue(a) =>
      boundOnceByType.computeIfAbsent(a, _ => new BoundOnce(encoderFor(a))).asInstanceOf[BoundOnce[T]]
    case other => other
  }

  private def comparesByValue(x: Any): Boolean = x match {
    case i: Iterable[_] => i.forall(comparesByValue) // (a Seq is a function too)
    case _: Function0[_] | _: Function1[_, _] => false
    case p: Product => p.productIterator.forall(comparesByValue)
    case _ => true
  }

  /** The grouping key of the operators grouped by a group number (an input partition, or a hash
    * group of keys): `transformWithState` analyzes it for its timers in every task. */
  lazy val groupNumber: Encoder[Int] = boundOnce(Encoders.scalaInt)

  /** `encoder`, whose `resolveAndBind` against its own schema with Spark's default analyzer (what
    * a state variable does) analyzes once per JVM, also for the copies a task deserializes from
    * the plan (a grouping key's encoder); anything else as `encoder` would. */
  private final class BoundOnce[T](from: ExpressionEncoder[T])
      extends ExpressionEncoder[T](from.encoder, from.objSerializer, from.objDeserializer) {
    override def resolveAndBind(attrs: Seq[Attribute], analyzer: Analyzer): ExpressionEncoder[T] =
      if ((analyzer eq SimpleAnalyzer) && ownColumns(attrs))
        resolvedByType
          .computeIfAbsent(encoder, _ => super.resolveAndBind(attrs, analyzer))
          .asInstanceOf[ExpressionEncoder[T]]
      else super.resolveAndBind(attrs, analyzer)

    private def ownColumns(attrs: Seq[Attribute]): Boolean =
      attrs.length == schema.length && attrs.zip(schema.fields).forall { case (a, f) =>
        a.name == f.name && a.dataType == f.dataType && a.nullable == f.nullable
      }
  }

  private final class BoundOnceHandle(handle: StatefulProcessorHandle) extends StatefulProcessorHandle {
    override def getValueState[T](stateName: String, valEncoder: Encoder[T], ttlConfig: TTLConfig): ValueState[T] =
      handle.getValueState(stateName, boundOnce(valEncoder), ttlConfig)
    override def getValueState[T: Encoder](stateName: String, ttlConfig: TTLConfig): ValueState[T] =
      getValueState(stateName, implicitly[Encoder[T]], ttlConfig)
    override def getListState[T](stateName: String, valEncoder: Encoder[T], ttlConfig: TTLConfig): ListState[T] =
      handle.getListState(stateName, boundOnce(valEncoder), ttlConfig)
    override def getListState[T: Encoder](stateName: String, ttlConfig: TTLConfig): ListState[T] =
      getListState(stateName, implicitly[Encoder[T]], ttlConfig)
    override def getMapState[K, V](
        stateName: String,
        userKeyEnc: Encoder[K],
        valEncoder: Encoder[V],
        ttlConfig: TTLConfig): MapState[K, V] =
      handle.getMapState(stateName, boundOnce(userKeyEnc), boundOnce(valEncoder), ttlConfig)
    override def getMapState[K: Encoder, V: Encoder](stateName: String, ttlConfig: TTLConfig): MapState[K, V] =
      getMapState(stateName, implicitly[Encoder[K]], implicitly[Encoder[V]], ttlConfig)
    override def getQueryInfo(): QueryInfo = handle.getQueryInfo()
    override def registerTimer(expiryTimestampMs: Long): Unit = handle.registerTimer(expiryTimestampMs)
    override def deleteTimer(expiryTimestampMs: Long): Unit = handle.deleteTimer(expiryTimestampMs)
    override def listTimers(): Iterator[Long] = handle.listTimers()
    override def deleteIfExists(stateName: String): Unit = handle.deleteIfExists(stateName)
  }
}
