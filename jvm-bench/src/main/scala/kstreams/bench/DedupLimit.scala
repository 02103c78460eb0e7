package kstreams.bench

/** The benchmark's upper limit: the spec's dedup rule as a single-threaded loop over in-memory
  * arrays, with no Spark, no state store and no serialization. It generates the benchmark's rows
  * with the same formulas as `benchmarks/bench.py` and times the dedup loop only.
  */
object DedupLimit {

  /** Rows per second of the loop, and the number of rows it forwarded. */
  def run(rows: Long, keys: Long, partitions: Int, dupEvery: Int, spreadMs: Long, intervalMs: Long): Array[Double] = {
    val n = rows.toInt
    val keyOf = new Array[Long](n)
    val tsOf = new Array[Long](n)
    val partOf = new Array[Int](n)
    var i = 0
    while (i < n) {
      val keyId = if (dupEvery > 0 && i % dupEvery == dupEvery - 1) i - 1L else i.toLong
      keyOf(i) = Math.floorMod(keyId * 2654435761L, keys)
      tsOf(i) = keyId + (if (spreadMs > 0) Math.floorMod(keyId * 40503L, spreadMs) else 0L)
      partOf(i) = Math.floorMod(keyId, partitions.toLong).toInt
      i += 1
    }
    val started = System.nanoTime()
    val streamTime = Array.fill(partitions)(Long.MinValue)
    val stores = Array.fill(partitions)(new java.util.HashMap[Long, Array[Long]]())
    var forwarded = 0L
    i = 0
    while (i < n) {
      val p = partOf(i); val t = tsOf(i)
      if (t > streamTime(p)) streamTime(p) = t
      val s = streamTime(p)
      val store = stores(p)
      val e = store.get(keyOf(i))
      val live = e != null && e(0) >= s - intervalMs
      if (live && math.abs(e(0) - t) <= intervalMs) {
        if (e(1) == i) forwarded += 1
      } else {
        forwarded += 1
        if (t >= s - intervalMs) store.put(keyOf(i), Array(t, i.toLong))
        else if (e != null) store.remove(keyOf(i))
      }
      // drop dead entries every 65,536 rows, only to keep the maps small (the operator drops whole
      // time buckets once stream time has passed them)
      if (i % 65536 == 0) stores.indices.foreach { q =>
        stores(q).values().removeIf(v => v(0) < streamTime(q) - intervalMs)
      }
      i += 1
    }
    val seconds = (System.nanoTime() - started) / 1e9
    Array(n / seconds, forwarded.toDouble)
  }
}
