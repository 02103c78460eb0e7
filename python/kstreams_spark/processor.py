"""The Processor API (KIP-28) for Python: processors written in Python, run by Spark's Python
stateful processing (``transformWithState``), one instance per input partition (a Kafka Streams
task), with key-value stores kept in Spark's checkpointed RocksDB state store.

This module is the API a processor is written against. The JVM prepares the input exactly as for
the Scala API (grouped by input partition, in offset order; ``_processor_plan``), and
``_processor_runtime`` (the port of the Scala runner) runs the user's code on it; punctuation
follows the Scala API (and Kafka's ``PunctuationQueue``).

>>> class Count(Processor):
...     def init(self, context):
...         self.context = context
...         self.counts = context.get_state_store("counts")
...         context.schedule(timedelta(seconds=10), PunctuationType.STREAM_TIME)
...     def process(self, record):
...         self.counts.put(record.key, (self.counts.get(record.key) or 0) + 1)
...     def punctuate(self, timestamp):
...         for key, count in sorted(self.counts.all()):
...             self.context.forward(key, count, timestamp)
>>> from pyspark.sql.types import LongType
>>> out = KStream(df).process(Count, stores=[Stores.key_value("counts")], value_type=LongType()).df
>>> [(r.key, r.value, r.timestamp.second) for r in out.collect()]
[('a', 1, 0), ('a', 3, 20), ('b', 1, 20)]
"""

from __future__ import annotations

import abc
import enum
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kstreams_spark.errors import KStreamsError

_PICKLE_PROTOCOL = 4  # fixed, so equal keys always pickle to the same bytes


@dataclass(frozen=True)
class Record:
    """One input record: key, value, timestamp (epoch ms), and where it came from (``topic`` is
    None without a ``topic`` column).

    >>> Record("a", 1, timestamp=1000, topic=None, partition=0, offset=7).value
    1
    """

    key: Any
    value: Any
    timestamp: int
    topic: str | None
    partition: int
    offset: int


class PunctuationType(enum.Enum):
    """When a punctuation fires.

    ``STREAM_TIME``: when the partition's stream time reaches the next multiple of the interval,
    checked after each record; ``punctuate`` gets the stream time, boundaries jumped over fire
    once, and the first record always punctuates (Kafka's behaviour).
    ``WALL_CLOCK_TIME``: on processing time, one interval after the schedule was first registered,
    then every interval (Spark processing-time timers; needs ``process(..., wall_clock=True)``).
    """

    STREAM_TIME = "stream_time"
    WALL_CLOCK_TIME = "wall_clock_time"


class Processor:
    """Base class of a Python processor; override ``process`` and what else you need.

    One instance serves one input partition for one micro-batch: ``init`` runs before the
    partition's first record or punctuation of the micro-batch, ``close`` at its end. Keep what
    must outlive a micro-batch (or a restart) in a store.

    >>> class Upper(Processor):
    ...     def init(self, context): self.context = context
    ...     def process(self, record): self.context.forward(record.key, record.value.upper())
    >>> [r.value for r in KStream(df).process(Upper).df.orderBy("offset").collect()][:2]
    ['APPLE', 'BANANA']
    """

    def init(self, context: ProcessorContext) -> None:
        """Called first; keep the context, get stores, register schedules.

        Args:
            context: this instance's :class:`ProcessorContext`.
        """

    def process(self, record: Record) -> None:
        """Called for each record, in offset order of its input partition.

        Args:
            record: the input record.

        Raises:
            NotImplementedError: unless a subclass overrides it.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement process(record)")

    def punctuate(self, timestamp: int) -> None:
        """Called by schedules registered with ``context.schedule(interval, type)``; ``timestamp``
        is the stream time or the processing time, in ms.

        Args:
            timestamp: the stream time or the processing time, in ms.
        """

    def close(self) -> None:
        """Called at the end of the partition's micro-batch, once per task and micro-batch. The
        micro-batch's output is complete then: a forward here fails the query (it would be lost),
        and the stores are out of reach (Spark has no current key; keep what ``close`` needs in
        fields)."""


@dataclass(frozen=True)
class StoreSpec:
    """A declared key-value store (see :meth:`Stores.key_value`)."""

    name: str


class Stores:
    """Declares stores for ``KStream.process``.

    >>> Stores.key_value("sums")
    StoreSpec(name='sums')
    """

    @staticmethod
    def key_value(name: str) -> StoreSpec:
        """A key-value store of any picklable Python keys and values.

        Args:
            name: the store's name, which ``context.get_state_store`` takes.

        Returns:
            The store's declaration, for ``stores=``.

        Raises:
            KStreamsError: if ``name`` is not a non-empty string.
        """
        if not isinstance(name, str) or not name:
            raise KStreamsError(f"a store needs a non-empty name, got {name!r}")
        return StoreSpec(name)


class KeyValueStore:
    """A key-value store scoped to the processor's input partition, in Spark's checkpointed state
    store, so its contents survive restarts. Keys and values are pickled.

    Inside a processor (``store = context.get_state_store("counts")``)::

        store.put("a", 1)
        store.get("a")  # 1
    """

    def __init__(self, name: str, state) -> None:
        self.name = name
        self._state = state

    def get(self, key: Any) -> Any:
        """The value of ``key``, or None.

        Args:
            key: the key, any picklable value.

        Returns:
            The value stored under ``key``, or None.
        """
        found = self._state.getValue((_dump(key),))
        return None if found is None else pickle.loads(found[0])

    def put(self, key: Any, value: Any) -> None:
        """Stores ``value`` under ``key``; ``None`` deletes (as in Kafka).

        Args:
            key: the key, any picklable value.
            value: any picklable value; None deletes ``key``.
        """
        if value is None:
            self._state.removeKey((_dump(key),))
        else:
            self._state.updateValue((_dump(key),), (_dump(value),))

    def put_if_absent(self, key: Any, value: Any) -> Any:
        """Stores ``value`` only if ``key`` has none; returns the value that was there.

        Args:
            key: the key, any picklable value.
            value: any picklable value, stored if ``key`` has none.

        Returns:
            The value that was there, or None (``value`` was then stored).
        """
        existing = self.get(key)
        if existing is None:
            self.put(key, value)
        return existing

    def delete(self, key: Any) -> Any:
        """Removes ``key``; returns the value that was there.

        Args:
            key: the key, any picklable value.

        Returns:
            The value that was there, or None.
        """
        existing = self.get(key)
        if existing is not None:
            self._state.removeKey((_dump(key),))
        return existing

    def range(self, start: Any, end: Any) -> list[tuple[Any, Any]]:
        """Entries with ``start <= key <= end`` (inclusive, as in Kafka), in key order.

        Args:
            start: the smallest key (inclusive).
            end: the largest key (inclusive).

        Returns:
            The (key, value) entries in that range, in key order.
        """
        return sorted((k, v) for k, v in self.all() if start <= k <= end)

    def all(self) -> Iterator[tuple[Any, Any]]:
        """Every (key, value) entry, in the state store's order."""
        for key, value in self._state.iterator():
            yield pickle.loads(key[0]), pickle.loads(value[0])


def _dump(value: Any) -> bytes:
    return pickle.dumps(value, protocol=_PICKLE_PROTOCOL)


class ProcessorContext(abc.ABC):
    """What a :class:`Processor` can see and do: ``forward``, ``schedule``, the current record's
    ``topic``/``partition``/``offset``/``timestamp``, ``stream_time``, ``get_state_store``.

    The runtime gives each processor instance one (its ``init`` argument), as Kafka Streams does;
    this abstract type is what a processor programs against (spec section 7, KIP-28)."""

    @abc.abstractmethod
    def forward(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """Emits a record to the children (or the output); ``timestamp`` (epoch ms) defaults to
        the current record's (in a punctuation: the punctuation time).

        Args:
            key: the forwarded record's key.
            value: the forwarded record's value.
            timestamp: the forwarded record's timestamp, in epoch ms; None: the current record's (in a
                punctuation: the punctuation time).
        """

    @abc.abstractmethod
    def schedule(
        self,
        interval: Any,
        punctuation_type: PunctuationType = PunctuationType.STREAM_TIME,
        punctuator: Callable[[int], None] | None = None,
    ) -> None:
        """Calls ``punctuate`` (or ``punctuator``) every ``interval`` (a timedelta, or ms as int) of
        stream or wall-clock time. Call it from ``init``: schedules are numbered in registration
        order and their next time is checkpointed under that number.

        Args:
            interval: the time between punctuations: a timedelta, or ms as an int.
            punctuation_type: ``PunctuationType.STREAM_TIME`` (the default) or
                ``PunctuationType.WALL_CLOCK_TIME``.
            punctuator: called with the timestamp in place of the processor's ``punctuate``; None:
                ``punctuate``.
        """

    @abc.abstractmethod
    def get_state_store(self, name: str) -> KeyValueStore:
        """The store ``name`` declared for this processor (``stores=[Stores.key_value(name)]``).

        Args:
            name: the store's name, as declared with ``Stores.key_value(name)``.

        Returns:
            The store.
        """

    @property
    @abc.abstractmethod
    def processor_name(self) -> str:
        """Name of the running processor (the class name, or ``name=`` of ``process`` /
        ``add_processor``), as errors name it."""

    @property
    @abc.abstractmethod
    def topic(self) -> str | None:
        """Topic of the current record, from the input's string ``topic`` column (Spark's Kafka source
        has one); None without that column and in a punctuation."""

    @property
    @abc.abstractmethod
    def partition(self) -> int:
        """Input partition of the current record: the task this processor instance belongs to."""

    @property
    @abc.abstractmethod
    def offset(self) -> int:
        """Offset of the current record; -1 in a punctuation."""

    @property
    @abc.abstractmethod
    def timestamp(self) -> int:
        """Timestamp (ms) of the current record, or of the punctuation being run."""

    @property
    @abc.abstractmethod
    def stream_time(self) -> int:
        """Largest record timestamp (ms) of the partition so far; -1 before any record."""

    @property
    @abc.abstractmethod
    def current_system_time_ms(self) -> int:
        """Processing time (ms) of the current micro-batch (the time wall-clock punctuation goes
        by); the machine's clock when the query has no processing-time mode."""
