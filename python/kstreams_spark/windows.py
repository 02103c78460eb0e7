"""The windows of the DSL: ``TimeWindows`` and ``SessionWindows`` (``KGroupedStream.windowed_by``)
and ``JoinWindows`` (``KStream.join``), each building its Scala twin, which checks the values."""

from __future__ import annotations

from datetime import timedelta  # noqa: F401 (the examples' namespace)

from kstreams_spark._dsl import Interval, check_intervals, interval_text
from kstreams_spark._jvm import JavaObject, kstreams_class


class TimeWindows:
    """Epoch-aligned tumbling windows ``[start, start + size)``; a record whose window closed
    (``end <= stream time - grace``) is late. Builds Scala's ``kstreams.TimeWindows``, which checks
    the values when the windows are used.

    >>> TimeWindows.of_size_and_grace(timedelta(seconds=10), "2 seconds")
    TimeWindows(size=datetime.timedelta(seconds=10), grace='2 seconds')

    Args:
        size: the windows' length: a timedelta or a string such as ``"10 seconds"``.
        grace: how long after its end a window still accepts records, in the same forms; None: no grace.

    Raises:
        KStreamsError: if ``size`` or ``grace`` is neither a timedelta nor a string (the values are checked
            when the windows are used).
    """

    def __init__(self, size: Interval, grace: Interval | None) -> None:
        check_intervals(size, grace)
        self.size, self.grace = size, grace

    @staticmethod
    def of_size_with_no_grace(size: Interval) -> TimeWindows:
        """Windows of ``size`` that close at their end: a record is late once stream time reaches
        its window's end (``grace`` 0, as Kafka Streams' ``ofSizeWithNoGrace``).

        >>> TimeWindows.of_size_with_no_grace("10 seconds")
        TimeWindows(size='10 seconds', grace=None)

        Args:
            size: the windows' length: a timedelta or a string such as ``"10 seconds"``.

        Returns:
            The windows.

        Raises:
            KStreamsError: if ``size`` is neither a timedelta nor a string (the values are checked when the
                windows are used).
        """
        return TimeWindows(size, None)

    @staticmethod
    def of_size_and_grace(size: Interval, grace: Interval) -> TimeWindows:
        """Windows of ``size`` that accept records until stream time passes their end + ``grace``.

        >>> TimeWindows.of_size_and_grace("1 minute", timedelta(seconds=5))
        TimeWindows(size='1 minute', grace=datetime.timedelta(seconds=5))

        Args:
            size: the windows' length: a timedelta or a string such as ``"10 seconds"``.
            grace: how long after its end a window still accepts records, in the same forms.

        Returns:
            The windows.

        Raises:
            KStreamsError: if ``size`` or ``grace`` is neither a timedelta nor a string (the values are
                checked when the windows are used).
        """
        return TimeWindows(size, grace)

    def _to_java(self, spark) -> JavaObject:
        factory = kstreams_class(spark, "TimeWindows")
        if self.grace is None:
            return factory.ofSizeWithNoGrace(interval_text(self.size))
        return factory.ofSizeAndGrace(interval_text(self.size), interval_text(self.grace))

    def __repr__(self) -> str:
        return f"TimeWindows(size={self.size!r}, grace={self.grace!r})"


class SessionWindows:
    """Session windows: records of a key within ``gap`` (inclusive) of each other form one session.
    Builds Scala's ``kstreams.SessionWindows``.

    >>> SessionWindows.of_inactivity_gap_with_no_grace(timedelta(minutes=5))
    SessionWindows(gap=datetime.timedelta(seconds=300), grace=None)

    Args:
        gap: the inactivity gap: records of a key at most this far apart form one session; a timedelta or a
            string such as ``"10 seconds"``.
        grace: how much longer a session accepts late records, in the same forms; None: no grace.

    Raises:
        KStreamsError: if ``gap`` or ``grace`` is neither a timedelta nor a string (the values are checked
            when the windows are used).
    """

    def __init__(self, gap: Interval, grace: Interval | None) -> None:
        check_intervals(gap, grace)
        self.gap, self.grace = gap, grace

    @staticmethod
    def of_inactivity_gap_with_no_grace(gap: Interval) -> SessionWindows:
        """Sessions that close ``gap`` after their last record, with no grace for late records.

        >>> SessionWindows.of_inactivity_gap_with_no_grace("5 minutes")
        SessionWindows(gap='5 minutes', grace=None)

        Args:
            gap: the inactivity gap: records of a key at most this far apart form one session; a timedelta or
                a string such as ``"10 seconds"``.

        Returns:
            The windows.

        Raises:
            KStreamsError: if ``gap`` is neither a timedelta nor a string (the values are checked when the
                windows are used).
        """
        return SessionWindows(gap, None)

    @staticmethod
    def of_inactivity_gap_and_grace(gap: Interval, grace: Interval) -> SessionWindows:
        """Sessions that close ``gap`` after their last record and accept records ``grace`` longer.

        >>> SessionWindows.of_inactivity_gap_and_grace("5 minutes", "1 minute")
        SessionWindows(gap='5 minutes', grace='1 minute')

        Args:
            gap: the inactivity gap: records of a key at most this far apart form one session; a timedelta or
                a string such as ``"10 seconds"``.
            grace: how much longer a session accepts late records, in the same forms.

        Returns:
            The windows.

        Raises:
            KStreamsError: if ``gap`` or ``grace`` is neither a timedelta nor a string (the values are checked
                when the windows are used).
        """
        return SessionWindows(gap, grace)

    def _to_java(self, spark) -> JavaObject:
        factory = kstreams_class(spark, "SessionWindows")
        if self.grace is None:
            return factory.ofInactivityGapWithNoGrace(interval_text(self.gap))
        return factory.ofInactivityGapAndGrace(interval_text(self.gap), interval_text(self.grace))

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.gap!r}, grace={self.grace!r})"


class JoinWindows:
    """The window of a stream-stream join: records join when ``|t1 - t2| <= time_difference``;
    a record's window closes once its task's stream time (partition ``p`` of both sides, spec
    section 5) passes ``t + time_difference + grace`` (a left/outer join then emits it
    unmatched), and it stays joinable until its side's stream time reaches
    ``t + 2 * time_difference + grace``, the retention of Kafka Streams' join stores. Builds
    Scala's ``kstreams.JoinWindows``.

    >>> JoinWindows.of_time_difference_with_no_grace(timedelta(milliseconds=100))
    JoinWindows(time_difference=datetime.timedelta(microseconds=100000), grace=None)

    Args:
        time_difference: the largest difference between the timestamps of two records that join: a timedelta
            or a string such as ``"10 seconds"``.
        grace: how much longer, in stream time, a record's window stays open for late records, in the same
            forms; None: no grace.

    Raises:
        KStreamsError: if ``time_difference`` or ``grace`` is neither a timedelta nor a string (the values are
            checked when the windows are used).
    """

    def __init__(self, time_difference: Interval, grace: Interval | None) -> None:
        check_intervals(time_difference, grace)
        self.time_difference, self.grace = time_difference, grace

    @staticmethod
    def of_time_difference_with_no_grace(time_difference: Interval) -> JoinWindows:
        """Records join within ``time_difference`` of each other; no grace for late records.

        >>> JoinWindows.of_time_difference_with_no_grace("10 seconds")
        JoinWindows(time_difference='10 seconds', grace=None)

        Args:
            time_difference: the largest difference between the timestamps of two records that join: a
                timedelta or a string such as ``"10 seconds"``.

        Returns:
            The join windows.

        Raises:
            KStreamsError: if ``time_difference`` is neither a timedelta nor a string (the values are checked
                when the windows are used).
        """
        return JoinWindows(time_difference, None)

    @staticmethod
    def of_time_difference_and_grace(time_difference: Interval, grace: Interval) -> JoinWindows:
        """Records join within ``time_difference`` of each other, late records up to ``grace``.

        >>> JoinWindows.of_time_difference_and_grace("10 seconds", "1 minute")
        JoinWindows(time_difference='10 seconds', grace='1 minute')

        Args:
            time_difference: the largest difference between the timestamps of two records that join: a
                timedelta or a string such as ``"10 seconds"``.
            grace: how much longer, in stream time, a record's window stays open for late records, in the same
                forms.

        Returns:
            The join windows.

        Raises:
            KStreamsError: if ``time_difference`` or ``grace`` is neither a timedelta nor a string (the values
                are checked when the windows are used).
        """
        return JoinWindows(time_difference, grace)

    def _to_java(self, spark) -> JavaObject:
        factory = kstreams_class(spark, "JoinWindows")
        if self.grace is None:
            return factory.ofTimeDifferenceWithNoGrace(interval_text(self.time_difference))
        return factory.ofTimeDifferenceAndGrace(
            interval_text(self.time_difference), interval_text(self.grace)
        )

    def __repr__(self) -> str:
        return f"JoinWindows(time_difference={self.time_difference!r}, grace={self.grace!r})"
