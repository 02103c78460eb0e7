package kstreams

import org.apache.spark.sql.{DataFrame, SparkSession}

import kstreams.internal.inspect.DedupState
import kstreams.internal.plan.CheckpointOperators

/** What a kstreams query's checkpoint holds, read without running the query: which operators it
  * recorded (spec section 8: a restart must run the same ones), and the live state of a
  * per-partition dedup operator (spec section 2), for the day someone asks why a record was
  * dropped.
  *
  * {{{
  * CheckpointState.operators(spark, "/chk/dedup")
  * // Seq("deduplicate_by_key(partition=partition, interval=PT10S, key=key)")
  * CheckpointState.read(spark, "/chk/dedup", operator = 1).where("key = 'a'").show()
  * // partition | key | timestamp | offset | live_until | stream_time
  * }}}
  */
object CheckpointState {

  /** The kstreams operators `checkpoint` records, in plan order (operator 1 first), as the
    * descriptors its restart check compares. Empty if it records none. */
  def operators(spark: SparkSession, checkpoint: String): Seq[String] = {
    spark.sparkContext // the checkpoint is read with the session's Hadoop configuration
    CheckpointOperators.recorded(checkpoint).map(_._1)
  }

  /** The live entries of the `deduplicate_by_key` or `deduplicate_by_key_value` operator number
    * `operator` (from 1) of `checkpoint`, as of its last committed micro-batch: one row per
    * (input partition, dedup key) with `partition`, the key columns (`key`, and `id` for
    * `deduplicate_by_key_value`; a checkpoint not restarted since an earlier release wrote it shows
    * `key_bytes` instead, until its next run), `timestamp` and `offset` of the entry, `live_until`
    * (`timestamp` + interval: the stream time past which the entry is dead) and the partition's
    * `stream_time`. A record with that key in that partition whose timestamp is within the interval
    * of `timestamp` is dropped as a duplicate while the entry lives; any other is forwarded.
    *
    * Throws [[KStreamsException]] for a path that is not a kstreams checkpoint, an operator
    * number it does not record, another kind of operator, or one with no committed state yet.
    */
  def read(spark: SparkSession, checkpoint: String, operator: Int = 1): DataFrame =
    DedupState.read(spark, checkpoint, operator)
}
