package org.apache.spark.sql.kstreams

import java.nio.charset.StandardCharsets

import scala.collection.mutable

import org.apache.hadoop.fs.Path
import org.apache.spark.SparkContext
import org.apache.spark.sql.catalyst.expressions.{Expression, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.execution.streaming.runtime.StreamExecution
import org.apache.spark.sql.types.{DataType, IntegerType}
import org.apache.spark.unsafe.hash.Murmur3_x86_32

/** Which state partition (task) each group of an arrival-order operator runs in: group `i` (an
  * input partition, or an id group of `deduplicate`) in state partition `i mod N` of `N`, as Kafka
  * Streams spreads tasks evenly over its threads.
  *
  * Why a key and not the group number: Spark places a `transformWithState` group on partition
  * `pmod(murmur3(key, 42), N)`, and the hash of the small numbers 0..P-1 is lumpy: 8 input
  * partitions over 2 state partitions put 5 in one task and 3 in the other, over 8 put 3 in one
  * task and none in three. Murmur3 of one int is a bijection, so each group number `i >= 0` has
  * exactly one key whose hash is `i` ([[keyOf]]); grouping on that key puts group `i` in
  * partition `i mod N` for every `N`, and the hash of the key gives the group back ([[indexOf]]).
  *
  * A checkpoint keeps the placement it was started with, since its state is stored under the
  * group keys ([[roundRobin]]). (In Spark's package beside [[ArrivalOrderStrategy]], which plans
  * its expression; the planner code here uses nothing of `kstreams.internal`, so the dependency
  * runs one way.)
  */
object GroupPlacement {

  /** Spark's hash-partitioning seed (`HashPartitioning`, `Murmur3Hash`). */
  private val Seed = 42

  /** The grouping key of group `index`: `murmur3(keyOf(i), 42) == i`. */
  def keyOf(index: Int): Int = {
    // fmix undone, last step first
    var h = index
    h ^= h >>> 16
    h *= InverseFmix2
    h ^= (h >>> 13) ^ (h >>> 26)
    h *= InverseFmix1
    h ^= h >>> 16
    h ^= 4 // the input's length in bytes
    // mixH1 undone: h = rotl(seed ^ k, 13) * 5 + 0xe6546b64
    h = Integer.rotateRight((h - 0xe6546b64) * InverseOf5, 13) ^ Seed
    // mixK1 undone: k = rotl(input * C1, 15) * C2
    Integer.rotateRight(h * InverseC2, 15) * InverseC1
  }

  /** The group number of the grouping key `key` ([[keyOf]]'s inverse). */
  def indexOf(key: Int): Int = Murmur3_x86_32.hashInt(key, Seed)

  /** The multiplicative inverse of an odd `x` modulo 2^32 (Newton's iteration, 5 steps for 32
    * bits). */
  private def inverse(x: Int): Int = {
    var y = x
    (0 until 5).foreach(_ => y *= 2 - x * y)
    y
  }
  private val InverseC1 = inverse(0xcc9e2d51)
  private val InverseC2 = inverse(0x1b873593)
  private val InverseOf5 = inverse(5)
  private val InverseFmix1 = inverse(0x85ebca6b)
  private val InverseFmix2 = inverse(0xc2b2ae35)

  /** Name of the marker file, under the checkpoint, of a query whose groups are placed by
    * [[keyOf]]. */
  private val MarkerFile = "kstreams/placement"
  private val RoundRobin = "round_robin"

  /** Per query id: the run the placement was decided for, and the decision. */
  private val decided = mutable.HashMap.empty[String, (java.util.UUID, Boolean)]

  /** Whether `query` (None: a batch query) groups on [[keyOf]]. A query started before this
    * placement existed has committed micro-batches but no marker: its state is stored under the
    * group numbers themselves, so it keeps placing them by Spark's hash. Any other query writes
    * the marker before its first micro-batch runs, so a restart decides the same. */
  def roundRobin(query: Option[StreamExecution]): Boolean = query.forall { q =>
    synchronized {
      decided.get(q.id.toString).filter(_._1 == q.runId).map(_._2).getOrElse {
        val marker = new Path(q.resolvedCheckpointRoot, MarkerFile)
        val fs = marker.getFileSystem(SparkContext.getOrCreate().hadoopConfiguration)
        val placed =
          if (fs.exists(marker)) true
          else if (q.commitLog.getLatestBatchId().isDefined) false
          else {
            val out = fs.create(marker, true)
            try out.write(RoundRobin.getBytes(StandardCharsets.UTF_8))
            finally out.close()
            true
          }
        decided(q.id.toString) = (q.runId, placed)
        placed
      }
    }
  }
}

/** [[GroupPlacement.keyOf]] of an int group number, planned by [[ArrivalOrderStrategy]] below the
  * shuffle of an arrival-order operator. */
case class GroupKey(child: Expression) extends UnaryExpression {
  override def dataType: DataType = IntegerType
  override protected def nullSafeEval(input: Any): Any = GroupPlacement.keyOf(input.asInstanceOf[Int])
  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode =
    defineCodeGen(ctx, ev, c => s"org.apache.spark.sql.kstreams.GroupPlacement.keyOf($c)")
  override protected def withNewChildInternal(newChild: Expression): GroupKey = copy(child = newChild)
}
