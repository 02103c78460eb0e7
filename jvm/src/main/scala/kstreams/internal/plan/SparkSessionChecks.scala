package kstreams
package internal
package plan

import org.apache.spark.sql.DataFrame

/** Checks on the Spark session an operator runs in. */
private[kstreams] object SparkSessionChecks {
  val ProviderKey = "spark.sql.streaming.stateStore.providerClass"
  val RocksDBProvider =
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

  /** `transformWithState` only runs on the RocksDB state store; say so before Spark fails late. */
  def requireStateStore(df: DataFrame): Unit = {
    val session = df.sparkSession
    if (session.sparkContext.isStopped)
      throw new KStreamsException(
        "the DataFrame belongs to a SparkSession whose SparkContext is stopped; " +
          "build the DataFrame from the active session")
    val provider = session.conf.getOption(ProviderKey).getOrElse("(default: HDFS-backed)")
    if (provider != RocksDBProvider)
      throw new KStreamsException(
        s"kstreams-spark operators need the RocksDB state store, but $ProviderKey is $provider. " +
          s"Set $ProviderKey=$RocksDBProvider on the session " +
          "(Python: kstreams_spark.configure_spark(SparkSession.builder); " +
          "Scala: kstreams.KStream.configure(builder))")
  }
}
