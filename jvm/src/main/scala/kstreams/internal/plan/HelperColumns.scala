package kstreams
package internal
package plan

/** Names of the columns kstreams adds to a plan, in one place: those several operators share, then
  * those of one operator. All start with `__kstreams_`, so they never clash with a user's column,
  * and none of them reaches an operator's result. */
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

  // Columns of one operator: read only by its planning and its processor, which name them by a
  // short alias of their own (e.g. `Aggregate.AggInput`); listed here so that every column name
  // kstreams adds is in this one place.

  /** An aggregation's adder inputs, the running aggregate and the record's value (`Aggregate`). */
  val AggregateSoFar = "__kstreams_agg"
  val AggregateValue = "__kstreams_value"

  /** An aggregation's result and its timestamp (micros) (`Aggregate`). */
  val AggregateResult = "__kstreams_result"
  val AggregateResultTs = "__kstreams_result_ts"

  /** A windowed operator's window bounds in micros (`Aggregate`, `WindowedDistinct`). */
  val WindowStart = "__kstreams_window_start"
  val WindowEnd = "__kstreams_window_end"

  /** A windowed distinct's key, as one struct (`WindowedDistinct`). */
  val WindowKey = "__kstreams_window_key"

  /** A late record an aggregation routes to its side output (`Aggregate`'s `LateRows`). */
  val LateRecord = "__kstreams_late_record"

  /** The sequence number `deduplicateBySequence` compares (`DeduplicateBySequence`). */
  val Sequence = "__kstreams_sequence"

  /** A table change's place in the order its task emitted it (`KTable`). */
  val TableChange = "__kstreams_change"

  /** True on a table-join row that deletes its key (`TableJoin`). */
  val Tombstone = "__kstreams_tombstone"

  /** The new key and value of `selectKey`/`map` before they replace the record's (`KStream`). */
  val NewKey = "__kstreams_new_key"
  val NewValue = "__kstreams_new_value"

  /** A processor DAG's forwarded timestamp (micros) and the sink a row goes to (`ProcessorPlan`). */
  val ProcessorTimestampMicros = "__kstreams_forward_ts"
  val ProcessorSink = "__kstreams_sink"

  /** Which source of a processor DAG a row came from (its index), and its place in that source
    * (`ProcessorPlan`). */
  val ProcessorSource = "__kstreams_source"
  val ProcessorSourceOrder = "__kstreams_source_order"

  /** `name` as a column reference, whatever characters it holds. */
  def quote(name: String): String = "`" + name.replace("`", "``") + "`"
}

/** Why a record was not forwarded. Each name is also the field of the operator's observed metric
  * that counts such records (the manual, "Metrics"). */
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
