package kstreams.processor

import org.apache.spark.sql.Encoder

/** A store declared for `KStream.process`: its name and its keys' and values' encoders. Made by
  * `Stores.keyValue`.
  *
  * @param name
  *   the name `ProcessorContext.getStateStore` finds it by; recorded in the checkpoint, so a
  *   restart that renames it is refused
  * @param keyEncoder
  *   how its keys are stored
  * @param valueEncoder
  *   how its values are stored
  *
  * {{{ val sums: StoreSpec = Stores.keyValue("sums", Encoders.STRING, Encoders.scalaLong) }}}
  */
final case class StoreSpec private[processor] (name: String, keyEncoder: Encoder[Any], valueEncoder: Encoder[Any])
