package kstreams.processor

import org.apache.spark.sql.Encoder

/** A store declared for `KStream.process`: its name and its keys' and values' encoders. Made by
  * [[Stores.keyValue]].
  *
  * {{{ val sums: StoreSpec = Stores.keyValue("sums", Encoders.STRING, Encoders.scalaLong) }}}
  */
final case class StoreSpec private[processor] (name: String, keyEncoder: Encoder[Any], valueEncoder: Encoder[Any])
