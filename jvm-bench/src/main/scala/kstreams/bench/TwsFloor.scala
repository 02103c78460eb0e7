package kstreams.bench

import org.apache.spark.sql.{DataFrame, Encoders}
import org.apache.spark.sql.streaming._

import kstreams._

import kstreams.internal.plan._

/** The benchmark's floor for any `transformWithState` operator: the input prepared exactly as
  * `deduplicateByKey` prepares it (arrival order per partition, compact rows, RocksDB state, event
  * time), through a processor that forwards every record and writes one value per group and
  * micro-batch. What `deduplicateByKey` costs beyond this is its dedup logic; what this costs
  * beyond Spark's own dedup is Spark's per-micro-batch price of `transformWithState` on RocksDB.
  */
object TwsFloor {
  def passThrough(df: DataFrame): DataFrame = {
    val columns = StreamColumns()
    val resolved = columns.resolve(df)
    val (grouped, userSchema) = ArrivalOrder.prepareCompact(df, resolved, Seq(df.col(columns.key)), Some(10000000L))
    ArrivalOrder.unpack(
      Stateful.runCounted(
        grouped,
        new PassThrough,
        OperatorDescriptor("tws_floor"),
        TimeMode.EventTime(),
        "kstreams_tws_floor",
        Nil),
      userSchema)
  }

  private final class PassThrough extends StatefulProcessor[Int, CompactRecord, CompactOutput] {
    @transient private var records: ValueState[Long] = _

    override def init(outputMode: OutputMode, timeMode: TimeMode): Unit =
      records = getHandle.getValueState[Long]("records", Encoders.scalaLong, TTLConfig.NONE)

    override def handleInputRows(
        group: Int,
        rows: Iterator[CompactRecord],
        timerValues: TimerValues): Iterator[CompactOutput] = {
      var seen = 0L
      rows.map { r => seen += 1; CompactOutput(r.payload, null, 1L) } ++ {
        records.update((if (records.exists()) records.get() else 0L) + seen)
        Iterator.empty
      }
    }
  }
}
