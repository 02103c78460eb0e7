package kstreams
package internal
package inspect

import org.apache.hadoop.fs.Path
import org.apache.spark.sql.{Column, DataFrame, SparkSession}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.RowBytes
import org.apache.spark.sql.types.StructType

import kstreams.internal.dedup.PerPartitionDedupProcessor
import kstreams.internal.plan.{CheckpointOperators, HelperColumns, OperatorDescriptor, SparkStateMetadata}

/** Reads the state of operator number `operator` (from 1) of a checkpoint, as its kind shows it
  * ([[DedupState]], [[WindowState]], [[TableState]]), with Spark's `statestore` reader: the
  * checkpoint's last committed version, without a running query.
  *
  * Which of Spark's operators holds it: both the checkpoint's `kstreams/operators.json` and
  * Spark's state metadata list operators in plan order, but Spark's also holds operators that are
  * not ours (and may number them in another order), so an operator is found by the state
  * variables only its kind declares: the k-th recorded operator of a kind is the k-th of Spark's
  * operators with that kind's variables.
  */
private[kstreams] object OperatorState {

  private sealed abstract class Kind(val operators: Seq[String], isIts: Set[String] => Boolean) extends Product {
    def declares(variables: Set[String]): Boolean = isIts(variables)
  }
  // either layout of its state
  private case object PerPartitionDedup
      extends Kind(
        Seq("deduplicate_by_key", "deduplicate_by_key_value"),
        PerPartitionDedupProcessor.layoutOfVariables(_).isDefined)
  private case object GlobalDedup extends Kind(Seq("deduplicate"), Set("logChunks", "storeMode", "groups").subsetOf)
  private case object TumblingDistinct extends Kind(Seq("windowed_distinct"), _.contains("openWindows"))
  private case object SessionDistinct extends Kind(Seq("session_distinct"), _.contains("sessions"))
  // a table join keeps a "current" row too, beside others
  private case object Table extends Kind(Seq("to_table"), _ == Set("current"))
  private val Kinds = Seq(PerPartitionDedup, GlobalDedup, TumblingDistinct, SessionDistinct, Table)

  private def kindOf(descriptor: String): Option[Kind] =
    Kinds.find(_.operators.contains(descriptor.takeWhile(_ != '(')))

  def read(spark: SparkSession, checkpoint: String, operator: Int): DataFrame = {
    val recorded = CheckpointOperators.recorded(checkpoint)
    if (recorded.isEmpty)
      throw new KStreamsException(
        s"$checkpoint is not the checkpoint of a query with kstreams operators (no ${checkpoint.stripSuffix("/")}/kstreams/operators.json)")
    if (operator < 1 || operator > recorded.size)
      throw new KStreamsException(
        s"operator #$operator is not in $checkpoint: it records ${recorded.size} kstreams operator(s), " +
          recorded.zipWithIndex.map { case ((d, _), i) => s"#${i + 1} $d" }.mkString("; "))
    val (descriptor, types) = recorded(operator - 1)
    val kind = kindOf(descriptor).getOrElse {
      throw new KStreamsException(
        s"operator #$operator of $checkpoint is $descriptor; reading state is supported for " +
          s"${Kinds.flatMap(_.operators).mkString(", ")} only")
    }
    val nth = recorded.take(operator).count { case (d, _) => kindOf(d).contains(kind) }
    val operatorId = operatorIds(spark, checkpoint, kind).lift(nth - 1).getOrElse {
      throw new KStreamsException(
        s"$checkpoint has no committed state for operator #$operator ($descriptor) yet: run its query " +
          "until a micro-batch has committed")
    }
    val state = new StateVariables(spark, checkpoint, operatorId)
    val settings = new Settings(descriptor)
    // the settings of each run that changed one a restart may change, first to last
    val runs = CheckpointOperators.history(checkpoint, operator - 1).map(new Settings(_))
    kind match {
      case PerPartitionDedup => DedupState.read(state, runs, types)
      case GlobalDedup => GlobalDedupState.read(state, runs, types)
      case TumblingDistinct => WindowState.tumbling(state, runs)
      case SessionDistinct => WindowState.sessions(state, runs)
      case Table => TableState.read(state, settings, types)
    }
  }

  /** Spark's operator ids of the checkpoint's operators of `kind`, in order. */
  private def operatorIds(spark: SparkSession, checkpoint: String, kind: Kind): Seq[Int] = {
    val stateDir = new Path(checkpoint, "state")
    if (!stateDir.getFileSystem(spark.sparkContext.hadoopConfiguration).exists(stateDir)) return Nil
    StateVariables
      .ofOperators(spark, checkpoint)
      .collect { case (id, _, names) if kind.declares(names.toSet) => id.toInt }
      .sorted
  }
}

/** One operator's state variables, read from the checkpoint's last committed version. */
private[inspect] final class StateVariables(spark: SparkSession, checkpoint: String, operatorId: Int) {
  def apply(name: String): DataFrame =
    spark.read
      .format("statestore")
      .option("operatorId", operatorId.toLong)
      .option("stateVarName", name)
      .load(checkpoint)

  /** The names of the operator's state variables in the checkpoint (a later release may add one). */
  lazy val names: Set[String] =
    StateVariables
      .ofOperators(spark, checkpoint)
      .collectFirst { case (id, _, n) if id == operatorId => n.toSet }
      .getOrElse(Set.empty)

  /** The `transformWithState` group of a row of the arrival-order operators (one input partition). */
  val group: Column = col("key").getField(HelperColumns.Group).as("group")

  /** (group, partition, stream_time in micros) of an arrival-order operator. */
  def streamTimes: DataFrame =
    apply("streamTimes").select(
      group,
      col("user_map_key.value").as("partition"),
      col("user_map_value.value").as("stream_time"))
}

private[kstreams] object StateVariables {

  /** Every stateful operator Spark's state metadata lists for `checkpoint`: its id, Spark's name for
    * it (`transformWithStateExec`...) and the names of its `transformWithState` state variables
    * (Spark's own, `$`-prefixed, left out; none for other operators). */
  def ofOperators(spark: SparkSession, checkpoint: String): Seq[(Long, String, Seq[String])] =
    spark.read
      .format("state-metadata")
      .load(checkpoint)
      .select("operatorId", "operatorName", "operatorProperties")
      .collect()
      .toSeq
      .map { row =>
        val names = Option(row.getString(2)).toSeq.flatMap(SparkStateMetadata.variableNames)
        (row.getLong(0), row.getString(1), names)
      }

  /** A dedup key's columns decoded from `key_bytes` (the encoded key parts) by the types the
    * checkpoint recorded; the bytes themselves for a checkpoint not restarted since an older release
    * wrote it. */
  def keyColumns(keyTypes: Option[StructType]): Seq[Column] = keyTypes match {
    case Some(schema) =>
      val decoded = RowBytes.decodeNotNull(col("key_bytes"), schema)
      schema.fieldNames.toSeq.map(n => decoded.getField(n).as(n))
    case None => Seq(col("key_bytes"))
  }
}

/** The settings of a rendered descriptor, `name(a=1, b=PT10S)`. */
private[inspect] final class Settings(descriptor: String) {
  def apply(name: String): String =
    OperatorDescriptor
      .setting(descriptor, name)
      .getOrElse(throw new KStreamsException(s"no $name in the recorded descriptor $descriptor"))

  def micros(name: String): Long = Intervals.micros(apply(name)) // ISO-8601, as rendered
}
