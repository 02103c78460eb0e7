package kstreams.bench

import org.apache.spark.sql.{DataFrame, Encoders, KeyValueGroupedDataset}
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.types.StructType

import kstreams._

import kstreams.internal.dedup.{SpreadInput, SpreadRecord}
import kstreams.internal.plan._

/** The benchmark's floor for any `transformWithState` operator: the input prepared exactly as
  * `deduplicateByKey` prepares it (arrival order per partition, compact rows, RocksDB state, event
  * time), through a processor that forwards every record and writes one value per group and
  * micro-batch. What `deduplicateByKey` costs beyond this is its dedup logic; what this costs
  * beyond Spark's own dedup is Spark's per-micro-batch price of `transformWithState` on RocksDB.
  *
  * [[spreadPassThrough]] is the same floor for `deduplicate` (global): the input prepared as that
  * operator prepares it (both shuffles, stream times and markers, 64 id hash groups).
  */
object TwsFloor {
  def passThrough(df: DataFrame): DataFrame = {
    val columns = StreamColumns()
    val resolved = columns.resolve(df)
    val (grouped, userSchema) = CompactInput.prepare(df, resolved, Seq(df.col(columns.key)), Some(10000000L))
    run(grouped, new PassThrough[CompactRecord](_.payload), userSchema)
  }

  /** The floor of `deduplicate(col(idColumn), ...)`: its two shuffles, forwarding every record. */
  def spreadPassThrough(df: DataFrame, idColumn: String): DataFrame = {
    val resolved = StreamColumns().resolve(df)
    val (grouped, userSchema) =
      SpreadInput.prepare(df, resolved, Seq(df.col(idColumn)), SpreadRecord.Groups, Some(10000000L))
    // markers carry a partition's stream time to every group, not a record: never forwarded
    run(grouped, new PassThrough[SpreadRecord](r => if (r.marker) null else r.payload), userSchema)
  }

  private def run[R](
      grouped: KeyValueGroupedDataset[Int, R],
      processor: StatefulProcessor[Int, R, CompactOutput],
      userSchema: StructType): DataFrame =
    CompactInput.unpack(
      Stateful.forwardedOnly(
        Stateful
          .runCountedAll(grouped, processor, OperatorDescriptor("kstreams_tws_floor"), TimeMode.EventTime(), Nil)),
      userSchema)

  /** Forwards each record's `payload(record)` (null: not a record, skipped) and counts them in one
    * value per group and micro-batch. */
  private final class PassThrough[R](payload: R => Array[Byte]) extends StatefulProcessor[Int, R, CompactOutput] {
    @transient private var records: ValueState[Long] = _

    override def init(outputMode: OutputMode, timeMode: TimeMode): Unit =
      records = getHandle.getValueState[Long]("records", Encoders.scalaLong, TTLConfig.NONE)

    override def handleInputRows(group: Int, rows: Iterator[R], timerValues: TimerValues): Iterator[CompactOutput] = {
      var seen = 0L
      rows.map(payload).filter(_ != null).map { bytes => seen += 1; CompactOutput(bytes, null, 1L) } ++ {
        records.update((if (records.exists()) records.get() else 0L) + seen)
        Iterator.empty
      }
    }
  }
}
