package kstreams
package internal
package plan

import java.nio.charset.StandardCharsets
import java.util.{IdentityHashMap, UUID}

import scala.collection.mutable

import com.fasterxml.jackson.core.JsonProcessingException
import com.fasterxml.jackson.databind.ObjectMapper
import org.apache.hadoop.fs.{ChecksumException, FileSystem, Path}
import org.apache.spark.SparkContext
import org.apache.spark.sql.execution.streaming.runtime.StreamExecution
import org.apache.spark.sql.kstreams.RunningQueries
import org.apache.spark.sql.types.{DataType, StructType}

/** The kstreams operators a checkpoint holds state for, in `<checkpoint>/kstreams/operators.json`,
  * and the check that a restarted query runs the same ones (spec section 8: a restarted query
  * continues with the same results).
  *
  * Spark keeps a stateful operator's state by its position in the plan and checks little of what
  * wrote it: a `deduplicateByKey` replaced by a windowed `distinct` would start from empty state
  * and let duplicates through, and other swaps fail with Spark-internal messages. So each kstreams
  * operator's [[OperatorDescriptor]] is recorded in plan order the first time its query runs, and
  * every later run must present the same descriptor at the same position, or fail before its first
  * micro-batch with a [[KStreamsException]] naming both. An operator added or removed is refused by
  * Spark before this check runs (`STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA`, once a
  * micro-batch has committed state metadata); one added before that is recorded.
  *
  * The check runs in the driver-side `init` Spark calls while planning a run's first micro-batch
  * ([[DescribedProcessor]]), on the query's own thread, where the query id is a local property.
  * Spark plans each `transformWithState` there in plan order, calling `init` more than once per
  * operator, so operators are told apart by processor instance.
  */
private[kstreams] object CheckpointOperators {
  private val FileName = "kstreams/operators.json"
  private val mapper = new ObjectMapper()

  /** The file's two lists: the JVM operators, checked in the driver-side `init` of their
    * processors, and the Python processors' plans, checked when Spark plans them
    * ([[PlannedCheck]]; Spark plans a Python `transformWithState` in a Python worker, where no code
    * of ours sees the query). Each list keeps its own order, so that a checkpoint written before
    * the second existed reads as one whose Python processors are not recorded yet. */
  private val Lists = Seq("operators", "python_processors")

  /** Beside "operators", position for position: the types each operator's state is read with
    * ([[OperatorDescriptor]]`.stateTypes`, a StructType as JSON, "" for an operator without), read by
    * [[kstreams.CheckpointState]]. Not checked: filled in by the first run that knows them, so a
    * checkpoint written before this list existed gets it at its next restart. */
  private val StateTypes = "state_types"

  /** Beside "operators", position for position: the layout of the operator's state variables
    * ([[StateLayout]]) the checkpoint was written with, "" (or missing) for
    * layout 1, the only one before this list existed. Recorded once, when the operator is added:
    * its state keeps that layout for good, and the operator declares its variables by it
    * ([[StateLayout]]). */
  private val Layouts = "state_layouts"
  private val Stored = Lists :+ StateTypes :+ Layouts

  /** Beside "operators", position for position: for an operator with settings a restart may change
    * ([[OperatorDescriptor.mayChangeOnRestart]]), its descriptor as each run that changed them ran
    * it, from the first (the one in "operators") to the latest, each with the last batch committed
    * before that run ([[Ran]]); empty for one never changed. The operator judges the state written
    * under earlier settings by it ([[RecordedSettings]]). */
  private val History = "settings_history"

  /** One run's settings in [[History]]: `committedBefore`, the last batch id committed when it
    * started (-1: none). A run that committed nothing before the next one started has the same
    * `committedBefore` as that next run: it wrote no state, so the next one replaces it (its
    * settings judged nothing, and counting a smaller interval of it would kill live entries). */
  private final case class Ran(committedBefore: Long, descriptor: String)

  /** Per query, the run being checked and the positions its operators were given, per list. */
  private final case class Run(
      runId: UUID,
      checkpoint: Path,
      recorded: Map[String, mutable.ArrayBuffer[String]],
      history: mutable.ArrayBuffer[Vector[Ran]]) {
    val positions: Map[String, IdentityHashMap[AnyRef, Integer]] =
      Lists.map(_ -> new IdentityHashMap[AnyRef, Integer]()).toMap
  }
  private val runs = mutable.HashMap.empty[String, Run]

  /** What [[verify]] found for one operator: the query's id, the operator's descriptors from the
    * checkpoint's first run to this one (one for an operator whose settings never changed, see
    * [[History]]) and the layout its state was written with ([[Layouts]]). */
  final case class Recorded(queryId: String, history: Seq[String], stateLayout: Int)

  /** Checks `descriptor` against the checkpoint of the query being planned (`laidOut`: the
    * operator's layouts, for one whose state has more than one); `None` outside a streaming query. */
  def verify(processor: AnyRef, descriptor: OperatorDescriptor, laidOut: Option[StateLayout]): Option[Recorded] =
    RunningQueries.current().map { query =>
      val (history, layout) = verify(
        query,
        "operators",
        processor,
        descriptor.render,
        descriptor.stateTypes.map(_.json).getOrElse(""),
        laidOut,
        descriptor.sameStateAs)
      Recorded(query.id.toString, history, layout)
    }

  /** [[verify]] for a Python processor's plan, told apart by `plan` (one per DataFrame made). */
  def verifyPythonProcessor(plan: AnyRef, descriptor: String): Unit =
    RunningQueries.current().foreach { query =>
      verify(query, "python_processors", plan, descriptor, "", None, _ == descriptor)
    }

  /** Whether `checkpoint` was written by a query with kstreams operators (JVM or Python): it has
    * the file. */
  def isKStreams(checkpoint: String): Boolean = {
    val path = new Path(checkpoint, FileName)
    fileSystem(path).exists(path)
  }

  /** What `checkpoint` records, for tools that read it: the JVM operators' descriptors in order, each
    * with its state types if known. Empty for a checkpoint without the file. */
  def recorded(checkpoint: String): Seq[(String, Option[StructType])] = {
    val (lists, _) = read(new Path(checkpoint, FileName))
    lists("operators").toSeq.zipWithIndex.map { case (descriptor, i) =>
      val key = lists(StateTypes).lift(i).filter(_.nonEmpty)
      descriptor -> key.map(json => DataType.fromJson(json).asInstanceOf[StructType])
    }
  }

  private def verify(
      query: StreamExecution,
      list: String,
      processor: AnyRef,
      descriptor: String,
      types: String,
      laidOut: Option[StateLayout],
      sameState: String => Boolean): (Seq[String], Int) =
    synchronized {
      val key = query.id.toString
      val run = runs.get(key).filter(_.runId == query.runId).getOrElse {
        val checkpoint = new Path(query.resolvedCheckpointRoot, FileName)
        val (recorded, history) = read(checkpoint)
        val fresh = Run(query.runId, checkpoint, recorded, history)
        runs(key) = fresh
        fresh
      }
      val positions = run.positions(list)
      val recorded = run.recorded(list)
      if (!positions.containsKey(processor)) {
        val position = positions.size
        positions.put(processor, position)
        val added = position >= recorded.size
        if (added) recorded += descriptor
        else if (!sameState(recorded(position)))
          throw new KStreamsException(
            s"the checkpoint ${query.resolvedCheckpointRoot} holds the state of kstreams operator " +
              s"#${position + 1} ${recorded(position)}, but this query runs $descriptor in its " +
              "place; state written under other settings would give other results. Start this query " +
              "on a new checkpoint location, or run it with the settings the checkpoint was written " +
              s"with (the checkpoint's operators, in order: ${recorded.mkString("; ")})")
        // the state's types beside the descriptor, wherever they are missing (a new operator, or one
        // recorded by a release that did not record them)
        val typesRecorded = run.recorded(StateTypes)
        val typesAdded = list == "operators" && types.nonEmpty && !typesRecorded.lift(position).exists(_.nonEmpty)
        if (typesAdded) {
          while (typesRecorded.size <= position) typesRecorded += ""
          typesRecorded(position) = types
        }
        // read only for the JVM operators' list (a listing of the commit log)
        lazy val committed = query.commitLog.getLatestBatchId().getOrElse(-1L)
        // the layout the operator's state is in. Once a micro-batch has committed, Spark's own
        // state metadata says it (the variables each operator declared), and it wins over this
        // file's entry: the file can be lost (a driver killed between the delete and the rename
        // where a rename does not replace, as on HDFS) or rewritten without the entry by a release
        // before layouts, and a state read in the wrong layout reads as empty (duplicates let
        // through). Otherwise a new operator gets the current layout, and one recorded without an
        // entry stays at layout 1. The operators of one checkpoint were all added by its first run
        // (Spark refuses a stateful operator added later), so they share one layout.
        val layoutWas = layoutOf(run.recorded(Layouts), position)
        val layout = laidOut.filter(_ => list == "operators").fold(layoutWas) { l =>
          val inState =
            if (committed < 0) Set.empty[Int]
            else
              SparkStateMetadata
                .variablesByOperator(query.resolvedCheckpointRoot, committed, fileSystemConf)
                .values
                .flatMap(l.shownByVariables)
                .toSet
          if (inState.size == 1) inState.head else if (added) l.current else layoutWas
        }
        val layoutChanged = layout != layoutWas
        if (layoutChanged) {
          val layouts = run.recorded(Layouts)
          while (layouts.size <= position) layouts += ""
          layouts(position) = if (layout == 1) "" else layout.toString
        }
        // this run's settings appended to the operator's history when a restart changed them; a
        // run that committed nothing is replaced by this one (see Ran)
        val changed = list == "operators" && {
          val before = historyOf(run.history, position, recorded(position))
          val kept = if (before.size > 1 && before.last.committedBefore == committed) before.init else before
          val after = if (kept.last.descriptor == descriptor) kept else kept :+ Ran(committed, descriptor)
          after != before && {
            while (run.history.size <= position) run.history += Vector.empty
            run.history(position) = if (after.size > 1) after else Vector.empty
            true
          }
        }
        if (added || typesAdded || layoutChanged || changed) write(run.checkpoint, run.recorded, run.history.toSeq)
      }
      val position = positions.get(processor).intValue
      if (list != "operators") (Seq(recorded(position)), 1)
      else
        (
          historyOf(run.history, position, recorded(position)).map(_.descriptor),
          layoutOf(run.recorded(Layouts), position))
    }

  private def layoutOf(layouts: collection.Seq[String], position: Int): Int =
    layouts.lift(position).filter(_.nonEmpty).fold(1)(_.toInt)

  /** The runs of operator `position` in `history`: the first alone (`first`) when never changed. */
  private def historyOf(history: collection.Seq[Vector[Ran]], position: Int, first: String): Vector[Ran] =
    history.lift(position).filter(_.nonEmpty).getOrElse(Vector(Ran(Long.MinValue, first)))

  private def fileSystemConf = SparkContext.getOrCreate().hadoopConfiguration

  private def fileSystem(path: Path): FileSystem = path.getFileSystem(fileSystemConf)

  /** The descriptors of operator number `operator` (from 0) from the checkpoint's first run to its
    * latest ([[History]]), for tools that read the checkpoint. */
  def history(checkpoint: String, operator: Int): Seq[String] = {
    val (lists, history) = read(new Path(checkpoint, FileName))
    lists("operators")
      .lift(operator)
      .toVector
      .flatMap(first => historyOf(history.toSeq, operator, first).map(_.descriptor))
  }

  private def read(path: Path): (Map[String, mutable.ArrayBuffer[String]], mutable.ArrayBuffer[Vector[Ran]]) = {
    val fs = fileSystem(path)
    val recorded = Stored.map(_ -> mutable.ArrayBuffer.empty[String]).toMap
    val history = mutable.ArrayBuffer.empty[Vector[Ran]]
    if (fs.exists(path)) {
      val in = fs.open(path)
      try {
        val root = mapper.readTree(in)
        Stored.foreach(list => root.path(list).forEach(node => recorded(list) += node.asText()))
        root.path(History).forEach { runs =>
          val ran = Vector.newBuilder[Ran]
          runs.forEach(node => ran += Ran(node.path("committed_before").asLong(), node.path("descriptor").asText()))
          history += ran.result()
        }
      } catch {
        // both found while the file is read (before a query's first micro-batch, or by a tool
        // reading the checkpoint): one line naming the file and what to do, not Hadoop's or
        // Jackson's exception alone
        case e: ChecksumException => throw unreadable(path, e, checksumMismatch(path))
        case e: JsonProcessingException =>
          val at = Option(e.getLocation).fold("")(l => s" (line ${l.getLineNr}, column ${l.getColumnNr})")
          throw unreadable(path, e, s"is not valid JSON: ${e.getOriginalMessage}$at. Mend it,")
      } finally in.close()
    }
    (recorded, history)
  }

  /** Hadoop's local file system writes a checksum file beside each file it writes and checks it on
    * every read, so a file edited by hand (or damaged) fails to read until that file goes. */
  private def checksumMismatch(path: Path): String = {
    val crc = new Path(path.getParent, s".${path.getName}.crc")
    s"does not match its checksum file $crc: it was changed other than through Hadoop's file system " +
      s"(edited by hand?) or is damaged. If the change was meant, delete $crc and restart; if not,"
  }

  private def unreadable(path: Path, cause: Exception, what: String): KStreamsException =
    new KStreamsException(
      s"the checkpoint's list of kstreams operators $path $what restore the file from a copy of the " +
        "checkpoint, or delete it to have the next run record it anew (forgetting the settings of earlier " +
        "runs: the manual, \"Operating a query\")",
      cause
    )

  /** Replaces the file through a rename, so that a process killed while writing leaves the old
    * file or the new one, never half of one. (A local rename replaces the target; where a rename
    * refuses an existing target, as on HDFS, the old file is deleted first.) */
  private def write(path: Path, recorded: Map[String, mutable.ArrayBuffer[String]], history: Seq[Vector[Ran]]): Unit = {
    val fs = fileSystem(path)
    val root = mapper.createObjectNode()
    root.put("version", 1)
    Stored.foreach { name =>
      // a checkpoint without Python processors keeps the file earlier releases wrote
      if (name == "operators" || recorded(name).exists(_.nonEmpty)) {
        val list = root.putArray(name)
        recorded(name).foreach(list.add)
      }
    }
    // a checkpoint whose settings never changed keeps the file earlier releases wrote
    if (history.exists(_.nonEmpty)) {
      val lists = root.putArray(History)
      history.foreach { runs =>
        val list = lists.addArray()
        runs.foreach(r => list.addObject().put("committed_before", r.committedBefore).put("descriptor", r.descriptor))
      }
    }
    val temporary = new Path(path.getParent, s".${path.getName}.${UUID.randomUUID()}.tmp")
    val out = fs.create(temporary, false)
    try out.write(mapper.writerWithDefaultPrettyPrinter().writeValueAsString(root).getBytes(StandardCharsets.UTF_8))
    finally out.close()
    if (!fs.rename(temporary, path) && !(fs.delete(path, false) && fs.rename(temporary, path)))
      throw new KStreamsException(s"could not write $path (rename from $temporary failed)")
  }
}
