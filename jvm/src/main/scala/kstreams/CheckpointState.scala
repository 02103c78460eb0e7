package kstreams

import org.apache.spark.sql.{DataFrame, SparkSession}

import kstreams.internal.inspect.OperatorState
import kstreams.internal.operate.Repartition
import kstreams.internal.plan.CheckpointOperators

/** What a kstreams query's checkpoint holds, read without running the query: which operators it
  * recorded (spec section 8: a restart must run the same ones), and the state of a dedup, windowed
  * distinct or table operator, for the day someone asks why a record was dropped; and moving a
  * stopped query's state to another number of state partitions, for the day the job outgrows them.
  *
  * {{{
  * CheckpointState.operators(spark, "/chk/dedup")
  * // Seq("deduplicate_by_key(partition=partition, interval=PT10S, key=key)")
  * CheckpointState.read(spark, "/chk/dedup", operator = 1).where("key = 'a'").show()
  * // partition | key | timestamp | offset | live_until | stream_time
  * CheckpointState.repartition(spark, "/chk/dedup", partitions = 8, fileSinks = Seq("/out/dedup")) // 2: it had 2
  * }}}
  */
object CheckpointState {

  /** The kstreams operators `checkpoint` records, in plan order (operator 1 first), as the
    * descriptors its restart check compares. Empty if it records none. */
  def operators(spark: SparkSession, checkpoint: String): Seq[String] = {
    spark.sparkContext // the checkpoint is read with the session's Hadoop configuration
    CheckpointOperators.recorded(checkpoint).map(_._1)
  }

  /** The state of operator number `operator` (from 1) of `checkpoint`, as of its last committed
    * micro-batch, one row per entry that decides the next records:
    *  - `deduplicate_by_key`, `deduplicate_by_key_value` (spec section 2): per (input partition,
    *    dedup key) `partition`, the key columns (`key`, and `id` for `deduplicate_by_key_value`),
    *    `timestamp` and `offset` of the entry, `live_until` (`timestamp` + interval: the largest
    *    stream time at which it still lives) and the partition's `stream_time`. A record with that
    *    key in that partition whose timestamp is within the interval of `timestamp` is dropped as a
    *    duplicate while the entry lives; any other is forwarded.
    *  - `deduplicate` (spec section 2, one store over all partitions): per live id its `group` (of
    *    the store's id groups), `id`, the entry's `timestamp`, `partition` and `offset`,
    *    `live_until` and `live_for_partitions`, the partitions whose stream time is at most
    *    `live_until`: a record with that id from one of them and a timestamp within the interval of
    *    `timestamp` is dropped as a duplicate; any other is forwarded.
    *  - `windowed_distinct`, `session_distinct` (spec section 3): per open window `partition`, the
    *    key columns, `window_start`, `window_end`, `open_until` (the largest stream time at which
    *    the window still takes records) and `stream_time`. A record of that key and window is
    *    dropped as a duplicate while it is open.
    *  - `to_table` (spec section 6): per key its current `value` and `timestamp`; an update with an
    *    equal value and a timestamp not older is dropped as idempotent (KIP-557).
    *
    * A checkpoint not restarted since an earlier release wrote it shows `key_bytes` or
    * `value_bytes` (the encoded values) instead, until its next run records their types.
    * Throws [[KStreamsException]] for a path that is not a kstreams checkpoint, an operator
    * number it does not record, another kind of operator, or one with no committed state yet.
    */
  def read(spark: SparkSession, checkpoint: String, operator: Int = 1): DataFrame =
    OperatorState.read(spark, checkpoint, operator)

  /** Moves the state of the stopped query of `checkpoint` to `partitions` state partitions, with
    * Spark's offline state repartitioner; the query's next run uses them, whatever its session's
    * `spark.sql.shuffle.partitions` says, and its results are those of the query that never
    * stopped (each operator's groups keep their entries, stream times and timers). Returns the
    * number of state partitions the checkpoint had.
    *
    * Throws [[KStreamsException]], before anything is written, for a path that is not a kstreams
    * checkpoint, a query running on it in this driver, a micro-batch planned but not committed (a
    * query running elsewhere, or stopped by a failure: run it until it commits, stop it, then move),
    * no committed micro-batch, the count it already has, or state not kept in RocksDB.
    *
    * A query that writes to a file sink (Parquet, JSON...): name its output path in `fileSinks`.
    * The move adds a micro-batch to the checkpoint, and a file sink's log must get an (empty) entry
    * for it, or the output cannot be read nor the log compacted.
    *
    * @param partitions the new number of state partitions, at least 1
    * @param fileSinks  the output paths of the query's file sinks
    */
  def repartition(spark: SparkSession, checkpoint: String, partitions: Int, fileSinks: Seq[String] = Nil): Int =
    Repartition(spark, checkpoint, partitions, fileSinks)
}
