package kstreams
package internal
package dedup

import java.nio.ByteBuffer

import scala.jdk.CollectionConverters._

/** One id as the store sees it: its entry now (`present`, timestamp, position), its entry as
  * last written to the log (`storedPresent`, `storedMicros`), and whether this micro-batch
  * changed it. */
private[kstreams] final class Slot(val key: Array[Byte]) {
  var present = false
  var timestampMicros = 0L
  var partition = 0
  var offset = 0L
  var changed = false
  var storedPresent = false
  var storedMicros = 0L
  var seq = 0L // only while the map is rebuilt from the log
  var held = false // in an IdMap (a key the map does not hold gets a detached slot first)

  def load(ts: Long, p: Int, o: Long): Unit = {
    present = true; timestampMicros = ts; partition = p; offset = o
    storedPresent = true; storedMicros = ts
  }

  /** The change is in the store now. */
  def committed(): Unit = { changed = false; storedPresent = present; storedMicros = timestampMicros }
}

/** Id bytes -> [[Slot]], with its estimated heap bytes. */
private[kstreams] final class IdMap extends DedupCaches.KeptMap {
  import IdMap.SlotBytes

  private val slots = new java.util.HashMap[ByteBuffer, Slot]()
  private var bytes = 0L

  def estimatedBytes: Long = bytes
  def size: Int = slots.size
  def get(key: Array[Byte]): Slot = slots.get(ByteBuffer.wrap(key))
  def iterator: Iterator[Slot] = slots.values().iterator().asScala

  def add(slot: Slot): Unit =
    if (slots.put(ByteBuffer.wrap(slot.key), slot) == null) {
      bytes += slot.key.length + SlotBytes; slot.held = true
    }

  def remove(key: Array[Byte]): Unit = {
    val slot = slots.remove(ByteBuffer.wrap(key))
    if (slot != null) { bytes -= key.length + SlotBytes; slot.held = false }
  }
}

private[kstreams] object IdMap {

  /** Heap bytes per id besides the key's bytes: the map's node and table slot (about 40), the key's
    * `ByteBuffer` (56), the [[Slot]] (56) and the key array's header (16). */
  val SlotBytes = 170
}
