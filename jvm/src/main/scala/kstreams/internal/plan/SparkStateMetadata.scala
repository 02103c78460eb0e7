package kstreams
package internal
package plan

import scala.util.Try

import com.fasterxml.jackson.databind.ObjectMapper
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.execution.streaming.state.{OperatorStateMetadataV2, OperatorStateMetadataV2Reader}

/** What Spark's own state metadata says about a checkpoint's `transformWithState` operators: the
  * names of the state variables each declared (`<checkpoint>/state/<operator id>/_metadata/v2/`,
  * written by Spark whenever an operator's variables change). Unlike `kstreams/operators.json`,
  * which kstreams writes and which can be lost or rewritten by another release, this is what the
  * state store holds, so it decides the layout of a checkpoint's state ([[CheckpointOperators]]).
  *
  * Read with Spark's reader of those files, not its `state-metadata` data source, because the
  * driver reads it while planning a query's first micro-batch, where starting a job of its own is
  * not wanted; tools that read a stopped checkpoint use the data source
  * ([[kstreams.internal.inspect.StateVariables]]).
  *
  * {{{
  *   SparkStateMetadata.variablesByOperator("/checkpoints/q", committedBatch = 3, hadoopConf)
  *   // Map(0 -> Set("chunks", "entries"))
  * }}}
  */
private[kstreams] object SparkStateMetadata {
  private val mapper = new ObjectMapper()

  /** The names of the state variables a `transformWithState` operator's properties (Spark's
    * `operatorPropertiesJson`) list, Spark's own (`$`-prefixed timers and TTL indexes) left out. */
  def variableNames(operatorPropertiesJson: String): Seq[String] = {
    val variables = mapper.readTree(operatorPropertiesJson).path("stateVariables")
    (0 until variables.size).map(i => variables.get(i).path("stateName").asText()).filterNot(_.startsWith("$"))
  }

  /** Per operator id, the state variables of each `transformWithState` operator of `checkpoint`
    * as of batch `committedBatch` (the metadata written at or before it: a batch not committed may
    * have been planned by a run that failed). Other stateful operators have no entry. */
  def variablesByOperator(
      checkpoint: String,
      committedBatch: Long,
      hadoopConf: Configuration): Map[Int, Set[String]] = {
    val stateDir = new Path(checkpoint, "state")
    val fs = stateDir.getFileSystem(hadoopConf)
    if (!fs.exists(stateDir)) Map.empty
    else
      fs.listStatus(stateDir)
        .iterator
        .filter(s => s.isDirectory && s.getPath.getName.nonEmpty && s.getPath.getName.forall(_.isDigit))
        .filter(s => fs.exists(OperatorStateMetadataV2.metadataDirPath(s.getPath)))
        .flatMap { s =>
          // Spark's reader refuses an operator with no metadata at or before the batch (one added
          // by a run that committed nothing yet): such an operator tells nothing
          Try(new OperatorStateMetadataV2Reader(s.getPath, hadoopConf, committedBatch).read()).toOption.flatten match {
            case Some(m: OperatorStateMetadataV2) =>
              Some(s.getPath.getName.toInt -> variableNames(m.operatorPropertiesJson).toSet)
            case _ => None
          }
        }
        .toMap
  }
}
