package kstreams

import org.apache.spark.sql.{Column, DataFrame}

import kstreams.internal.aggregate._
import kstreams.internal.dedup._
import kstreams.internal.join._
import kstreams.internal.plan._

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
    KStream(
      df,
      StreamColumns(key, value, timestamp, Option(partition), Option(offset), NullTimestamps.parse(onNullTimestamp)))

  /** Frees the dedup maps kept in this JVM (the driver's; in local mode every task's), returning
    * the bytes they held; see [[DedupCaches.clear]]. */
  def clearDedupMemory(): Long = DedupCaches.clear()

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
    val windows =
      if (grace == null) TimeWindows.ofSizeWithNoGrace(size)
      else TimeWindows.ofSizeAndGrace(size, grace)
    ks.groupByKey.windowedBy(windows).distinct().df
  }

  /** Session-window distinct; `grace` may be null for "no grace". */
  def sessionDistinct(ks: KStream, gap: String, grace: String): DataFrame = {
    val windows =
      if (grace == null) SessionWindows.ofInactivityGapWithNoGrace(gap)
      else SessionWindows.ofInactivityGapAndGrace(gap, grace)
    ks.groupByKey.windowedBy(windows).distinct().df
  }

  // ---- the DSL. Python applies its functions to Columns named below, once, and passes the
  // ---- resulting expressions here; nothing runs row by row in Python.

  /** Names of the adder's inputs (aggregate, value) and of the joiner's (left, right value). */
  def aggregateInputName: String = Aggregate.AggInput
  def valueInputName: String = Aggregate.ValueInput
  def leftValueName: String = Keyed.value(0)
  def rightValueName: String = Keyed.value(1)

  /** key, value, timestamp, partition (or null), offset (or null), on-null-timestamp. */
  def columnNames(ks: KStream): Array[String] = {
    val c = ks.columns
    Array(
      c.key,
      c.value,
      c.timestamp,
      c.partition.orNull,
      c.offset.orNull,
      if (c.onNullTimestamp == NullTimestamps.Skip) "skip" else "fail")
  }

  def filter(ks: KStream, predicate: Column): KStream = ks.filter(predicate)
  def filterNot(ks: KStream, predicate: Column): KStream = ks.filterNot(predicate)
  def mapValues(ks: KStream, newValue: Column): KStream = ks.mapValues(_ => newValue)
  def selectKey(ks: KStream, newKey: Column): KStream = ks.selectKey((_, _) => newKey)
  def map(ks: KStream, newKey: Column, newValue: Column): KStream = ks.map((_, _) => (newKey, newValue))
  def flatMap(ks: KStream, pairs: Column): KStream = ks.flatMap((_, _) => pairs)
  def flatMapValues(ks: KStream, values: Column): KStream = ks.flatMapValues(_ => values)
  def merge(ks: KStream, other: KStream): KStream = ks.merge(other)
  def kafkaRecords(ks: KStream, topic: String): DataFrame = ks.toKafkaRecords(topic)

  /** Branches in order; `defaultName` null means no default branch. */
  def split(
      ks: KStream,
      predicates: Array[Column],
      names: Array[String],
      defaultName: String): java.util.Map[String, KStream] = {
    val branched = predicates.zip(names).foldLeft(ks.split()) { case (b, (p, n)) => b.branch(p, n) }
    val branches = if (defaultName == null) branched.noDefaultBranch() else branched.defaultBranch(defaultName)
    scala.jdk.CollectionConverters.MapHasAsJava(branches).asJava
  }

  def toTable(ks: KStream): KTable = ks.toTable
  def tableStream(table: KTable): KStream = table.toStream

  /** The aggregation's Scala calls, for [[grouped]]. */
  private final case class Calls[T](
      plain: KGroupedStream => T,
      tumbling: TimeWindowedKStream => T,
      session: SessionWindowedKStream => T)

  /** `windowKind` is null (not windowed), "tumbling" (`size` = window size) or "session"
    * (`size` = inactivity gap); `grace` may be null. */
  private def grouped[T](ks: KStream, windowKind: String, size: String, grace: String)(calls: Calls[T]): T =
    windowKind match {
      case null => calls.plain(ks.groupByKey)
      case "tumbling" =>
        calls.tumbling(
          ks.groupByKey.windowedBy(
            if (grace == null) TimeWindows.ofSizeWithNoGrace(size) else TimeWindows.ofSizeAndGrace(size, grace)))
      case "session" =>
        calls.session(
          ks.groupByKey.windowedBy(if (grace == null) SessionWindows.ofInactivityGapWithNoGrace(size)
          else SessionWindows.ofInactivityGapAndGrace(size, grace)))
      case other => throw new KStreamsException(s"window kind must be tumbling or session, got '$other'")
    }

  def count(ks: KStream, windowKind: String, size: String, grace: String): KTable =
    grouped(ks, windowKind, size, grace)(Calls(_.count(), _.count(), _.count()))

  def reduce(ks: KStream, adder: Column, windowKind: String, size: String, grace: String): KTable = {
    val f = (_: Column, _: Column) => adder
    grouped(ks, windowKind, size, grace)(Calls(_.reduce(f), _.reduce(f), _.reduce(f)))
  }

  /** `merger` (over the same two input names, both aggregates) is needed for session windows. */
  def aggregate(
      ks: KStream,
      initializer: Column,
      adder: Column,
      merger: Column,
      windowKind: String,
      size: String,
      grace: String): KTable = {
    val f = (_: Column, _: Column) => adder
    grouped(ks, windowKind, size, grace)(
      Calls(
        _.aggregate(initializer, f),
        _.aggregate(initializer, f),
        { session =>
          if (merger == null)
            throw new KStreamsException(
              "aggregate over SessionWindows needs a merger(aggregate1, aggregate2) that combines the " +
                "aggregates of two sessions a record merges")
          session.aggregate(initializer, f, (_, _) => merger)
        }
      ))
  }

  /** `kind` is "inner", "left" or "outer"; `grace` may be null. */
  def streamJoin(
      ks: KStream,
      other: KStream,
      joined: Column,
      kind: String,
      timeDifference: String,
      grace: String): KStream = {
    val windows =
      if (grace == null) JoinWindows.ofTimeDifferenceWithNoGrace(timeDifference)
      else JoinWindows.ofTimeDifferenceAndGrace(timeDifference, grace)
    joinKind(kind) match {
      case JoinKind.Inner => ks.join(other, (_, _) => joined, windows)
      case JoinKind.Left => ks.leftJoin(other, (_, _) => joined, windows)
      case JoinKind.Outer => ks.outerJoin(other, (_, _) => joined, windows)
    }
  }

  def tableJoin(table: KTable, other: KTable, joined: Column, kind: String): KTable =
    joinKind(kind) match {
      case JoinKind.Inner => table.join(other, (_, _) => joined)
      case JoinKind.Left => table.leftJoin(other, (_, _) => joined)
      case JoinKind.Outer => table.outerJoin(other, (_, _) => joined)
    }

  private def joinKind(kind: String): JoinKind = kind match {
    case "inner" => JoinKind.Inner
    case "left" => JoinKind.Left
    case "outer" => JoinKind.Outer
    case other => throw new KStreamsException(s"join kind must be inner, left or outer, got '$other'")
  }

  /** The input of a Python processor (`KStream.process` in Python): rows grouped by input
    * partition in arrival order, with the helper columns of [[ArrivalOrder.arranged]]; checks the
    * columns and the session like the Scala `process`. */
  def processorInput(ks: KStream): DataFrame = processor.ProcessorPlan.pythonInput(ks.df, ks.columns)
}
