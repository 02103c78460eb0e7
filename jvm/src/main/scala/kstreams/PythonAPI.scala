package kstreams

import org.apache.spark.sql.{Column, DataFrame, SparkSession}

import kstreams.internal.aggregate.Aggregate
import kstreams.internal.dedup.DedupCaches
import kstreams.internal.plan.HelperColumns
import kstreams.internal.runner.{ProcessorPlan, TopologyGraph}

/** The JVM door of the Python package (`kstreams_spark._jvm`), and only what a py4j call cannot
  * express by itself. Python calls the public API ([[KStream]], [[KGroupedStream]], [[KTable]],
  * [[TimeWindows]], [[JoinWindows]]...) directly, with the same config objects and the same
  * errors as Scala; this object adds the constructor with plain optional arguments, the functions
  * the API takes (Python applies a user's function once, to the input columns named here, and
  * passes the resulting expression), and conversions of Scala collections.
  */
private[kstreams] object PythonAPI {

  /** A [[KStream]] over `df`; `partition` / `offset` may be null for "no such column",
    * `onNullTimestamp` is "fail" or "skip". */
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

  /** key, value, timestamp, partition (or null), offset (or null), "fail" or "skip". */
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

  // ---- functions: Python applies a user's function to the columns named here, once, and
  // ---- passes the result; nothing runs row by row in Python.

  /** Names of an aggregation's adder (and merger) inputs: the running aggregate and the value. */
  def aggregateInputName: String = Aggregate.AggInput
  def valueInputName: String = Aggregate.ValueInput

  /** Names of a joiner's inputs: the left and the right value. */
  def leftValueName: String = HelperColumns.value(0)
  def rightValueName: String = HelperColumns.value(1)

  /** The function of one column (`mapValues`, `flatMapValues`) whose result is `result`. */
  def function1(result: Column): Column => Column = _ => result

  /** The function of two columns (key selectors, adders, joiners) whose result is `result`. */
  def function2(result: Column): (Column, Column) => Column = (_, _) => result

  /** The `map` mapper whose result is (`key`, `value`). */
  def pair(key: Column, value: Column): (Column, Column) => (Column, Column) = (_, _) => (key, value)

  /** `BranchedKStream`'s branches as a Java map. */
  def branches(branches: Map[String, KStream]): java.util.Map[String, KStream] =
    scala.jdk.CollectionConverters.MapHasAsJava(branches).asJava

  // ---- the processor API's Python runtime, and tools

  // The checkpoint calls below take the session to work in, or null from a Spark Connect client,
  // which has no JVM session to pass: then the session the call runs in, the client's session on
  // the server, which finds the checkpoint where the server runs.
  private def sessionOrActive(spark: SparkSession): SparkSession = Option(spark).getOrElse(SparkSession.active)

  /** [[CheckpointState.operators]] as an array (a list in Python). */
  def checkpointOperators(spark: SparkSession, checkpoint: String): Array[String] =
    CheckpointState.operators(sessionOrActive(spark), checkpoint).toArray

  /** [[CheckpointState.read]]. */
  def readState(spark: SparkSession, checkpoint: String, operator: Int): DataFrame =
    CheckpointState.read(sessionOrActive(spark), checkpoint, operator)

  /** [[CheckpointState.repartition]], the file sinks' paths as a JSON array of strings. */
  def repartitionState(spark: SparkSession, checkpoint: String, partitions: Int, fileSinks: String): Int =
    CheckpointState.repartition(sessionOrActive(spark), checkpoint, partitions, jsonNames(fileSinks))

  /** The graph of a Python `Topology`: the one implementation of its checks and `describe()`. */
  def topologyGraph(): TopologyGraph = new TopologyGraph

  /** The input of a Python processor (`KStream.process` in Python): rows grouped by input
    * partition in arrival order, with the helper columns of `PartitionInput.arranged`; checks the
    * columns and the session like the Scala `process`. With the `processors` it feeds and their
    * `stores` (JSON arrays of names; given with one input of a topology, empty arrays with the
    * others), a streaming query over it is checked against its checkpoint, as the Scala runner's. */
  def processorInput(ks: KStream, processors: String, stores: String): DataFrame = {
    ProcessorPlan.pythonInput(ks.df, ks.columns, jsonNames(processors), jsonNames(stores))
  }

  /** The helper columns of [[processorInput]]'s rows, as JSON (`{"group": ..., "partition": ...,
    * "order": ..., "timestampMicros": ...}`): the Python runtime reads them by these names rather
    * than keeping copies. */
  def processorInputColumns(): String =
    new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(
      java.util.Map.of(
        "group",
        HelperColumns.Group,
        "partition",
        HelperColumns.Partition,
        "order",
        HelperColumns.Order,
        "timestampMicros",
        HelperColumns.TimestampMicros))

  /** A JSON array of strings, as Python passes a list of names. */
  private def jsonNames(array: String): Seq[String] =
    new com.fasterxml.jackson.databind.ObjectMapper().readValue(array, classOf[Array[String]]).toSeq

  /** Frees the dedup maps kept in this JVM (the driver's; in local mode every task's), returning
    * the bytes they held; see `DedupCaches.clear`. */
  def clearDedupMemory(): Long = DedupCaches.clear()

  /** Microseconds in an interval string, with the same rules as the Scala API. */
  def intervalMicros(text: String): Long = Intervals.micros(text)

  /** The static methods of `kstreams.<className>` whose result a Spark Connect client takes as a
    * value (text, a number, a flag, an array of text) rather than as an object to call further,
    * by their return types: the client asks once per session (this method is the one it knows to be
    * a value) instead of keeping a list of its own that a new method could miss. */
  def valueMethods(className: String): Array[String] = {
    def unknown = new KStreamsException(s"there is no kstreams class $className")
    if (!className.matches("[A-Z][A-Za-z0-9]*")) throw unknown
    val cls =
      try Class.forName("kstreams." + className)
      catch { case _: ClassNotFoundException => throw unknown }
    cls.getMethods
      .filter(m => java.lang.reflect.Modifier.isStatic(m.getModifiers) && ValueResults(m.getReturnType))
      .map(_.getName)
      .distinct
      .sorted
  }

  private val ValueResults: Set[Class[_]] = Set(
    classOf[String],
    classOf[Array[String]],
    java.lang.Long.TYPE,
    java.lang.Integer.TYPE,
    java.lang.Boolean.TYPE,
    java.lang.Double.TYPE)
}
