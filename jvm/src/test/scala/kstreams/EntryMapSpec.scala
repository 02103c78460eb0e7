package kstreams

import java.nio.charset.StandardCharsets.UTF_8

import scala.collection.mutable
import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

import kstreams.internal.dedup.EntryMap

/** [[EntryMap]], the per-partition dedup store's in-memory map, against a plain Scala map: random
  * sets, newer-only puts, added-entry bookkeeping and dead-entry drops, through growth past its
  * first capacity (1,024 slots) and rebuilds. */
class EntryMapSpec extends AnyFunSuite {
  private def bytes(k: Int): Array[Byte] = s"k$k".getBytes(UTF_8)

  /** (key -> (ts, offset)) of every entry the map holds. */
  private def contents(m: EntryMap): Map[String, (Long, Long)] =
    m.occupiedSlots.map(s => new String(m.key(s), UTF_8) -> ((m.ts(s), m.offset(s)))).toMap

  test("set, putIfNewer, takeAdded and dropDead agree with a map model over 20,000 random steps") {
    val random = new Random(7)
    val m = new EntryMap
    val model = mutable.HashMap.empty[String, (Long, Long)]
    val added = mutable.HashSet.empty[String] // set with added = true since the last takeAdded
    var liveFrom = 0L
    (1 to 20000).foreach { step =>
      val k = random.nextInt(3000)
      val key = bytes(k)
      val name = s"k$k"
      val ts = liveFrom + random.nextInt(100000)
      random.nextInt(10) match {
        case 0 | 1 | 2 | 3 | 4 => // a record's entry, added
          val slot = m.slotOf(key)
          val at = m.set(slot, key, ts, step.toLong, added = true)
          assert(new String(m.key(at), UTF_8) == name)
          model(name) = (ts, step.toLong); added += name
        case 5 | 6 => // a stored entry read back: the newer one stays (of two as old, the one held)
          val t = if (random.nextBoolean() && model.contains(name)) model(name)._1 else ts
          m.putIfNewer(key, t, -step.toLong)
          if (!model.get(name).exists(_._1 >= t)) { model(name) = (t, -step.toLong); added -= name }
        case 7 =>
          val taken = m.takeAdded().map(s => new String(m.key(s), UTF_8)).toSet
          assert(taken == added.toSet, s"step $step")
          added.clear()
        case 8 =>
          liveFrom += random.nextInt(200)
          m.dropDead(liveFrom)
          model.filterInPlace { case (_, (t, _)) => t >= liveFrom }
          added.filterInPlace(model.contains)
        case _ =>
          val slot = m.slotOf(key)
          assert(m.occupied(slot) == model.contains(name), s"step $step")
          if (m.occupied(slot)) assert((m.ts(slot), m.offset(slot)) == model(name))
      }
      assert(m.size == model.size, s"step $step")
    }
    assert(contents(m) == model.toMap)
    assert(m.size > 1024) // it grew past its first capacity
  }

  test("dropDead keeps the map at its live size and says when to drop next (twice that, at least 65,536)") {
    val m = new EntryMap
    (0 until 5000).foreach(k => m.set(m.slotOf(bytes(k)), bytes(k), k.toLong, k.toLong, added = false))
    m.dropDead(4990)
    assert(contents(m).keySet == (4990 until 5000).map(k => s"k$k").toSet)
    assert(m.compactAt == 1 << 16)
    assert(m.estimatedBytes < 1024 * 25 + 10 * 64) // back to 1,024 slots of 25 bytes and 10 small keys
  }
}
