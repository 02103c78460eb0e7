package kstreams

/** What to do with a record whose timestamp is null. */
sealed trait NullTimestamps
object NullTimestamps {

  /** Fail the query with an error naming the column, partition and offset (the default). */
  case object Fail extends NullTimestamps

  /** Skip such records and count them in the query's observed metrics. */
  case object Skip extends NullTimestamps

  def parse(text: String): NullTimestamps = text match {
    case null | "fail" => Fail
    case "skip" => Skip
    case other => throw new KStreamsException(s"on_null_timestamp must be 'fail' or 'skip', got '$other'")
  }
}
