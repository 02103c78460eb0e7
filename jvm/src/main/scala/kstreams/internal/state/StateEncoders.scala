package kstreams
package internal
package state

import java.util.concurrent.ConcurrentHashMap

import scala.reflect.ClassTag
import scala.reflect.runtime.universe.TypeTag

import org.apache.spark.sql.{Encoder, Encoders}

/** Encoders of the case classes processors keep in state, made once per JVM and class.
  *
  * Why: `Encoders.product` reflects over the case class, 20-100 ms a call (measured in the tasks
  * of a real-time query), and a processor's `init`, which creates its state variables, runs in
  * every task of every batch. In a real-time query that time is a pause for every record that
  * arrives at a batch boundary. An encoder is immutable, so one serves every task.
  */
private[kstreams] object StateEncoders {
  private val made = new ConcurrentHashMap[Class[_], Encoder[_]]()

  def product[T <: Product: TypeTag: ClassTag]: Encoder[T] =
    made
      .computeIfAbsent(implicitly[ClassTag[T]].runtimeClass, _ => Encoders.product[T])
      .asInstanceOf[Encoder[T]]
}
