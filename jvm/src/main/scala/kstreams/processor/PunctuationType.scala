package kstreams.processor

/** When a punctuation fires. */
sealed trait PunctuationType
object PunctuationType {

  /** When the partition's stream time (largest record timestamp so far) reaches the next multiple
    * of the interval, checked after each record; as in Kafka, `punctuate` gets the stream time and
    * boundaries passed over in one jump fire once. The first record always punctuates. */
  case object StreamTime extends PunctuationType

  /** On processing time, one `interval` after the schedule was first registered and then every
    * `interval`, run by Spark's processing-time timers; needs `process(..., wallClock = true)`. */
  case object WallClockTime extends PunctuationType
}
