package kstreams
package internal
package dedup

import scala.jdk.CollectionConverters._

import org.apache.spark.network.util.JavaUtils
import org.apache.spark.sql.SparkSession

/** The in-memory entry maps of the dedup processors ([[PerPartitionDedupProcessor]],
  * [[GlobalDedupProcessor]]), kept between micro-batches in
  * the executor JVM so that a micro-batch does not re-read its partition's live entries from the
  * state store.
  *
  * A map is only a copy: the state store stays the truth. Each map is filed under a token that the
  * processor also wrote into the group's state at the end of the micro-batch that left the map as
  * it is; a later micro-batch uses the map only if the token it reads from the state version it
  * was given is the same. That state version holds the token only if the micro-batch that wrote it
  * committed, so a map that survives a failed or re-run micro-batch, a restart from an older
  * checkpoint, or a move of the state partition to another executor is never used; the processor
  * then rebuilds it from the store.
  *
  * A map is checked out (removed) while a task uses it, so two attempts of the same task never
  * share one. Maps of idle groups, and of queries that stopped, are kept while their total
  * estimated size fits the budget; past it the least recently filed are dropped, and a group
  * whose map was dropped for room spills to RocksDB when it next runs ([[pushedOut]]).
  * [[clear]] drops them all.
  */
private[kstreams] object DedupCaches {

  /** Session setting: memory for dedup entries per executor JVM, e.g. `512m`; default a quarter
    * of the JVM's maximum heap. A partition whose live entries need more keeps them in RocksDB
    * only and looks records up one by one (the manual, "The dedup store"). */
  val MemoryConf = "spark.kstreams.dedup.memory"

  /** Bytes for [[MemoryConf]] set on `session`, or 0 for the default (resolved on the executor). */
  def memorySetting(session: SparkSession): Long =
    session.conf
      .getOption(MemoryConf)
      .map { text =>
        val bytes =
          try JavaUtils.byteStringAsBytes(text.trim)
          catch {
            case _: NumberFormatException =>
              throw new KStreamsException(s"cannot read $MemoryConf='$text': give a size such as 512m or 2g")
          }
        if (bytes <= 0) throw new KStreamsException(s"$MemoryConf must be positive, got '$text'")
        bytes
      }
      .getOrElse(0L)

  /** The budget in bytes: the setting, or a quarter of this JVM's maximum heap. */
  def budgetBytes(setting: Long): Long =
    if (setting > 0) setting else Runtime.getRuntime.maxMemory() / 4

  /** A map that can be kept: its heap bytes, estimated. */
  trait KeptMap {
    def estimatedBytes: Long
  }

  private final case class Filed(token: Long, map: KeptMap, bytes: Long, filedNanos: Long)

  // A filed map is not changed until it is checked out again, so its size is taken once, at
  // filing; `totalBytes` is the sum over `filed`, both changed only under this object's lock.
  private val filed = new java.util.HashMap[String, Filed]()
  private var totalBytes = 0L
  // groups whose map was dropped to make room for others (not those dropped by [[drop]] or
  // [[clear]]): their processor spills instead of rebuilding a map that would not stay
  private val pushedOutIds = new java.util.HashSet[String]()

  private def remove(id: String): Option[Filed] = synchronized {
    val f = Option(filed.remove(id))
    f.foreach(totalBytes -= _.bytes)
    f
  }

  /** The map filed for `id` if it was filed under `token`; removed from the registry either way. */
  def checkOut(id: String, token: Long): Option[KeptMap] =
    remove(id).filter(_.token == token).map(_.map)

  /** Files `map` for `id` under `token`, then drops the least recently filed maps while the total
    * is over `budget` (never the one just filed: its group fit the budget on its own). */
  def checkIn(id: String, token: Long, map: KeptMap, budget: Long): Unit = synchronized {
    remove(id)
    val bytes = map.estimatedBytes
    filed.put(id, Filed(token, map, bytes, System.nanoTime()))
    totalBytes += bytes
    pushedOutIds.remove(id)
    if (totalBytes > budget) {
      val oldest = filed.asScala.toVector.filter(_._1 != id).sortBy(_._2.filedNanos).iterator
      while (totalBytes > budget && oldest.hasNext) {
        val other = oldest.next()._1
        remove(other)
        // ids of stopped queries are never asked about: keep the set small (forgetting one only
        // costs that group one more rebuild of its map)
        if (pushedOutIds.size >= 100000) pushedOutIds.clear()
        pushedOutIds.add(other)
      }
    }
  }

  /** Whether `id`'s map was dropped to make room for others since it was last filed (asked once:
    * the answer is forgotten). */
  def pushedOut(id: String): Boolean = synchronized(pushedOutIds.remove(id))

  /** Forgets the map of `id` (its group's state changed without it). */
  def drop(id: String): Unit = remove(id)

  /** Forgets every map kept in this JVM and returns the bytes they held. Maps stay after their
    * query stops (until later queries need the budget); this frees them at once. Results never
    * depend on it: a group without its map rebuilds it from the store. */
  def clear(): Long = synchronized {
    val freed = totalBytes
    filed.clear()
    pushedOutIds.clear()
    totalBytes = 0
    freed
  }
}
