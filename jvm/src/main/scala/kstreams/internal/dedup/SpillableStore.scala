package kstreams
package internal
package dedup

import scala.reflect.ClassTag

/** The keep/spill/check-out protocol both dedup stores follow ([[PerPartitionDedupProcessor]],
  * [[GlobalDedupProcessor]]) for one group from the moment its store opens in a task until it
  * closes (the end of a micro-batch, or a real-time batch's end marker): where the group's entries
  * are, and when they move. The stores differ in what an entry is and how it is written; the
  * protocol exists here once.
  *
  *  - *In memory* (the usual case): the entries are in a map of type `M`. At open the map is
  *    checked out of [[DedupCaches]] if it was filed under the token stored with the state version
  *    this task was given (so it is exactly that committed state); otherwise it is rebuilt from the
  *    store ([[rebuildWithin]]). At close this batch's changes are appended to the store
  *    ([[writeInMemory]]), a new token is stored ([[markInMemory]]) and the map is filed under it.
  *  - *Spilled*: the entries are RocksDB rows, looked up one by one; the map holds only what this
  *    batch touched and is written out ([[flushSpilled]]) whenever it reaches the budget and at
  *    close. A group leaves this mode when its store has emptied ([[storeEmptied]]).
  *
  * When the group moves from memory to RocksDB: at open, if its map was pushed out of
  * [[DedupCaches]] to make room for other groups (groups whose maps do not fit together would
  * otherwise take turns rebuilding theirs every batch), or if its rebuilt map needs more than half
  * the budget ([[spillFromStore]]); while deciding, when the map outgrows the budget and, after
  * [[shrink]], still needs more than half of it ([[moveToEntries]]). A spilled map is flushed at the
  * budget, but never holding fewer than [[SpillableStore.MinFlushEntries]] entries.
  *
  * Why a kept map is safe to use: see [[DedupCaches]] (the token is in the state only if the batch
  * that filed the map committed).
  */
private[dedup] abstract class SpillableStore[M <: DedupCaches.KeptMap: ClassTag](
    cacheId: Option[String],
    budgetBytes: Long,
    storedToken: Long,
    storedSpilled: Boolean) {

  protected var spilled: Boolean = storedSpilled
  protected var map: M = _

  /** An empty map. */
  protected def emptyMap(): M

  /** Number of entries in `map`. */
  protected def mapSize: Int

  /** The map as the store holds it, or None if it needs more than `limitBytes` (then nothing is
    * changed yet). */
  protected def rebuildWithin(limitBytes: Long): Option[M]

  /** Writes every entry the store holds as RocksDB rows (the group spills at open). */
  protected def spillFromStore(): Unit

  /** Writes the entries of earlier batches the map holds as RocksDB rows (this batch's are
    * written by the [[flushSpilled]] that follows at once); a layout that only serves the
    * in-memory mode is dropped. */
  protected def moveToEntries(): Unit

  /** Writes what the map holds of this batch as RocksDB rows and starts an empty map. */
  protected def flushSpilled(liveFrom: Long): Unit

  /** Appends this batch's changes to the in-memory layout (what a lost map is rebuilt from). */
  protected def writeInMemory(liveFrom: Long): Unit

  /** Frees what the map holds that is dead below `liveFrom`, if the store can tell. */
  protected def shrink(liveFrom: Long): Unit = ()

  /** Whether the spilled store holds nothing any more (the group may return to memory). */
  protected def storeEmptied: Boolean

  /** Whether the in-memory layout holds nothing (a group pushed out of [[DedupCaches]] then
    * starts an empty map instead of spilling: there is nothing to rebuild). */
  protected def layoutEmpty: Boolean

  /** Deletes the RocksDB rows of an emptied spilled store. */
  protected def clearEntries(): Unit

  /** Stores that the group is spilled. */
  protected def markSpilled(): Unit

  /** Stores that the group is in memory, its map filed under `token`. */
  protected def markInMemory(token: Long): Unit

  /** Finds the group's entries: a spilled store that emptied returns to memory; a group in memory
    * checks its kept map out or rebuilds it, or spills. A subclass calls it once, when its own
    * fields are set (it reads them through the hooks). */
  protected final def openEntries(): Unit = {
    if (spilled && storeEmptied) { clearEntries(); spilled = false }
    map =
      if (spilled) emptyMap()
      else
        cacheId
          .flatMap(id => if (storedToken == 0L) None else DedupCaches.checkOut(id, storedToken))
          .collect { case kept: M => kept }
          .orElse {
            val pushedOut = cacheId.exists(DedupCaches.pushedOut) // asked once: the answer is forgotten
            if (pushedOut && !layoutEmpty) None else rebuildWithin(budgetBytes / 2)
          }
          .getOrElse {
            spillFromStore()
            spilled = true
            emptyMap()
          }
  }

  /** Call before deciding each record: keeps the map within the budget. */
  protected final def withinBudget(liveFrom: Long): Unit =
    if (map.estimatedBytes > budgetBytes && (!spilled || mapSize >= SpillableStore.MinFlushEntries)) {
      if (!spilled) {
        shrink(liveFrom)
        if (map.estimatedBytes > budgetBytes / 2) {
          moveToEntries()
          spilled = true
        }
      }
      if (spilled) flushSpilled(liveFrom)
    }

  /** Writes what this batch changed; files the map for the next batch if the group is in memory.
    * `liveFrom`: entries older are dead (a store of one partition's stream time drops them; the
    * global store judges each record by its own partition's and passes `Long.MinValue`). */
  final def close(liveFrom: Long): Unit =
    if (spilled) {
      flushSpilled(liveFrom)
      markSpilled()
      cacheId.foreach(DedupCaches.drop)
    } else {
      writeInMemory(liveFrom)
      val token = SpillableStore.newToken()
      markInMemory(token)
      cacheId.foreach(DedupCaches.checkIn(_, token, map, budgetBytes))
    }
}

private[dedup] object SpillableStore {

  /** A spilled group's map is flushed at the budget, but never holding fewer entries than this
    * (an empty map's arrays alone take about 25 KB). */
  val MinFlushEntries = 256

  /** A random token, never 0 (the token of no map). */
  def newToken(): Long = {
    val t = java.util.concurrent.ThreadLocalRandom.current().nextLong()
    if (t == 0L) 1L else t
  }
}
