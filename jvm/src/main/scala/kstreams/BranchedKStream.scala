package kstreams

import org.apache.spark.sql.Column
import org.apache.spark.sql.functions.{coalesce, lit}

/** `KStream.split()`: branches in order; a record goes to the first whose predicate is true.
  *
  * {{{
  * val branches = KStream(df).split().branch(col("v") > 0, "pos").branch(col("v") < 0, "neg")
  *   .defaultBranch("zero")   // Map("pos" -> ..., "neg" -> ..., "zero" -> ...)
  * }}}
  */
final class BranchedKStream private[kstreams] (stream: KStream, branches: Seq[(String, Column)]) {

  /** Adds a branch named `name` for the records `predicate` is true for (null counts as false). */
  def branch(predicate: Column, name: String): BranchedKStream = {
    if (branches.exists(_._1 == name)) throw new KStreamsException(s"branch name '$name' is used twice")
    new BranchedKStream(stream, branches :+ (name -> coalesce(predicate, lit(false))))
  }

  /** The branches, plus `name` for the records no predicate took. */
  def defaultBranch(name: String): Map[String, KStream] =
    branch(lit(true), name).noDefaultBranch()

  /** The branches; records no predicate took are dropped (as in Kafka Streams). */
  def noDefaultBranch(): Map[String, KStream] = {
    branches.zipWithIndex.map { case ((name, predicate), i) =>
      val earlier = branches.take(i).map(_._2)
      val mine = earlier.foldLeft(predicate)((acc, p) => acc && !p)
      name -> stream.filter(mine)
    }.toMap
  }
}
