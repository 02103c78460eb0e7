"""What each candidate whose rule is modelled must forward, computed independently of the code
under test (kstreams: the spec's rule as `tests/reference.py` transcribes it); a run that forwards
anything else stops the benchmark (`check_forwarded`)."""

from __future__ import annotations

import os
import sys

from bench import REPO


def kip655_forwarded(spark, source, interval_ms, column=None):
    """How many rows of `source` KIP-655's rule forwards: counted by tests/reference.py, the spec's
    section 2 transcribed directly (not the code under test), times in integer ms so that no
    rounding moves a record across the interval's edge. column None: `deduplicate_by_key`, state
    per input partition, the rows in (partition, offset) order (micro-batches cannot change what a
    partition's own rule forwards); a column name: the global `deduplicate` by that column, one
    entry per value over every partition, the rows as the global store takes them (the spec,
    section 2): micro-batch by micro-batch (one Parquet file each, in name order), inside one
    partition by partition in offset order."""
    from collections import namedtuple

    from pyspark.sql import functions as F

    sys.path.insert(0, os.path.join(REPO, "tests"))
    from reference import dedup_reference

    Record = namedtuple("Record", "key t partition offset")
    df = spark.read.parquet(source).select(
        F.col(column or "key").alias("key"),
        F.unix_millis("timestamp").alias("t"),
        "partition",
        "offset",
        F.input_file_name().alias("file"),
    )
    if column is None:
        rows = df.orderBy("partition", "offset").drop("file").toLocalIterator()
        return len(dedup_reference([Record(*r) for r in rows], interval_ms))
    rows = df.orderBy("file", "partition", "offset").drop("file").toLocalIterator()
    return len(dedup_reference([Record(*r) for r in rows], interval_ms, scope="global"))


def watermarked_batches(spark, source, interval_ms, column="key"):
    """`source` as Spark's watermarked dedup operators take it, micro-batch by micro-batch (one
    Parquet file each, in name order), as a list of `(late_us, eviction_us, rows)`: `rows` the
    micro-batch's `(value of column, event time in micros)`; `eviction_us` its watermark
    (`eventTimeWatermarkForEviction`: the largest event time of the micro-batches before it minus
    the interval, never lower than before, 0 at first; state at or below it is removed after the
    micro-batch); `late_us` the watermark of the micro-batch before (`eventTimeWatermarkForLateEvents`:
    a row at or below it is late and dropped before the state is read, Spark's `<=` in
    `WatermarkSupport.watermarkExpression`)."""
    from itertools import groupby

    from pyspark.sql import functions as F

    rows = (
        spark.read.parquet(source)
        .select(
            F.input_file_name().alias("file"),
            F.col(column).alias("key"),
            F.unix_micros("timestamp").alias("t"),
        )
        .orderBy("file")
        .toLocalIterator()
    )
    batches, late_us, eviction_us, latest_us = [], 0, 0, None
    for _, batch in groupby(rows, key=lambda row: row[0]):
        batch = [(key, t) for _, key, t in batch]
        batches.append((late_us, eviction_us, batch))
        newest = max(t for _, t in batch)
        latest_us = newest if latest_us is None else max(latest_us, newest)
        late_us, eviction_us = eviction_us, max(eviction_us, (latest_us // 1000 - interval_ms) * 1000)
    return batches


def within_watermark_forwarded(batches, interval_ms):
    """What Spark's `withWatermark("timestamp", interval).dropDuplicatesWithinWatermark([column])`
    must forward of `batches` (`watermarked_batches`), as Spark 4.3's
    `StreamingDeduplicateWithinWatermarkExec` runs it: a late row is dropped; any other is forwarded
    if its key has no entry, which it then gets, expiring at its event time plus the interval; a
    row whose key has an entry is dropped; after the micro-batch, entries expiring at or below its
    eviction watermark are removed.

    None where Spark's answer depends on what this does not know: a row exactly at the late
    watermark, or a key without an entry that comes with two event times in one micro-batch (which
    of them Spark stores first, its expiry, is not defined)."""
    interval_us = interval_ms * 1000
    entries: dict = {}  # key -> expiry (micros)
    forwarded = 0
    for late_us, eviction_us, rows in batches:
        first_time = {}
        for key, t in rows:
            if t == late_us:
                return None
            if t < late_us:
                continue
            if key in entries:
                if first_time.get(key, t) != t:
                    return None  # stored in this micro-batch, from one of two event times
                continue
            entries[key] = t + interval_us
            first_time[key] = t
            forwarded += 1
        entries = {key: expiry for key, expiry in entries.items() if expiry > eviction_us}
    return forwarded


def drop_duplicates_forwarded(batches):
    """What Spark's older `withWatermark("timestamp", interval).dropDuplicates([column, "timestamp"])`
    must forward of `batches` (`watermarked_batches`), as Spark 4.3's `StreamingDeduplicateExec` runs
    it: a late row is dropped; any other is forwarded if its (value, event time) has no entry, which
    it then gets; after the micro-batch, entries whose event time is at or below its eviction
    watermark are removed (a later row with such a time is late anyway). So the interval only
    decides what is late: a duplicate with another event time is forwarded. None for a row exactly
    at the late watermark, as `within_watermark_forwarded`."""
    entries: set = set()
    forwarded = 0
    for late_us, eviction_us, rows in batches:
        for key, t in rows:
            if t == late_us:
                return None
            if t < late_us or (key, t) in entries:
                continue
            entries.add((key, t))
            forwarded += 1
        entries = {entry for entry in entries if entry[1] > eviction_us}
    return forwarded


# what the regimes that check their candidates' output say of it
CHECKED = (
    "Every run's forwarded rows (the noop sink's) are counted and checked, or the run stops: "
    "kstreams' against what KIP-655's rule forwards by `tests/reference.py`, the floor's against "
    "every row, and Spark's `dropDuplicatesWithinWatermark` on either store against its rule simulated "
    "micro-batch by micro-batch (the watermark of the micro-batch before for late rows, its own for "
    "eviction: `expected.within_watermark_forwarded`), and Spark's older `dropDuplicates(key, timestamp)` "
    "against its rule simulated the same way (`expected.drop_duplicates_forwarded`), wherever the input "
    "leaves Spark's answer defined."
)


def modelled_forwarded(spark, source, interval, column=None):
    """What the candidates whose rule this script models must forward of `source`: kstreams
    (KIP-655, `kip655_forwarded`; by `column` over every partition if given), the floor (every
    row) and, where `within_watermark_forwarded` and `drop_duplicates_forwarded` can tell, Spark's
    dedup on either store and its older `dropDuplicates`."""
    from kstreams_spark._jvm import door

    interval_ms = door(spark).intervalMicros(interval) // 1000
    expected = {
        "kstreams": kip655_forwarded(spark, source, interval_ms, column),
        "tws_floor": spark.read.parquet(source).count(),
    }
    batches = watermarked_batches(spark, source, interval_ms, column or "key")
    spark_rule = within_watermark_forwarded(batches, interval_ms)
    said = f"KIP-655 forwards {expected['kstreams']:,} of the {expected['tws_floor']:,} rows"
    if spark_rule is None:
        said += "; Spark's dedup not modelled (a row at the watermark, or a key's event times in doubt)"
    else:
        said += f", Spark's dedup {spark_rule:,}"
        for store in ("rocksdb", "hdfs"):
            expected[f"spark_dedup_within_watermark_{store}"] = spark_rule
    older_rule = drop_duplicates_forwarded(batches)
    if older_rule is not None:
        said += f", Spark's older dropDuplicates(key, timestamp) {older_rule:,}"
        expected["spark_drop_duplicates_watermark_rocksdb"] = older_rule
    print(said, flush=True)
    return expected


def check_forwarded(name, result, expected):
    """Stops the benchmark when a candidate whose rule this script models (`modelled_forwarded`)
    forwarded another number of rows than the model."""
    want = expected.get(name.split("+")[0])  # a --tune variant ("kstreams+changelog") as its candidate
    if want is not None and result["forwarded"] != want:
        raise SystemExit(f"{name} forwarded {result['forwarded']:,} rows, its rule forwards {want:,}")
