package kstreams
package internal
package plan

/** Names of the columns kstreams adds to a plan, in one place. All start with `__kstreams_`, so they
  * never clash with a user's column, and none of them reaches an operator's result. */
private[kstreams] object HelperColumns {

  /** The `transformWithState` group of an arrival-order operator: the input partition (a Kafka
    * Streams task), -1 for a null partition (which then fails with its offset). */
  val Group = "__kstreams_group"

  /** The key of a per-key operator (its `transformWithState` group). */
  val Key = "__kstreams_key"

  /** Which input of a per-key operator a row comes from (0: the left of a join). */
  val Side = "__kstreams_side"

  /** The value of side `side` of a per-key operator (null on the other sides' rows). */
  def value(side: Int): String = s"__kstreams_value$side"

  /** The input partition as an int (0 without a partition column). */
  val Partition = "__kstreams_partition"

  /** A row's place in its partition: the offset, or the timestamp without an offset column. */
  val Order = "__kstreams_order"

  /** The record's timestamp in microseconds (spec section 1). */
  val TimestampMicros = "__kstreams_ts"

  /** The input partition again, as the column a per-task shuffle groups on ([[TaskClocks]]): its
    * value may be replaced by a placement key there, [[Partition]]'s never is. */
  val Task = "__kstreams_task"

  /** A record's place in its task's arrival order within one micro-batch ([[TaskClocks]]). */
  val TaskSeq = "__kstreams_task_seq"

  /** Its input partition's stream time within the micro-batch so far, this record included
    * ([[TaskClocks]]). */
  val BatchStreamTime = "__kstreams_batch_stream_time"

  /** True on a [[TaskClocks]] marker row: a partition's largest timestamp of the micro-batch. */
  val Marker = "__kstreams_marker"

  /** Why a processor dropped a row (a [[DropReasons]] name; null: forwarded); see
    * [[Stateful.runAll]]. */
  val Dropped = "__kstreams_dropped"

  /** How many records a compact processor dropped for the row's [[Dropped]] reason. */
  val DroppedCount = "__kstreams_count"

  /** `name` as a column reference, whatever characters it holds. */
  def quote(name: String): String = "`" + name.replace("`", "``") + "`"
}

/** Why a record was not forwarded. Each name is also the field of the operator's observed metric
  * that counts such records (README, "Metrics"). */
private[kstreams] object DropReasons {
  val Duplicate = "duplicates_dropped"
  val Late = "late_dropped"

  /** Not a drop: a late record routed to the operator's side output (`LateRecords.SideOutput`). */
  val LateSideOutput = "late_side_output"
  val NullKey = "null_keys_dropped"
  val NullValue = "null_values_dropped"
  val Idempotent = "idempotent-updates-dropped"

  /** Counted before any operator, under the observed metric `kstreams_null_timestamps`, when the
    * stream skips null timestamps (`NullTimestamps.Skip`). */
  val NullTimestamp = "null_timestamps_skipped"
}
