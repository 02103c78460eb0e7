package kstreams

import java.nio.charset.StandardCharsets.UTF_8

import scala.collection.mutable

import org.apache.spark.sql.Encoders
import org.apache.spark.sql.streaming._

import kstreams.internal.dedup._

/** One input row: append `id` under the bucket of `ts`, or, for id "evict", drop the buckets
  * that end at or before `ts`. */
final case class ChunkOp(ts: Long, id: String)

/** Drives [[TimeBucketChunks]] (10 µs buckets, at most 3 chunks per bucket) on a real RocksDB
  * state store: one chunk per appended id, a full bucket compacted into one chunk of distinct ids.
  * Emits the chunks of removed buckets ("removed ...") and then every chunk it holds. */
class ChunkDriver extends StatefulProcessor[Int, ChunkOp, String] {
  @transient private var buckets: TimeBucketChunks = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit =
    buckets = new TimeBucketChunks(getHandle, bucketMicros = 10, maxChunksPerBucket = 3)

  override def handleInputRows(key: Int, rows: Iterator[ChunkOp], timerValues: TimerValues): Iterator[String] = {
    val out = mutable.ArrayBuffer.empty[String]
    rows.foreach { op =>
      if (op.id == "evict") buckets.deadBuckets(op.ts).foreach { case (bucket, count) =>
        buckets.remove(bucket, count, Some(bytes => out += s"removed ${new String(bytes, UTF_8)}"))
      }
      else
        buckets.append(buckets.bucketOf(op.ts), Seq(op.id.getBytes(UTF_8))) { all =>
          Seq(all.flatMap(c => new String(c, UTF_8).split(",")).distinct.sorted.mkString(",").getBytes(UTF_8))
        }
    }
    (out ++ buckets.all().map(c => new String(c, UTF_8)).toSeq.sorted).iterator
  }
}

class TimeBucketChunksSpec extends SparkSuite {
  import spark.implicits._

  test("appends a chunk per micro-batch, compacts a full bucket, removes dead buckets; across a restart") {
    val rows = streamRows(
      Seq(
        Seq(ChunkOp(1, "a"), ChunkOp(2, "b"), ChunkOp(15, "c")),
        Seq(ChunkOp(3, "a"), ChunkOp(4, "d")), // bucket 0: "a", "b", "a", then "d" does not fit
        Seq(ChunkOp(10, "evict"))
      ), // bucket 0 ends at 10
      Encoders.product[ChunkOp],
      df =>
        df.as[ChunkOp]
          .groupByKey(_ => 0)
          .transformWithState(new ChunkDriver, TimeMode.None(), OutputMode.Append())
          .toDF("out"),
      restartBefore = Set(1, 2)
    )
    assert(
      rows.map(_.getString(0)) == Seq(
        "a",
        "b",
        "c", // after micro-batch 0
        "a,b,d",
        "c", // after 1: bucket 0 compacted into one chunk
        "removed a,b,d",
        "c"
      )
    ) // after 2
  }
}
