package kstreams
package internal
package dedup

import java.util.Arrays

import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.hash.Murmur3_x86_32

/** Dedup key bytes -> (timestamp, offset, added and not yet written), open addressing in flat
  * arrays: the per-record lookup is a hash of the key's bytes and an array probe, no boxing and
  * no allocation. Dead entries stay until [[dropDead]] rebuilds the map (they are ignored by
  * timestamp), which the processor does when the map has doubled since the last rebuild. The
  * slots of added entries are listed as they are set, so that writing them ([[takeAdded]]) needs
  * neither a second lookup per key nor a pass over the whole map. */
private[kstreams] final class EntryMap extends DedupCaches.KeptMap {
  import EntryMap.SlotBytes

  private var capacity = 1024
  private var keys = new Array[Array[Byte]](capacity)
  private var hashes = new Array[Int](capacity)
  private var timestamps = new Array[Long](capacity)
  private var offsets = new Array[Long](capacity)
  private var addedFlags = new Array[Boolean](capacity)
  private var count = 0
  private var keyBytes = 0L
  // slots whose added flag was set since the last takeAdded (each once), rebuilt when slots move
  private var addedSlots = new Array[Int](64)
  private var addedCount = 0
  // no timestamp in the map is smaller (a bound, not the minimum): dropDead skips a map that
  // cannot hold a dead entry, as after a catch-up micro-batch whose every key is new
  private var oldestTs = Long.MaxValue

  /** Size at which the processor drops dead entries next (twice the live size of the last time). */
  var compactAt: Int = 1 << 16

  def size: Int = count
  def key(slot: Int): Array[Byte] = keys(slot)
  def ts(slot: Int): Long = timestamps(slot)
  def offset(slot: Int): Long = offsets(slot)
  def added(slot: Int): Boolean = addedFlags(slot)

  /** The slots that hold an entry. */
  def occupiedSlots: Array[Int] = {
    val out = new Array[Int](count)
    var (slot, n) = (0, 0)
    while (slot < capacity) { if (keys(slot) != null) { out(n) = slot; n += 1 }; slot += 1 }
    out
  }

  /** Heap bytes held: the slot arrays and the keys (an array header of 16 bytes each). */
  def estimatedBytes: Long = capacity.toLong * SlotBytes + keyBytes + count.toLong * 16 + addedSlots.length * 4L

  private var lastHash = 0

  /** The slot of `key`: the one holding it, or the free one where it would go ([[occupied]]
    * tells which). Hashes the key once for the [[set]] that may follow. */
  def slotOf(key: Array[Byte]): Int = { lastHash = hash(key); probe(key, lastHash) }

  def occupied(slot: Int): Boolean = keys(slot) != null

  /** Sets `key`'s entry at `slot`, which [[slotOf]]`(key)` just returned; returns the slot it is
    * in now (another one if the map grew). */
  def set(slot: Int, key: Array[Byte], ts: Long, offset: Long, added: Boolean): Int = {
    var at = slot
    if (keys(at) == null) {
      if ((count + 1) * 2 > capacity) { resize(capacity * 2, keepFrom = Long.MinValue); at = probe(key, lastHash) }
      keys(at) = key; hashes(at) = lastHash; count += 1; keyBytes += key.length
    }
    if (added && !addedFlags(at)) listAdded(at)
    timestamps(at) = ts; offsets(at) = offset; addedFlags(at) = added
    if (ts < oldestTs) oldestTs = ts
    at
  }

  /** Keeps the entry with the larger timestamp (reading stored entries, which may repeat a key). */
  def putIfNewer(key: Array[Byte], ts: Long, offset: Long): Unit = {
    val slot = slotOf(key)
    if (!occupied(slot) || this.ts(slot) < ts) set(slot, key, ts, offset, added = false)
  }

  /** The slots of the entries added since the last call, each once; they count as written now. */
  def takeAdded(): Array[Int] = {
    val out = new Array[Int](addedCount)
    var n = 0
    var i = 0
    while (i < addedCount) {
      val slot = addedSlots(i)
      if (addedFlags(slot)) { addedFlags(slot) = false; out(n) = slot; n += 1 }
      i += 1
    }
    addedCount = 0
    if (addedSlots.length > 1024) addedSlots = new Array[Int](64)
    if (n == out.length) out else java.util.Arrays.copyOf(out, n)
  }

  /** Forgets the entries with `ts < liveFrom`, rebuilding the map sized for the others, unless
    * none can be dead. */
  def dropDead(liveFrom: Long): Unit = {
    if (oldestTs < liveFrom) {
      var newCapacity = 1024
      var live = 0
      var slot = 0
      while (slot < capacity) { if (keys(slot) != null && timestamps(slot) >= liveFrom) live += 1; slot += 1 }
      while (live.toLong * 2 > newCapacity) newCapacity *= 2
      resize(newCapacity, keepFrom = liveFrom)
    }
    compactAt = math.max(1 << 16, count * 2)
  }

  private def listAdded(slot: Int): Unit = {
    if (addedCount == addedSlots.length) addedSlots = java.util.Arrays.copyOf(addedSlots, addedCount * 2)
    addedSlots(addedCount) = slot
    addedCount += 1
  }

  /** Moves the entries with `ts >= keepFrom` into new arrays of `newCapacity` slots. */
  private def resize(newCapacity: Int, keepFrom: Long): Unit = {
    val (oldKeys, oldHashes, oldTs, oldOffsets, oldAdded) = (keys, hashes, timestamps, offsets, addedFlags)
    capacity = newCapacity
    keys = new Array[Array[Byte]](capacity); hashes = new Array[Int](capacity)
    timestamps = new Array[Long](capacity); offsets = new Array[Long](capacity)
    addedFlags = new Array[Boolean](capacity)
    count = 0; keyBytes = 0; addedCount = 0; oldestTs = Long.MaxValue
    var i = 0
    while (i < oldKeys.length) {
      if (oldKeys(i) != null && oldTs(i) >= keepFrom) {
        val slot = probe(oldKeys(i), oldHashes(i))
        keys(slot) = oldKeys(i); hashes(slot) = oldHashes(i); timestamps(slot) = oldTs(i)
        offsets(slot) = oldOffsets(i); addedFlags(slot) = oldAdded(i)
        count += 1; keyBytes += oldKeys(i).length
        if (oldAdded(i)) listAdded(slot)
        if (oldTs(i) < oldestTs) oldestTs = oldTs(i)
      }
      i += 1
    }
  }

  private def hash(key: Array[Byte]): Int =
    Murmur3_x86_32.hashUnsafeBytes(key, Platform.BYTE_ARRAY_OFFSET, key.length, 42)

  private def probe(key: Array[Byte], h: Int): Int = {
    val mask = capacity - 1
    var slot = h & mask
    while (keys(slot) != null && !(hashes(slot) == h && Arrays.equals(keys(slot), key)))
      slot = (slot + 1) & mask
    slot
  }
}

private[kstreams] object EntryMap {

  /** Bytes per slot: a key reference, a hash, a timestamp, an offset, a flag. */
  val SlotBytes: Int = 4 + 4 + 8 + 8 + 1
}
