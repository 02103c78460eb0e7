package kstreams

import java.time.Duration

import org.scalatest.funsuite.AnyFunSuite

class IntervalsSpec extends AnyFunSuite {
  test("spellings") {
    assert(Intervals.micros("10 seconds") == 10000000L)
    assert(Intervals.micros("10s") == 10000000L)
    assert(Intervals.micros("100 ms") == 100000L)
    assert(Intervals.micros("1 minute 30 s") == 90000000L)
    assert(Intervals.micros("interval 2 hours") == 7200000000L)
    assert(Intervals.micros("PT0.5S") == 500000L)
    assert(Intervals.micros("0 seconds") == 0L)
    assert(Intervals.micros("1.5 s") == 1500000L)
    assert(Intervals.micros(Duration.ofMillis(250)) == 250000L)
  }

  test("bad intervals say what is wrong") {
    def message(text: String) = intercept[KStreamsException](Intervals.micros(text)).getMessage
    assert(message("-1 s").contains("must not be negative"))
    assert(message("ten seconds").contains("cannot read interval 'ten seconds'"))
    assert(message("10 parsecs").contains("cannot read interval"))
    assert(message("10").contains("cannot read interval"))
    assert(message("0.5 us").contains("finer than a microsecond"))
    assert(
      intercept[KStreamsException](Intervals.micros(Duration.ofSeconds(-1))).getMessage
        .contains("must not be negative"))
    assert(message("999999999999 weeks").contains("interval '999999999999 weeks' is too long"))
    assert(
      intercept[KStreamsException](Intervals.micros(Duration.ofDays(Long.MaxValue / 86400 / 2))).getMessage
        .contains("is too long"))
  }

  test("windows refuse what Kafka Streams refuses") {
    assert(
      intercept[KStreamsException](SessionWindows.ofInactivityGapWithNoGrace("0 s")).getMessage ==
        "session inactivity gap must be positive, got 0")
    assert(
      intercept[KStreamsException](TimeWindows.ofSizeAndGrace("10 s", "-1 s")).getMessage
        .contains("must not be negative"))
  }
}
