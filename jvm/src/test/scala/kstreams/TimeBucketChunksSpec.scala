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
  * Emits the chunks of removed buckets ("removed ...") and then every chunk it holds, and whether
  * it holds any. `countsInChunks`: the chunk counts kept as a value of the chunk map (layout 2 of
  * the per-partition dedup); `batched`: a call's changes of them written once, at its end. */
class ChunkDriver(countsInChunks: Boolean, batched: Boolean) extends StatefulProcessor[Int, ChunkOp, String] {
  @transient private var buckets: TimeBucketChunks = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit =
    buckets =
      new TimeBucketChunks(getHandle, bucketMicros = 10, maxChunksPerBucket = 3, countsInChunks = countsInChunks)

  override def handleInputRows(key: Int, rows: Iterator[ChunkOp], timerValues: TimerValues): Iterator[String] = {
    val out = mutable.ArrayBuffer.empty[String]
    def apply(): Unit = rows.foreach { op =>
      if (op.id == "evict")
        buckets.removeAll(buckets.deadBuckets(op.ts), Some(bytes => out += s"removed ${new String(bytes, UTF_8)}"))
      else
        buckets.append(buckets.bucketOf(op.ts), Seq(op.id.getBytes(UTF_8))) { all =>
          Seq(all.flatMap(c => new String(c, UTF_8).split(",")).distinct.sorted.mkString(",").getBytes(UTF_8))
        }
    }
    if (batched) buckets.batched(apply()) else apply()
    (out ++ buckets.all().map(c => new String(c, UTF_8)).toSeq.sorted :+ s"nonEmpty ${buckets.nonEmpty}").iterator
  }
}

class TimeBucketChunksSpec extends SparkSuite {
  import spark.implicits._

  for ((countsInChunks, batched) <- Seq((false, false), (true, false), (true, true)))
    test(
      "appends a chunk per micro-batch, compacts a full bucket, removes dead buckets; across a restart" +
        (if (countsInChunks) " (counts in the chunk map" + (if (batched) ", batched)" else ")") else "")) {
      val rows = streamRows(
        Seq(
          Seq(ChunkOp(1, "a"), ChunkOp(2, "b"), ChunkOp(15, "c")),
          Seq(ChunkOp(3, "a"), ChunkOp(4, "d")), // bucket 0: "a", "b", "a", then "d" does not fit
          Seq(ChunkOp(10, "evict")), // bucket 0 ends at 10
          Seq(ChunkOp(20, "evict")) // and bucket 1 at 20: none left
        ),
        Encoders.product[ChunkOp],
        df =>
          df.as[ChunkOp]
            .groupByKey(_ => 0)
            .transformWithState(new ChunkDriver(countsInChunks, batched), TimeMode.None(), OutputMode.Append())
            .toDF("out"),
        restartBefore = Set(1, 2, 3)
      )
      assert(
        rows.map(_.getString(0)) == Seq(
          "a",
          "b",
          "c",
          "nonEmpty true", // after micro-batch 0
          "a,b,d",
          "c",
          "nonEmpty true", // after 1: bucket 0 compacted into one chunk
          "removed a,b,d",
          "c",
          "nonEmpty true", // after 2
          "removed c",
          "nonEmpty false"
        )
      ) // after 3
    }

  test("encodeChunks: entries in order, a chunk closed before it would pass 256 KiB, a larger entry alone") {
    val KiB = 1024
    // entry i is `sizes(i)` bytes, every byte the entry's number
    val sizes = Seq(100 * KiB, 100 * KiB, 56 * KiB, 1, 300 * KiB, 10, 20)
    val chunks = TimeBucketChunks.encodeChunks(sizes.size)(sizes) { (out, i) =>
      (0 until sizes(i)).foreach(_ => out.put(i.toByte))
    }
    // 100 + 100 + 56 KiB is exactly 256 KiB; the 1-byte entry would pass it; the 300 KiB entry is
    // over it alone; the two small ones after it start a new chunk
    assert(chunks.map(_.length) == Seq(256 * KiB, 1, 300 * KiB, 30))
    assert(chunks.flatten == sizes.zipWithIndex.flatMap { case (n, i) => Seq.fill(n)(i.toByte) })
    assert(TimeBucketChunks.encodeChunks(0)(sizes)((_, _) => ()).isEmpty)
  }
}
