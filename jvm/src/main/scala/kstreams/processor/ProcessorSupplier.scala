package kstreams.processor

/** Makes a new [[Processor]] for each input partition; shipped to the executors, so it must be
  * serializable (a lambda is).
  *
  * {{{ val supplier: ProcessorSupplier[String, Long] = () => new Sum }}}
  */
trait ProcessorSupplier[K, V] extends Serializable {

  /** @return
    *   a new processor, not one shared with another partition (as Kafka Streams asks) */
  def get(): Processor[K, V]
}
