package kstreams
package internal
package plan

import java.time.Duration

import org.apache.spark.TaskContext
import org.apache.spark.sql.Column
import org.apache.spark.sql.kstreams.RunningQueries
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types.StructType

/** What a checkpoint's state of one operator depends on: the operator and the settings that decide
  * which state a record reads and writes (interval, windows, key, grouping, id expression). A
  * restart that changes any of them would read state written under other rules, so
  * [[CheckpointOperators]] refuses it. Code that only computes values from the state (an adder,
  * a joiner, a processor's body) is not part of it: Kafka Streams lets such code change over a
  * store too.
  *
  * Rendered as `deduplicate_by_key(interval=PT10S, key=key, partition=partition)`.
  *
  * `stateTypes`: the types [[kstreams.CheckpointState]] needs to show what the operator stores as
  * bytes (a dedup operator's key columns, named as in the settings; a table's value), kept beside
  * the descriptor in the checkpoint; not part of what a restart must repeat (a column's type cannot
  * change without its expression or input changing, which the settings already name).
  */
private[kstreams] final case class OperatorDescriptor(
    operator: String,
    settings: Seq[(String, String)],
    stateTypes: Option[StructType] = None,
    restartMayChange: Set[String] = Set.empty) {

  /** The observed metric that counts what the operator forwarded and dropped (the manual, "Metrics"). */
  def metricName: String = "kstreams_" + operator

  def render: String = settings.map { case (k, v) => s"$k=$v" }.mkString(s"$operator(", ", ", ")")

  def withStateTypes(schema: StructType): OperatorDescriptor = copy(stateTypes = Some(schema))

  /** Marks setting `name` as one a restart may change: the operator judges the state written under
    * the checkpoint's value itself ([[RecordedSettings]]), so [[CheckpointOperators]] accepts another. */
  def mayChangeOnRestart(name: String): OperatorDescriptor = copy(restartMayChange = restartMayChange + name)

  /** Whether state recorded as `recorded` (a [[render]]ed descriptor) is this operator's: the same
    * descriptor but for the settings a restart may change. */
  def sameStateAs(recorded: String): Boolean =
    recorded == render || {
      val asRecorded = settings.map { case (k, v) =>
        k -> (if (restartMayChange(k)) OperatorDescriptor.setting(recorded, k).getOrElse(v) else v)
      }
      copy(settings = asRecorded).render == recorded
    }

  def interval(name: String, micros: Long): OperatorDescriptor =
    copy(settings = settings :+ (name -> OperatorDescriptor.duration(micros)))

  def expression(name: String, c: Column): OperatorDescriptor = copy(settings = settings :+ (name -> c.toString))

  def column(name: String, column: Option[String]): OperatorDescriptor =
    copy(settings = settings :+ (name -> column.getOrElse("(none)")))

  def setting(name: String, value: String): OperatorDescriptor = copy(settings = settings :+ (name -> value))

  def windows(w: TimeWindows): OperatorDescriptor = interval("size", w.sizeMicros).interval("grace", w.graceMicros)

  def windows(w: SessionWindows): OperatorDescriptor = interval("gap", w.gapMicros).interval("grace", w.graceMicros)

  def windows(w: JoinWindows): OperatorDescriptor =
    interval("time_difference", w.timeDifferenceMicros).interval("grace", w.graceMicros)
}

private[kstreams] object OperatorDescriptor {

  /** An operator named by its metric name (`kstreams_count_windowed`), shown without the prefix. */
  def apply(metricName: String): OperatorDescriptor = OperatorDescriptor(metricName.stripPrefix("kstreams_"), Nil, None)

  /** The descriptor of an operator over `resolved`'s stream: the grouping of arrival-order
    * operators is the partition column. */
  def arrivalOrder(metricName: String, resolved: ResolvedColumns): OperatorDescriptor =
    OperatorDescriptor(metricName).column("partition", resolved.partition.map(_.name))

  /** The value of setting `name` in a [[OperatorDescriptor.render]]ed descriptor: what follows
    * `name=` up to the next setting (`, ` followed by a name and `=`) or the closing parenthesis. */
  def setting(rendered: String, name: String): Option[String] = {
    val body = rendered.dropWhile(_ != '(').drop(1).stripSuffix(")")
    val starts = SettingStart.findAllMatchIn(body).toVector
    starts.indices.collectFirst {
      case i if starts(i).group(1) == name =>
        body.substring(starts(i).end, starts.lift(i + 1).map(_.start).getOrElse(body.length))
    }
  }

  private val SettingStart = """(?:^|, )([a-z_]+)=""".r

  /** ISO-8601, as `Intervals.micros` reads it back: `PT10S`. */
  private def duration(micros: Long): String =
    Duration.ofSeconds(Math.floorDiv(micros, 1000000L), Math.floorMod(micros, 1000000L) * 1000L).toString
}

/** `inner`, checked on the driver against the checkpoint before its query's first micro-batch
  * runs ([[CheckpointOperators]]), and refused in a real-time query unless it is a
  * [[RealTimeCapable]] processor. Spark calls a processor's `init` on the driver when it plans
  * the first micro-batch of each run (to learn the state variables' schemas), which is the one
  * moment an operator of a running query can see the query, and so its checkpoint and trigger. */
private[kstreams] final class DescribedProcessor[K, I, O](
    inner: StatefulProcessor[K, I, O],
    descriptor: OperatorDescriptor)
    extends StatefulProcessor[K, I, O] {

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    if (TaskContext.get() == null) {
      if (!inner.isInstanceOf[RealTimeCapable] && RunningQueries.current().exists(RunningQueries.isRealTime))
        throw RealTimeCapable.refused(descriptor.operator)
      val laidOut = inner match {
        case l: LaidOutState => Some(l.stateLayout)
        case _ => None
      }
      val recorded = CheckpointOperators.verify(this, descriptor, laidOut)
      (inner, recorded) match {
        case (r: RecordedSettings, Some(run)) => r.recorded(run.queryId, run.history)
        case _ =>
      }
      laidOut.foreach(_.plan(recorded))
    }
    // Spark's handle, with state encoders resolved once per JVM, not per task (StateEncoders)
    inner.setHandle(StateEncoders.handle(getHandle))
    inner.init(outputMode, timeMode)
  }

  override def handleInputRows(key: K, inputRows: Iterator[I], timerValues: TimerValues): Iterator[O] =
    inner.handleInputRows(key, inputRows, timerValues)

  override def handleExpiredTimer(key: K, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo): Iterator[O] =
    inner.handleExpiredTimer(key, timerValues, expiredTimerInfo)

  override def close(): Unit = inner.close()
}

/** A processor whose descriptor has settings a restart may change
  * ([[OperatorDescriptor.mayChangeOnRestart]]): before the first micro-batch of each run of a
  * streaming query (on the driver, before its tasks are serialized) it is told the query's id and
  * the operator's descriptors from the checkpoint's first run to this one
  * ([[CheckpointOperators.verify]]). Per query: one DataFrame may run in several queries, each on
  * a checkpoint of its own, so a processor keeps what each was told and looks its own up in its
  * tasks (`getQueryInfo`). */
private[kstreams] trait RecordedSettings {
  def recorded(queryId: String, history: Seq[String]): Unit
}

/** A processor whose state has more than one layout ([[StateLayout]]): before its `init` on the
  * driver it is told the layout of the checkpoint it runs on. */
private[kstreams] trait LaidOutState {
  def stateLayout: StateLayout
}

/** A processor that runs in a real-time query (spec section 8) as in a micro-batch: it reads the
  * real-time branch of [[PartitionInput.prepare]] or [[CompactInput.prepare]] (unsorted, in
  * each partition's order, one row per `handleInputRows` call; the compact input with an
  * end-of-batch marker per input partition, [[EndMarkers]]), [[Keyed.Input.grouped]] (one
  * group per key: Spark's shuffle by key, which in real-time mode has no sort after it, delivers
  * a key's records of one partition in offset order) or [[TaskClocks.prepare]]'s one-sided input
  * (annotated in the source task, its markers at the batch's end), and keeps nothing a later call
  * of the batch needs in a call's locals. Every other kstreams processor is refused there by
  * [[DescribedProcessor]] before a record is read. */
private[kstreams] trait RealTimeCapable

private[kstreams] object RealTimeCapable {

  /** The error for `operator` in a real-time query, in the words the user wrote it with. */
  def refused(operator: String): KStreamsException =
    new KStreamsException(
      s"$operator cannot run in real-time mode (trigger(realTime=...)): of the kstreams operators only " +
        "deduplicate_by_key, deduplicate_by_key_value, deduplicate_by_sequence, windowed distinct, " +
        "the aggregations (count, reduce, aggregate; plain, tumbling and session windows) and to_table run there " +
        "(the manual, \"Real-time mode\"); " +
        "run this query with a micro-batch trigger, e.g. trigger(processingTime='0 seconds')")
}
