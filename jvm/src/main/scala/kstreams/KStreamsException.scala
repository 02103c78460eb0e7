package kstreams

/** Bad input or bad usage, with a message that says what to change.
  *
  * Every error the library raises on purpose is one of these, so the Python layer can turn it into
  * a `kstreams_spark.KStreamsError` carrying the same message (never a bare py4j trace).
  *
  * {{{
  * try KStream(df).deduplicateByKey("ten seconds")
  * catch { case e: KStreamsException => println(e.getMessage) }
  * }}}
  */
class KStreamsException(message: String, cause: Throwable = null) extends RuntimeException(message, cause)

private[kstreams] object KStreamsException {

  /** The first non-blank line of a Spark error: what to quote of it (a parse error's message
    * starts with a blank line). */
  def sparkSays(e: Throwable): String =
    Option(e.getMessage).iterator.flatMap(_.linesIterator).map(_.trim).find(_.nonEmpty).getOrElse(e.getClass.getName)
}
