package kstreams

import org.apache.spark.sql.{Column, DataFrame}

/** The one JVM entry point of the Python package: everything Python needs, with plain types.
  * Python never reimplements operator logic; it builds a [[KStream]] here and calls its methods.
  */
object PythonAPI {
  /** A [[KStream]] over `df`; `partition` / `offset` may be null for "no such column". */
  def kstream(
      df: DataFrame,
      key: String,
      value: String,
      timestamp: String,
      partition: String,
      offset: String,
      onNullTimestamp: String): KStream =
    KStream(df, StreamColumns(key, value, timestamp, Option(partition), Option(offset),
      NullTimestamps.parse(onNullTimestamp)))

  /** Microseconds in an interval string, with the same rules as the Scala API. */
  def intervalMicros(text: String): Long = Intervals.micros(text)

  def deduplicateByKey(ks: KStream, interval: String): DataFrame = ks.deduplicateByKey(interval).df

  def deduplicateByKeyValue(ks: KStream, id: Column, interval: String): DataFrame =
    ks.deduplicateByKeyValue(id, interval).df

  def deduplicate(ks: KStream, id: Column, interval: String): DataFrame =
    ks.deduplicate(id, interval).df

  def deduplicateBySequence(ks: KStream, sequence: Column): DataFrame =
    ks.deduplicateBySequence(sequence).df

  /** Tumbling-window distinct; `grace` may be null for "no grace". */
  def tumblingDistinct(ks: KStream, size: String, grace: String): DataFrame = {
    val windows = if (grace == null) TimeWindows.ofSizeWithNoGrace(size)
      else TimeWindows.ofSizeAndGrace(size, grace)
    ks.groupByKey.windowedBy(windows).distinct().df
  }

  /** Session-window distinct; `grace` may be null for "no grace". */
  def sessionDistinct(ks: KStream, gap: String, grace: String): DataFrame = {
    val windows = if (grace == null) SessionWindows.ofInactivityGapWithNoGrace(gap)
      else SessionWindows.ofInactivityGapAndGrace(gap, grace)
    ks.groupByKey.windowedBy(windows).distinct().df
  }

  /** The input of a Python processor (`KStream.process` in Python): rows grouped by input
    * partition in arrival order, with the helper columns of [[ArrivalOrder.arranged]]; checks the
    * columns and the session like the Scala `process`. */
  def processorInput(ks: KStream): DataFrame = processor.ProcessorPlan.pythonInput(ks.df, ks.columns)
}
