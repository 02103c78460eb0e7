package kstreams

import org.apache.spark.sql.{DataFrame, Row}
import org.apache.spark.sql.functions._

import kstreams.Event.at
import kstreams.readme.ReadmeScalaBlocks

/** The manual's Scala examples (README.md and docs/guide/), exactly as written (build.sbt generates [[ReadmeScalaBlocks]] from
  * them), on a DataFrame with every column they name. Each block must run; a block whose last
  * value is a DataFrame must give the rows worked out here by hand from spec sections 2 and 5.
  */
class ReadmeSpec extends SparkSuite {

  // a@1 and its duplicate a@2, b@1, then a@400: past a 10 s dedup interval and a 5-minute session gap
  private def events: DataFrame = {
    val df = batch(Seq(at("a", 1), at("a", 2), at("b", 1), at("a", 400)))
    df.withColumn("event_id", col("value"))
      .withColumn("user", col("key"))
      .withColumn("event_time", col("timestamp"))
      .withColumn("id", col("value"))
      .withColumn("seq", col("offset"))
  }

  private def keysAndSeconds(out: DataFrame): Seq[(String, Long)] =
    out
      .collect()
      .toSeq
      .map { case r: Row =>
        (r.getAs[String]("key"), (r.getAs[java.sql.Timestamp]("timestamp").getTime - Event.Base) / 1000)
      }
      .sorted

  test("the manual's Scala blocks run as written") {
    val blocks = ReadmeScalaBlocks.blocks
    assert(blocks.size == 3, s"the manual has ${blocks.size} Scala blocks, this test knows 3: ${blocks.map(_._1)}")
    val results = blocks.map { case (where, block) => where -> block(events, events, events) }
    def resultOf(page: String): DataFrame = {
      val (where, result) =
        results.find(_._1.startsWith(s"docs/guide/$page line ")).getOrElse(fail(s"no block of $page"))
      assert(result.isInstanceOf[DataFrame], where)
      result.asInstanceOf[DataFrame]
    }
    // the DSL overview (joins.md) ends in a val: it must only run
    // the Scala page ends with session-windowed distinct: a@2 joins a@1's session, a@400 opens one
    assert(keysAndSeconds(resultOf("scala.md")) == Seq(("a", 1L), ("a", 400L), ("b", 1L)))
    // the processor API block's DedupByKey(10 s): a@2 is a duplicate of a@1; a@400 finds it dead
    assert(keysAndSeconds(resultOf("processor-api.md")) == Seq(("a", 1L), ("a", 400L), ("b", 1L)))
  }
}
