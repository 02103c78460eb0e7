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


def within_watermark_forwarded(spark, source, interval_ms, column="key"):
    """What Spark's `withWatermark("timestamp", interval).dropDuplicatesWithinWatermark([column])`
    must forward of `source`, when every row's event time lies within `interval_ms` of the latest
    (as in the long, catch-up and cold regimes): the watermark (latest event time seen minus the
    interval) then stays below every row, so no row is late and no entry expires, and the rule
    forwards each key's first row: the number of distinct keys. None otherwise: what it forwards
    then depends on where micro-batches end (the watermark moves only between them), which this
    script does not model."""
    row = (
        spark.read.parquet(source)
        .selectExpr(
            "max(unix_millis(timestamp)) - min(unix_millis(timestamp)) AS span_ms",
            f"count(DISTINCT `{column}`) AS keys",
        )
        .first()
    )
    return row.keys if row.span_ms < interval_ms else None


# what the regimes that check their candidates' output say of it
CHECKED = (
    "Every run's forwarded rows (the noop sink's) are counted and checked, or the run stops: "
    "kstreams' against what KIP-655's rule forwards by `tests/reference.py`, the floor's against "
    "every row, and, where every row lies within the interval of the latest (nothing late, nothing "
    "expires), Spark's dedup's against the distinct keys; otherwise Spark's rule is not modelled."
)


def modelled_forwarded(spark, source, interval, column=None):
    """What the candidates whose rule this script models must forward of `source`: kstreams
    (KIP-655, `kip655_forwarded`; by `column` over every partition if given), the floor (every
    row) and, where `within_watermark_forwarded` models it, Spark's dedup on either store."""
    from kstreams_spark._jvm import door

    interval_ms = door(spark).intervalMicros(interval) // 1000
    expected = {
        "kstreams": kip655_forwarded(spark, source, interval_ms, column),
        "tws_floor": spark.read.parquet(source).count(),
    }
    spark_rule = within_watermark_forwarded(spark, source, interval_ms, column or "key")
    said = f"KIP-655 forwards {expected['kstreams']:,} of the {expected['tws_floor']:,} rows"
    if spark_rule is None:
        said += "; Spark's dedup not modelled (rows further apart than the interval)"
    else:
        said += f", Spark's dedup {spark_rule:,} (every row within the interval)"
        for store in ("rocksdb", "hdfs"):
            expected[f"spark_dedup_within_watermark_{store}"] = spark_rule
    print(said, flush=True)
    return expected


def check_forwarded(name, result, expected):
    """Stops the benchmark when a candidate whose rule this script models (`modelled_forwarded`)
    forwarded another number of rows than the model."""
    want = expected.get(name.split("+")[0])  # a --tune variant ("kstreams+changelog") as its candidate
    if want is not None and result["forwarded"] != want:
        raise SystemExit(f"{name} forwarded {result['forwarded']:,} rows, its rule forwards {want:,}")
