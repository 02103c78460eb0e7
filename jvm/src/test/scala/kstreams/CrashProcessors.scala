package kstreams

import org.apache.spark.sql.DataFrame

/** The Scala processor that the Python crash harness (tests/crash.py) runs next to the built-in
  * operators, in a child process that is killed and restarted: `deduplicateByKey` written as a
  * user processor (ProcessorSpec.DedupByKey, a 10-second interval).
  *
  * {{{
  * CrashProcessors.dedupByKey(df) // from Python: spark._jvm.kstreams.CrashProcessors.dedupByKey(df._jdf)
  * }}}
  */
object CrashProcessors {
  def dedupByKey(df: DataFrame): DataFrame =
    KStream(df)
      .process(() => new ProcessorSpec.DedupByKey(10000), stores = Seq(ProcessorSpec.dedupStore), name = "scala-dedup")
      .df
}
