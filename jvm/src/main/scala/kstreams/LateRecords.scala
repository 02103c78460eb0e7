package kstreams

/** What an operator does with a late record (the manual, "Late records").
  *
  *  - [[LateRecords.Forward]]: pass it on. The dedup operators' default (spec section 2: a record
  *    older than `streamTime - interval` is forwarded when no live duplicate exists, and never
  *    stored).
  *  - [[LateRecords.Drop]]: drop it and count it under `late_dropped` in the operator's metrics.
  *    The windowed operators' default (spec section 3: a record of a closed window).
  *  - [[LateRecords.SideOutput]]: route it, unchanged, to the result's [[KStream.sideOutput]]
  *    with a [[LateRecords.ReasonColumn]], counted under `late_side_output`.
  *
  * A late record that is a duplicate of a live entry stays a duplicate under every policy.
  *
  * {{{
  * val deduped = KStream(df).deduplicateByKey("10 minutes", LateRecords.SideOutput)
  * deduped.df          // the forwarded records
  * deduped.sideOutput  // the late ones, with kstreams_reason = "late"
  * }}}
  */
sealed abstract class LateRecords(val name: String)

object LateRecords {
  case object Forward extends LateRecords("forward")
  case object Drop extends LateRecords("drop")
  case object SideOutput extends LateRecords("side_output")

  /** The column the side output adds to the input's: why each record is there. */
  val ReasonColumn = "kstreams_reason"

  /** `"forward"`, `"drop"` or `"side_output"` (Python's `late_records=`, the CLI's `--late-records`). */
  def parse(name: String): LateRecords =
    Seq(Forward, Drop, SideOutput)
      .find(_.name == name)
      .getOrElse(throw new KStreamsException(s"late_records must be 'forward', 'drop' or 'side_output', got '$name'"))
}
