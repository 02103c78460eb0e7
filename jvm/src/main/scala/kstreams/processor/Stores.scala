package kstreams.processor

import org.apache.spark.sql.{Encoder, Encoders}

/** Declares a store for `KStream.process`. Keys and values are encoded with the given Spark
  * encoders, or with Kryo when none are given.
  *
  * {{{
  * Stores.keyValue("sums")                                          // any key and value (Kryo)
  * Stores.keyValue("sums", Encoders.STRING, Encoders.scalaLong)     // typed: faster, smaller
  * }}}
  */
object Stores {

  /** A key-value store of any Scala values, encoded with Kryo. */
  def keyValue(name: String): StoreSpec =
    keyValue(name, Encoders.kryo[AnyRef], Encoders.kryo[AnyRef])

  /** A key-value store whose keys and values Spark encodes with `keys` and `values`.
    *
    * @param name
    *   the store's name, unique among a processor's stores; part of what the checkpoint records
    * @param keys
    *   the keys' encoder, e.g. `Encoders.STRING`
    * @param values
    *   the values' encoder, e.g. `Encoders.scalaLong`
    * @throws kstreams.KStreamsException
    *   if `name` is null or empty
    */
  def keyValue[K, V](name: String, keys: Encoder[K], values: Encoder[V]): StoreSpec = {
    if (name == null || name.isEmpty)
      throw new kstreams.KStreamsException("a store needs a name, e.g. Stores.keyValue(\"counts\")")
    StoreSpec(name, keys.asInstanceOf[Encoder[Any]], values.asInstanceOf[Encoder[Any]])
  }
}
