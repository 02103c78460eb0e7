package kstreams
package internal
package plan

import org.apache.spark.sql.types._

private[kstreams] final case class ResolvedColumns(
    names: StreamColumns,
    timestamp: Option[StructField],
    partition: Option[StructField],
    offset: Option[StructField])
