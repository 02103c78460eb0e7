package kstreams
package internal
package inspect

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.functions._
import org.apache.spark.sql.kstreams.RowBytes
import org.apache.spark.sql.types.StructType

/** The current rows of a table (`to_table`, spec section 6): per key the value a later update is
  * compared with (an equal one with a timestamp not older is dropped as idempotent, KIP-557) and
  * its timestamp. A deleted key has no row. The value is stored serialized; it is shown with the
  * type recorded beside the operator (`value_bytes` for a checkpoint not run since an older
  * release wrote it).
  */
private[inspect] object TableState {

  def read(state: StateVariables, settings: Settings, valueTypes: Option[StructType]): DataFrame = {
    val rows = state("current")
    val keyField = rows.schema("key").dataType.asInstanceOf[StructType].fieldNames.head
    val keyName = settings("key")
    val value = valueTypes match {
      case Some(schema) =>
        RowBytes.decodeNotNull(col("value.bytes"), schema).getField(schema.fieldNames.head).as("value")
      case None => col("value.bytes").as("value_bytes")
    }
    rows
      .select(col("key").getField(keyField).as(keyName), value, timestamp_micros(col("value.ts")).as("timestamp"))
      .orderBy(keyName)
  }
}
