package kstreams
package internal
package dedup

import kstreams.internal.plan.{CompactOutput, DropReasons}

/** What a dedup processor emits for its records in one call of `handleInputRows`: forwarded
  * records, late ones as the [[LateRecords]] policy says, and at the end one count row per drop
  * reason (never a row per dropped record), all read by [[kstreams.internal.plan.Stateful.runCounted]].
  * A method that drops returns null, which the processor filters out. */
private[kstreams] final class CompactEmitter(policy: LateRecords) {
  private var duplicates = 0L
  private var lateDropped = 0L

  def forward(payload: Array[Byte]): CompactOutput = CompactOutput(payload, null, 1L)

  def duplicate(): CompactOutput = { duplicates += 1; null }

  /** A record the dedup rule forwards; a `late` one (`ts < streamTime - interval`, spec section
    * 2, rule 4) goes where the policy says. */
  def forwardable(payload: Array[Byte], late: Boolean): CompactOutput =
    if (!late) forward(payload)
    else
      policy match {
        case LateRecords.Forward => forward(payload)
        case LateRecords.Drop => lateDropped += 1; null
        case LateRecords.SideOutput => CompactOutput(payload, DropReasons.LateSideOutput, 1L)
      }

  def counts: Iterator[CompactOutput] =
    Iterator(DropReasons.Duplicate -> duplicates, DropReasons.Late -> lateDropped).collect {
      case (reason, n) if n > 0 => CompactOutput(null, reason, n)
    }
}
