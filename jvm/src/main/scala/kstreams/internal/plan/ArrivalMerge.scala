package kstreams
package internal
package plan

import scala.collection.mutable

import org.apache.spark.sql.Row

/** Rows of several inputs ("sides" of a per-key operator, sources of a processor DAG) in the order
  * one Kafka Streams task takes them (spec section 1): each input's rows in their own order, the
  * inputs merged by the timestamp of their next row, ties to the earlier input, as a task picks the
  * partition whose head record is oldest. The Python processor runtime ports this rule
  * (`_processor_runtime.arrival_order`). */
private[kstreams] object ArrivalMerge {

  /** `queues` (each already in its own order) merged by `timestampMicros` of their heads
    * (Long.MinValue for none), ties to the earlier queue. */
  def merge(queues: Seq[Seq[Row]], timestampMicros: Row => Long): Seq[Row] =
    if (queues.size == 1) queues.head
    else {
      val heads = Array.fill(queues.size)(0)
      val out = mutable.ArrayBuffer.empty[Row]
      while (heads.indices.exists(i => heads(i) < queues(i).size)) {
        val next = heads.indices
          .filter(i => heads(i) < queues(i).size)
          .minBy(i => (timestampMicros(queues(i)(heads(i))), i))
        out += queues(next)(heads(next))
        heads(next) += 1
      }
      out.toSeq
    }
}
