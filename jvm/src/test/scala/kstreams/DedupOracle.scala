package kstreams

import scala.collection.mutable
import scala.util.Random

/** SEMANTICS.md section 2 as a model written from the spec, not from the processors, and random
  * at-least-once input to run it and an operator on (DedupStoreSpec, RealTimeSpec). */
object DedupOracle {

  /** Random at-least-once input: 3 partitions, `keys` keys, timestamps moving forward with
    * out-of-order and late records, adjacent duplicates, and a re-delivered run of partition 1. */
  def randomBatches(seed: Int, keys: Int, perPartition: Int, batches: Int): Seq[Seq[Event]] = {
    val rng = new Random(seed)
    val all = (0 until 3).flatMap { p =>
      var t = 1000.0
      (0 until perPartition).flatMap { i =>
        t += 0.2
        val jitter = if (rng.nextInt(10) == 0) -rng.nextInt(60).toDouble else 0.0 // some late
        val e = Event.at(s"k${rng.nextInt(keys)}", t + jitter, partition = p, offset = i.toLong, value = s"p$p-o$i")
        if (rng.nextInt(5) == 0) Seq(e, e.copy(offset = i + 100000L, value = s"p$p-o$i-dup")) else Seq(e)
      }
    }
    val inBatches = all
      .groupBy(e => (e.offset % 100000L) * batches / perPartition)
      .toSeq
      .sortBy(_._1)
      .map(_._2.sortBy(e => (e.partition, e.offset)))
    // partition 1 re-delivers its first 50 records (same offsets) in the second half
    val replay = inBatches.head
      .filter(e => e.partition == 1 && e.offset < 50)
      .map(e => e.copy(value = e.value + "-again"))
    inBatches.updated(batches / 2, inBatches(batches / 2) ++ replay)
  }

  /** SEMANTICS.md section 2, records in arrival order (micro-batch, then partition, then offset).
    * `global`: one entry per dedup key over all partitions (`deduplicate`); otherwise one per
    * partition and key. */
  def forwarded(
      batches: Seq[Seq[Event]],
      dedupKey: Event => Option[Any],
      intervalSeconds: Double,
      global: Boolean = false): Seq[String] = {
    val intervalMs = (intervalSeconds * 1000).toLong
    val streamTime = mutable.Map.empty[Int, Long]
    val store = mutable.Map.empty[Any, (Long, Int, Long)] // entry: timestamp, partition, offset
    val out = mutable.ArrayBuffer.empty[String]
    for (batch <- batches; r <- batch.sortBy(e => (e.partition, e.offset))) {
      val t = r.timestamp.getTime
      val s = math.max(streamTime.getOrElse(r.partition, Long.MinValue), t)
      streamTime(r.partition) = s
      dedupKey(r) match {
        case None => out += r.value
        case Some(k) =>
          val storeKey = if (global) k else (r.partition, k)
          // rule 2: an entry older than S - interval is purged
          if (store.get(storeKey).exists(_._1 < s - intervalMs)) store.remove(storeKey)
          store.get(storeKey) match {
            case Some((ts, p, offset)) if math.abs(ts - t) <= intervalMs =>
              if (p == r.partition && offset == r.offset) out += r.value // re-delivered
            case _ =>
              out += r.value
              if (t >= s - intervalMs) store(storeKey) = (t, r.partition, r.offset)
          }
      }
    }
    out.toSeq
  }
}
