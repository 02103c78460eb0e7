package org.apache.spark.sql.kstreams

import org.apache.spark.sql.{DataFrame, Row, classic}
import org.apache.spark.sql.execution.streaming.sources.MemorySink
import org.apache.spark.sql.streaming.{OutputMode, StreamingQuery, Trigger}
import org.apache.spark.util.ManualClock

/** A manual clock that says when the query waits for it (as Spark's own test clock does). */
final class WaitingClock(start: Long) extends ManualClock(start) {
  private var waitingFor: Option[Long] = None

  override def waitTillTime(target: Long): Long = synchronized {
    try { waitingFor = Some(target); super.waitTillTime(target) }
    finally waitingFor = None
  }

  def isWaitingFor(target: Long): Boolean = synchronized(waitingFor.contains(target))
}

/** Starts a streaming query whose processing-time trigger (and so batch timestamps and
  * processing-time timers) follows a [[WaitingClock]]: for exact wall-clock tests. Lives in
  * Spark's package to reach `startQuery`'s clock parameter. */
object ManualClockQuery {
  def start(df: DataFrame, checkpoint: String, clock: WaitingClock, triggerMs: Long): (StreamingQuery, MemorySink) = {
    val sink = new MemorySink()
    val session = df.sparkSession.asInstanceOf[classic.SparkSession]
    // name, sink name, checkpoint, plan, options, sink, mode, temp checkpoint, recover, trigger, clock
    val query = session.streams.startQuery(
      None,
      None,
      Some(checkpoint),
      df.asInstanceOf[classic.Dataset[Row]],
      Map.empty[String, String],
      sink,
      OutputMode.Append(),
      false,
      true,
      Trigger.ProcessingTime(triggerMs),
      clock
    )
    (query, sink)
  }

  /** Moves the clock to `time` and waits until the query has run the batch due then and waits
    * for its next trigger. */
  def advanceTo(query: StreamingQuery, clock: WaitingClock, time: Long, triggerMs: Long): Unit = {
    clock.setTime(time)
    val next = (time / triggerMs + 1) * triggerMs
    val deadline = System.currentTimeMillis() + 60000
    while (!clock.isWaitingFor(next)) {
      if (!query.isActive) throw query.exception.getOrElse(new IllegalStateException("stopped"))
      if (System.currentTimeMillis() > deadline)
        throw new IllegalStateException(s"query did not reach clock time $next")
      Thread.sleep(10)
    }
  }
}
