package kstreams
package internal
package plan

import org.apache.spark.sql.types._

/** The columns of a [[StreamColumns]] as they resolve on one DataFrame (`StreamColumns.resolve`):
  * optional defaults that are absent are None. `timestampRequired` is false for an operator that
  * needs no timestamp (sequence dedup), whose null timestamps then pass. */
private[kstreams] final case class ResolvedColumns(
    names: StreamColumns,
    timestamp: Option[StructField],
    partition: Option[StructField],
    offset: Option[StructField],
    timestampRequired: Boolean)
