"""What each candidate whose rule is modelled must forward, computed independently of the code
under test (kstreams: the spec's rule as `tests/reference.py` transcribes it); a run that forwards
anything else stops the benchmark (`check_forwarded`)."""

from __future__ import annotations

import os
import sys

from bench import REPO


def in_order(df, *columns):
    """The rows of `df` sorted by `columns`, fetched to the driver a range of about 250,000 rows at
    a time. (`orderBy` leaves as many ranges as `spark.sql.shuffle.partitions`, 2 here, and
    `toLocalIterator` holds a whole range in the driver: at the scaling series' 16M rows, 8M rows
    each, more than the driver's heap.)"""
    ranges = max(2, df.count() // 250_000)
    return df.repartitionByRange(ranges, *columns).sortWithinPartitions(*columns).toLocalIterator()


def micro_batches(spark, source, *columns):
    """`columns` of `source`'s rows micro-batch by micro-batch as the file source reads them (one
    Parquet file each, in name order: `data.order_files`), one micro-batch in the driver at a time:
    a list of rows per file. (One pass over every file, sorted by the file's name, lost task results
    in the driver at the scaling series' 16M rows.)"""
    for name in sorted(f for f in os.listdir(source) if f.endswith(".parquet")):
        yield spark.read.parquet(os.path.join(source, name)).select(*columns).collect()


def kip655_forwarded(spark, source, interval_ms, column=None):
    """How many rows of `source` KIP-655's rule forwards: counted by tests/reference.py, the spec's
    section 2 transcribed directly (not the code under test), times in integer ms so that no
    rounding moves a record across the interval's edge. column None: `deduplicate_by_key`, state
    per input partition, the rows in (partition, offset) order (micro-batches cannot change what a
    partition's own rule forwards); a column name: the global `deduplicate` by that column, one
    entry per value over every partition, the rows as the global store takes them (the spec,
    section 2): micro-batch by micro-batch, inside one partition by partition in offset order."""
    from collections import namedtuple

    from pyspark.sql import functions as F

    sys.path.insert(0, os.path.join(REPO, "tests"))
    from reference import dedup_reference

    Record = namedtuple("Record", "key t partition offset")
    columns = (
        F.col(column or "key").alias("key"),
        F.unix_millis("timestamp").alias("t"),
        "partition",
        "offset",
    )
    if column is None:
        # one input partition at a time: the rule keeps state per partition, so the counts add up,
        # and the model holds one partition's keys, not the whole stream's (at the scaling series'
        # 16M rows and 10M keys, every key of the stream in one dict and the forwarded records in
        # one list outgrew the machine)
        rows = spark.read.parquet(source).select(*columns)
        partitions = sorted(r[0] for r in rows.select("partition").distinct().collect())
        return sum(
            len(
                dedup_reference(
                    (Record(*r) for r in in_order(rows.where(F.col("partition") == p), "offset")), interval_ms
                )
            )
            for p in partitions
        )
    records = (
        Record(*r)
        for batch in micro_batches(spark, source, *columns)
        for r in sorted(batch, key=lambda r: (r["partition"], r["offset"]))
    )
    return len(dedup_reference(records, interval_ms, scope="global"))


def watermarked_batches(spark, source, interval_ms, column="key"):
    """`source` as Spark's watermarked dedup operators take it, micro-batch by micro-batch
    (`micro_batches`): yields `(late_us, eviction_us, rows)`, `rows` the micro-batch's `(value of
    column, event time in micros)`; `eviction_us` its watermark (`eventTimeWatermarkForEviction`:
    the largest event time of the micro-batches before it minus the interval, never lower than
    before, 0 at first; state at or below it is removed after the micro-batch); `late_us` the
    watermark of the micro-batch before (`eventTimeWatermarkForLateEvents`: a row at or below it is
    late and dropped before the state is read, Spark's `<=` in
    `WatermarkSupport.watermarkExpression`)."""
    from pyspark.sql import functions as F

    late_us, eviction_us, latest_us = 0, 0, None
    for rows in micro_batches(
        spark, source, F.col(column).alias("key"), F.unix_micros("timestamp").alias("t")
    ):
        batch = [(key, t) for key, t in rows]
        yield late_us, eviction_us, batch
        newest = max(t for _, t in batch)
        latest_us = newest if latest_us is None else max(latest_us, newest)
        late_us, eviction_us = eviction_us, max(eviction_us, (latest_us // 1000 - interval_ms) * 1000)


class WithinWatermark:
    """What Spark's `withWatermark("timestamp", interval).dropDuplicatesWithinWatermark([column])`
    forwards of the micro-batches given to `take` (`watermarked_batches`'), as Spark 4.3's
    `StreamingDeduplicateWithinWatermarkExec` runs it: a late row is dropped; any other is forwarded
    if its key has no entry, which it then gets, expiring at its event time plus the interval; a
    row whose key has an entry is dropped; after the micro-batch, entries expiring at or below its
    eviction watermark are removed.

    `forwarded` is None where Spark's answer depends on what this does not know: a row exactly at
    the late watermark, or a key without an entry that comes with two event times in one
    micro-batch (which of them Spark stores first, its expiry, is not defined)."""

    def __init__(self, interval_ms):
        self.interval_us = interval_ms * 1000
        self.entries: dict = {}  # key -> expiry (micros)
        self.forwarded = 0

    def take(self, late_us, eviction_us, rows):
        if self.forwarded is None:
            return
        first_time = {}
        for key, t in rows:
            if t == late_us:
                self.forwarded = None
                return
            if t < late_us:
                continue
            if key in self.entries:
                if first_time.get(key, t) != t:
                    self.forwarded = None  # stored in this micro-batch, from one of two event times
                    return
                continue
            self.entries[key] = t + self.interval_us
            first_time[key] = t
            self.forwarded += 1
        self.entries = {key: expiry for key, expiry in self.entries.items() if expiry > eviction_us}


class OlderDropDuplicates:
    """What Spark's older `withWatermark("timestamp", interval).dropDuplicates(["key", "timestamp"])`
    forwards of the micro-batches given to `take`, as Spark 4.3's `StreamingDeduplicateExec` runs
    it: a late row is dropped; any other is forwarded if its (key, event time) has no entry, which
    it then gets; after the micro-batch, entries whose event time is at or below its eviction
    watermark are removed (a later row with such a time is late anyway). So the interval only
    decides what is late: a duplicate with another event time is forwarded. `forwarded` is None
    for a row exactly at the late watermark, as in `WithinWatermark`."""

    def __init__(self):
        self.entries: set = set()
        self.forwarded = 0

    def take(self, late_us, eviction_us, rows):
        if self.forwarded is None:
            return
        for key, t in rows:
            if t == late_us:
                self.forwarded = None
                return
            if t < late_us or (key, t) in self.entries:
                continue
            self.entries.add((key, t))
            self.forwarded += 1
        self.entries = {entry for entry in self.entries if entry[1] > eviction_us}


# what the regimes that check their candidates' output say of it
CHECKED = (
    "Every run's forwarded rows (the noop sink's) are counted and checked, or the run stops: "
    "kstreams' against what KIP-655's rule forwards by `tests/reference.py`, the floor's against "
    "every row, and Spark's `dropDuplicatesWithinWatermark` on either store against its rule simulated "
    "micro-batch by micro-batch (the watermark of the micro-batch before for late rows, its own for "
    "eviction: `expected.WithinWatermark`) wherever the input leaves Spark's answer defined."
)
# what the regimes that run Spark's older dropDuplicates add to CHECKED
CHECKED_OLDER = (
    " Spark's older `dropDuplicates(key, timestamp)` is checked against its rule simulated the same way "
    "(`expected.OlderDropDuplicates`)."
)


def modelled_forwarded(spark, source, interval, column=None):
    """What the candidates whose rule this script models must forward of `source`: kstreams
    (KIP-655, `kip655_forwarded`; by `column` over every partition if given), the floor (every
    row) and, where `WithinWatermark` and `OlderDropDuplicates` can tell, Spark's dedup on either
    store and its older `dropDuplicates`."""
    from kstreams_spark._jvm import door

    interval_ms = door(spark).intervalMicros(interval) // 1000
    expected = {
        "kstreams": kip655_forwarded(spark, source, interval_ms, column),
        "tws_floor": spark.read.parquet(source).count(),
    }
    # both of Spark's rules in one pass, a micro-batch in memory at a time; the older dropDuplicates
    # only by key (the candidate dedups on key and timestamp, whatever the regime's column)
    within = WithinWatermark(interval_ms)
    older = OlderDropDuplicates() if column is None else None
    for batch in watermarked_batches(spark, source, interval_ms, column or "key"):
        within.take(*batch)
        if older is not None:
            older.take(*batch)
    said = f"KIP-655 forwards {expected['kstreams']:,} of the {expected['tws_floor']:,} rows"
    if within.forwarded is None:
        said += "; Spark's dedup not modelled (a row at the watermark, or a key's event times in doubt)"
    else:
        said += f", Spark's dedup {within.forwarded:,}"
        for store in ("rocksdb", "hdfs"):
            expected[f"spark_dedup_within_watermark_{store}"] = within.forwarded
    if older is not None and older.forwarded is not None:
        said += f", Spark's older dropDuplicates(key, timestamp) {older.forwarded:,}"
        expected["spark_drop_duplicates_watermark_rocksdb"] = older.forwarded
    print(said, flush=True)
    return expected


def check_forwarded(name, result, expected):
    """Stops the benchmark when a candidate whose rule this script models (`modelled_forwarded`)
    forwarded another number of rows than the model."""
    want = expected.get(name.split("+")[0])  # a --tune variant ("kstreams+changelog") as its candidate
    if want is not None and result["forwarded"] != want:
        raise SystemExit(f"{name} forwarded {result['forwarded']:,} rows, its rule forwards {want:,}")
