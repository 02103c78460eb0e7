package kstreams
package internal
package sink

/** Kafka's rule for a topic name, checked where a query names its output topic ([[KStream.to]]),
  * so that a name no broker accepts is refused at once instead of after the producer's 60-second
  * metadata wait ("Topic not present in metadata"). The rule is Kafka's own (`Topic.validate` in
  * kafka-clients): 1 to 249 characters of ASCII letters, digits, '.', '_' and '-', and not "." or
  * "..". (A topic that is legal but does not exist is the broker's to report.) */
private[kstreams] object TopicName {
  val MaxLength = 249
  private val Legal = "[a-zA-Z0-9._-]+".r

  def check(topic: String): Unit = {
    def refuse(why: String) = throw new KStreamsException(
      s"output topic '$topic' is not a valid Kafka topic name: $why")
    if (topic == null) throw new KStreamsException("output topic is null; give the name of a Kafka topic")
    if (topic.isEmpty) refuse("it is empty")
    if (topic == "." || topic == "..") refuse("'.' and '..' are not allowed")
    if (topic.length > MaxLength) refuse(s"it has ${topic.length} characters, at most $MaxLength are allowed")
    if (!Legal.matches(topic)) {
      val bad = topic.filterNot(c => c.isLetterOrDigit && c < 128 || ".-_".contains(c)).distinct
      refuse(s"it contains ${bad.map(c => s"'$c'").mkString(", ")}; use only ASCII letters, digits, '.', '_' and '-'")
    }
  }
}
