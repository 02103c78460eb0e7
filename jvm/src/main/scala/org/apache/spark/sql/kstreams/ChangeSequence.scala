package org.apache.spark.sql.kstreams

import org.apache.spark.sql.Column
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{LeafExpression, Nondeterministic}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.classic.ExpressionUtils
import org.apache.spark.sql.types.{DataType, LongType}

/** Numbers the rows of each task in the order the task produces them: `(task partition << 33) +
  * row index`, increasing within a task. A table's changes are numbered with it right after the
  * processor that made them, so that a table join downstream applies a key's changes in their
  * order (all of a key's changes come from the one task that holds the key).
  *
  * Spark's `monotonically_increasing_id()` gives the same numbers but is refused on streaming
  * plans, where its ids are not unique across micro-batches; uniqueness is not needed here, only
  * the order inside one micro-batch's task. (In Spark's package: `ExpressionUtils`, which makes a
  * Column of a Catalyst expression, is Spark-private.)
  */
case class ChangeSequence() extends LeafExpression with Nondeterministic with CodegenFallback {
  @transient private var next: Long = _
  @transient private var taskBase: Long = _

  override protected def initializeInternal(partitionIndex: Int): Unit = {
    next = 0L
    taskBase = partitionIndex.toLong << 33
  }

  override protected def evalInternal(input: InternalRow): Any = {
    val n = next
    next += 1
    taskBase + n
  }

  override def nullable: Boolean = false
  override def dataType: DataType = LongType
  override def prettyName: String = "kstreams_change_sequence"
}

object ChangeSequence {
  def column(): Column = ExpressionUtils.column(ChangeSequence())
}
