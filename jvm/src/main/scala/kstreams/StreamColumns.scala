package kstreams

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.types._

import kstreams.internal.plan._

/** Which columns of a DataFrame play the parts of a Kafka record.
  *
  * Defaults are the names of Spark's Kafka source. `partition` and `offset` are optional: when the
  * default name is absent the input is one partition and order inside a micro-batch is timestamp
  * order (spec section 1); a name the caller gave explicitly must exist.
  *
  * {{{
  * StreamColumns(key = "user", timestamp = "event_time", partition = Some("p"), offset = None)
  * }}}
  */
final case class StreamColumns(
    key: String = StreamColumns.DefaultKey,
    value: String = StreamColumns.DefaultValue,
    timestamp: String = StreamColumns.DefaultTimestamp,
    partition: Option[String] = Some(StreamColumns.DefaultPartition),
    offset: Option[String] = Some(StreamColumns.DefaultOffset),
    onNullTimestamp: NullTimestamps = NullTimestamps.Fail) {

  /** The columns as they resolve on `df`: optional defaults that are absent become `None`.
    * An operator that needs no timestamp (sequence dedup) passes `timestampRequired = false`; then
    * an absent default timestamp column is `None` too. */
  private[kstreams] def resolve(df: DataFrame, timestampRequired: Boolean = true): ResolvedColumns = {
    val schema = df.schema
    def find(name: String): Option[StructField] = schema.fields.find(_.name == name)
    def optional(name: Option[String], default: String, what: String): Option[StructField] =
      name.flatMap { n =>
        find(n) match {
          case some @ Some(_) => some
          case None if n == default => None
          case None => throw StreamColumns.missing(df, n, what)
        }
      }

    val ts =
      if (timestampRequired) {
        Some(find(timestamp).getOrElse(throw StreamColumns.missing(df, timestamp, "timestamp")))
      } else optional(Some(timestamp), StreamColumns.DefaultTimestamp, "timestamp")
    ts.foreach(_.dataType match {
      case TimestampType =>
      case other =>
        throw new KStreamsException(
          s"timestamp column '$timestamp' has type ${other.simpleString}; it must be a timestamp " +
            s"(cast it, e.g. col('$timestamp').cast('timestamp'))")
    })
    val part = optional(partition, StreamColumns.DefaultPartition, "partition")
    part.foreach { f =>
      if (!Seq(IntegerType, ShortType, ByteType, LongType).contains(f.dataType))
        throw new KStreamsException(
          s"partition column '${f.name}' has type ${f.dataType.simpleString}; it must be an integer")
    }
    val off = optional(offset, StreamColumns.DefaultOffset, "offset")
    off.foreach { f =>
      if (!Seq(LongType, IntegerType, ShortType).contains(f.dataType))
        throw new KStreamsException(s"offset column '${f.name}' has type ${f.dataType.simpleString}; it must be a long")
    }
    if (ts.isEmpty && off.isEmpty)
      throw new KStreamsException(
        "the DataFrame has neither a timestamp nor an offset column, so arrival order is unknown; " +
          s"available columns: ${schema.fieldNames.mkString(", ")}")
    ResolvedColumns(this, ts, part, off, timestampRequired)
  }

  /** The key column, checked to exist and to be usable as a dedup key. */
  private[kstreams] def keyField(df: DataFrame): StructField = {
    val f = df.schema.fields
      .find(_.name == key)
      .getOrElse(throw StreamColumns.missing(df, key, "key"))
    StreamColumns.checkKeyType(s"key column '$key'", f.dataType)
    f
  }
}

object StreamColumns {
  val DefaultKey = "key"
  val DefaultValue = "value"
  val DefaultTimestamp = "timestamp"
  val DefaultPartition = "partition"
  val DefaultOffset = "offset"

  private[kstreams] def missing(df: DataFrame, name: String, what: String) = new KStreamsException(
    s"no $what column '$name' in the DataFrame; available columns: " +
      df.schema.fieldNames.mkString(", "))

  /** Map-typed values have no stable byte form, so they cannot identify a record. */
  private[kstreams] def checkKeyType(what: String, dataType: DataType): Unit =
    if (contains(dataType, t => t.isInstanceOf[MapType] || t.isInstanceOf[VariantType]))
      throw new KStreamsException(
        s"$what has type ${dataType.simpleString}, which cannot be a dedup key; " +
          "use a string, binary, number or struct of those (e.g. to_json(...))")

  private def contains(dataType: DataType, p: DataType => Boolean): Boolean = p(dataType) || (dataType match {
    case s: StructType => s.fields.exists(f => contains(f.dataType, p))
    case a: ArrayType => contains(a.elementType, p)
    case m: MapType => contains(m.keyType, p) || contains(m.valueType, p)
    case _ => false
  })
}
