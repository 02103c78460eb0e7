package kstreams

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import org.apache.spark.network.util.JavaUtils
import org.apache.spark.sql.SparkSession

/** The in-memory entry maps of the per-partition dedup processors, kept between micro-batches in
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
  * share one. Maps of idle groups are kept while their total estimated size fits the budget; past
  * it the least recently used are dropped (their groups re-read the store when they next run).
  */
private[kstreams] object DedupCaches {
  /** Session setting: memory for dedup entries per executor JVM, e.g. `512m`; default a quarter
    * of the JVM's maximum heap. A partition whose live entries need more keeps them in RocksDB
    * only and looks records up one by one (README "The dedup store"). */
  val MemoryConf = "spark.kstreams.dedup.memory"

  /** Bytes for [[MemoryConf]] set on `session`, or 0 for the default (resolved on the executor). */
  def memorySetting(session: SparkSession): Long =
    session.conf.getOption(MemoryConf).map { text =>
      val bytes =
        try JavaUtils.byteStringAsBytes(text.trim)
        catch { case _: NumberFormatException =>
          throw new KStreamsException(s"cannot read $MemoryConf='$text': give a size such as 512m or 2g") }
      if (bytes <= 0) throw new KStreamsException(s"$MemoryConf must be positive, got '$text'")
      bytes
    }.getOrElse(0L)

  /** The budget in bytes: the setting, or a quarter of this JVM's maximum heap. */
  def budgetBytes(setting: Long): Long =
    if (setting > 0) setting else Runtime.getRuntime.maxMemory() / 4

  private final case class Filed(token: Long, map: BucketedDedupProcessor.EntryMap, var lastUsedNanos: Long)

  private val filed = new ConcurrentHashMap[String, Filed]()

  /** The map filed for `id` if it was filed under `token`; removed from the registry either way. */
  def checkOut(id: String, token: Long): Option[BucketedDedupProcessor.EntryMap] =
    Option(filed.remove(id)).filter(_.token == token).map(_.map)

  /** Files `map` for `id` under `token`, then drops the least recently used maps while the total
    * is over `budget` (never the one just filed: its group fit the budget on its own). */
  def checkIn(id: String, token: Long, map: BucketedDedupProcessor.EntryMap, budget: Long): Unit = {
    filed.put(id, Filed(token, map, System.nanoTime()))
    synchronized {
      var total = filed.values().asScala.map(_.map.estimatedBytes).sum
      if (total > budget) {
        val oldest = filed.asScala.toSeq.filter(_._1 != id).sortBy(_._2.lastUsedNanos)
        oldest.iterator.takeWhile(_ => total > budget).foreach { case (other, f) =>
          if (filed.remove(other, f)) total -= f.map.estimatedBytes
        }
      }
    }
  }

  /** Forgets the map of `id` (its group's state changed without it). */
  def drop(id: String): Unit = filed.remove(id)
}
