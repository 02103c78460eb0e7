"""The interval grammar of ``kstreams.Intervals`` (Scala), read in Python for the CLI only, so that
a mistyped ``--interval`` is reported before Spark's 30-second start-up. The library itself hands
intervals to the JVM parser; ``tests/test_cli.py`` checks that both accept and refuse the same
texts."""

from __future__ import annotations

import re
from decimal import Decimal

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-zµ]+)")
_UNIT_MICROS = {
    **dict.fromkeys(("us", "µs", "micro", "micros", "microsecond", "microseconds"), 1),
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 1_000),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1_000_000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000_000),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3_600_000_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000_000),
    **dict.fromkeys(("w", "week", "weeks"), 604_800_000_000),
}
# java.time.Duration.parse: PnDTnHnMn.nS (days, hours, minutes, seconds; signs allowed per part)
_ISO = re.compile(
    r"[-+]?P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)
_LONG_MAX = 2**63 - 1
# units of no fixed length ("m" is minutes)
_CALENDAR_UNITS = {"mo", "mon", "mons", "month", "months", "y", "yr", "yrs", "year", "years"}


def interval_problem(text: str) -> str | None:
    """What ``kstreams.Intervals.micros`` would refuse in ``text`` (its message), or None.

    >>> interval_problem("1 minute 30 s") is None
    True
    >>> interval_problem("10 parsecs")
    'cannot read interval \\'10 parsecs\\': use a number and a unit, e.g. "10 seconds", "100 ms", "1 minute 30 s", or an ISO-8601 duration such as "PT10S"'
    """
    return _read(text)[1]


def interval_micros(text: str) -> int:
    """``text`` in microseconds, as ``kstreams.Intervals.micros`` reads it; ValueError with
    :func:`interval_problem`'s message if it cannot.

    >>> interval_micros("1 minute 30 s")
    90000000
    """
    micros, problem = _read(text)
    if problem is not None:
        raise ValueError(problem)
    return micros


def _read(text: str) -> tuple[int, str | None]:
    """``text`` in microseconds and None, or 0 and what is wrong with it."""
    unparsable = (
        f'cannot read interval \'{text}\': use a number and a unit, e.g. "10 seconds", "100 ms", '
        '"1 minute 30 s", or an ISO-8601 duration such as "PT10S"'
    )
    calendar = (
        f"cannot read interval '{text}': months and years have no fixed length (a month is 28 to 31 "
        'days); give it in days or shorter units, e.g. "30 days" or "P30D"'
    )
    trimmed = text.strip().lower()
    if trimmed.startswith("interval"):
        trimmed = trimmed[len("interval") :].strip()
    if trimmed.startswith("-"):
        return 0, f"interval must not be negative, got '{text}'"
    if trimmed.startswith("p"):
        match = _ISO.fullmatch(trimmed)
        if not match or not any(match.groups()[:4]) or match.group(0).upper().endswith("T"):
            # ISO-8601's years and months (P1Y, P1M) come before its T; java.time.Duration has neither
            return 0, calendar if re.search(r"[ym]", trimmed.split("t")[0]) else unparsable
        days, hours, minutes, seconds, fraction = match.groups()
        total = (
            Decimal(days or 0) * 86_400_000_000
            + Decimal(hours or 0) * 3_600_000_000
            + Decimal(minutes or 0) * 60_000_000
            + Decimal(seconds or 0) * 1_000_000
            + Decimal(f"0.{fraction or 0}") * 1_000_000 * (-1 if (seconds or "").startswith("-") else 1)
        )
        if total < 0:
            return 0, f"interval must not be negative, got {text.strip().upper()}"
        return (int(total), None) if int(total) <= _LONG_MAX else (0, _too_long(text))
    parts = list(_PART.finditer(trimmed))
    covered = "".join(m.group(0) for m in parts)
    if not parts or re.sub(r"\s", "", covered) != re.sub(r"\s", "", trimmed):
        return 0, unparsable
    total = Decimal(0)
    for m in parts:
        if m.group(2) not in _UNIT_MICROS:
            return 0, calendar if m.group(2) in _CALENDAR_UNITS else unparsable
        total += Decimal(m.group(1)) * _UNIT_MICROS[m.group(2)]
    if total != total.to_integral_value():
        return 0, f"interval '{text}' is finer than a microsecond, the precision of Spark timestamps"
    return (int(total), None) if total <= _LONG_MAX else (0, _too_long(text))


def _too_long(text: str) -> str:
    return (
        f"interval '{text}' is too long: in microseconds (the precision of Spark timestamps) it must fit "
        "in a long, about 292,000 years"
    )
