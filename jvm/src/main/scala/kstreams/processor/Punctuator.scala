package kstreams.processor

/** A callback for one schedule, instead of the processor's `punctuate`.
  *
  * {{{ context.schedule(Duration.ofMinutes(1), PunctuationType.WallClockTime, t => flush(t)) }}}
  */
trait Punctuator extends Serializable {

  /** @param timestamp
    *   the stream time (stream-time schedule) or the processing time (wall-clock), epoch ms */
  def punctuate(timestamp: Long): Unit
}
