package kstreams

import java.time.Duration
import java.util.Locale

/** Parses and checks the intervals operators take (`"10 seconds"`, `"100 ms"`, `"PT1M"`).
  *
  * Intervals are held in microseconds, the precision of Spark's `TimestampType`, so timestamps are
  * compared at the column's full precision.
  *
  * {{{
  * Intervals.micros("1 minute 30 s")  // 90000000L
  * }}}
  */
object Intervals {
  private val Part = """(\d+(?:\.\d+)?)\s*([a-zµ]+)""".r

  private val unitMicros: Map[String, BigDecimal] = {
    def names(micros: BigDecimal, ns: String*) = ns.map(_ -> micros)
    (names(1, "us", "µs", "micro", "micros", "microsecond", "microseconds") ++
      names(1000, "ms", "milli", "millis", "millisecond", "milliseconds") ++
      names(1000000L, "s", "sec", "secs", "second", "seconds") ++
      names(60000000L, "m", "min", "mins", "minute", "minutes") ++
      names(3600000000L, "h", "hr", "hrs", "hour", "hours") ++
      names(86400000000L, "d", "day", "days") ++
      names(604800000000L, "w", "week", "weeks")).toMap
  }

  /** Microseconds in `text`: one or more `<number> <unit>` parts, or an ISO-8601 duration. */
  def micros(text: String): Long = {
    if (text == null) throw new KStreamsException("interval is null; give e.g. \"10 seconds\"")
    val trimmed = text.trim.toLowerCase(Locale.ROOT).stripPrefix("interval").trim
    if (trimmed.startsWith("-"))
      throw new KStreamsException(s"interval must not be negative, got '$text'")
    if (trimmed.startsWith("p")) {
      val d =
        try Duration.parse(trimmed.toUpperCase(Locale.ROOT))
        catch {
          // ISO-8601's years and months (P1Y, P1M) come before its T; java.time.Duration has neither
          case _: Exception if trimmed.takeWhile(_ != 't').exists(c => c == 'y' || c == 'm') => throw calendar(text)
          case _: Exception => throw unparsable(text)
        }
      return micros(d)
    }
    val parts = Part.findAllMatchIn(trimmed).toList
    val covered = parts.map(_.matched).mkString.replaceAll("\\s", "")
    if (parts.isEmpty || covered != trimmed.replaceAll("\\s", "")) throw unparsable(text)
    val total = parts.map { m =>
      val unit = unitMicros.getOrElse(
        m.group(2),
        throw (if (CalendarUnits.contains(m.group(2))) calendar(text) else unparsable(text)))
      BigDecimal(m.group(1)) * unit
    }.sum
    if (!total.isWhole)
      throw new KStreamsException(s"interval '$text' is finer than a microsecond, the precision of Spark timestamps")
    if (!total.isValidLong) throw tooLong(text)
    total.toLongExact
  }

  /** Microseconds in `d`; negative durations are refused. */
  def micros(d: Duration): Long = {
    if (d == null) throw new KStreamsException("interval is null; give e.g. Duration.ofSeconds(10)")
    if (d.isNegative) throw new KStreamsException(s"interval must not be negative, got $d")
    try Math.addExact(Math.multiplyExact(d.getSeconds, 1000000L), (d.getNano / 1000).toLong)
    catch { case _: ArithmeticException => throw tooLong(d.toString) }
  }

  private def tooLong(text: String) = new KStreamsException(
    s"interval '$text' is too long: in microseconds (the precision of Spark timestamps) it must fit " +
      "in a long, about 292,000 years")

  /** Units of no fixed length ("m" is minutes). */
  private val CalendarUnits = Set("mo", "mon", "mons", "month", "months", "y", "yr", "yrs", "year", "years")

  private def calendar(text: String) = new KStreamsException(
    s"cannot read interval '$text': months and years have no fixed length (a month is 28 to 31 days); " +
      "give it in days or shorter units, e.g. \"30 days\" or \"P30D\"")

  private def unparsable(text: String) = new KStreamsException(
    s"cannot read interval '$text': use a number and a unit, e.g. \"10 seconds\", \"100 ms\", " +
      "\"1 minute 30 s\", or an ISO-8601 duration such as \"PT10S\"")
}
