"""The benchmarks' input: Parquet files in a folder, one per micro-batch (the file source reads
them in modification-time order, `order_files`), each generated from formulas over a row number,
so that every regime's rows are known without reading them back."""

from __future__ import annotations

import datetime as dt
import os
import shutil


def generate(spark, folder, args, with_id=False):
    """The benchmark rows, with the formulas kstreams.bench.DedupLimit uses too.

    with_id (the global regime): an `id` column, the dedup key as a string ("i" and the key's
    number), and each row on partition `row number % partitions` instead of `key % partitions`,
    so a duplicate (the adjacent one and any later one of the same key) lands on another input
    partition than its original."""
    from pyspark.sql import functions as F

    base_ms = int(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)
    i = F.col("id")
    key_id = F.when(i % args.dup_every == args.dup_every - 1, i - 1).otherwise(i) if args.dup_every > 0 else i
    spread = F.pmod(key_id * 40503, F.lit(args.spread_ms)) if args.spread_ms > 0 else F.lit(0)
    key_no = F.pmod(key_id * 2654435761, F.lit(args.keys)).cast("string")
    columns = [
        F.concat(F.lit("k"), key_no).alias("key"),
        F.concat(F.lit("v"), i.cast("string")).alias("value"),
        F.timestamp_millis(F.lit(base_ms) + key_id + spread).alias("timestamp"),
        F.pmod(i if with_id else key_id, F.lit(args.partitions)).cast("int").alias("partition"),
        i.alias("offset"),
    ]
    if with_id:
        columns.append(F.concat(F.lit("i"), key_no).alias("id"))
    df = spark.range(args.rows, numPartitions=args.files).select(*columns)
    df.write.mode("overwrite").parquet(folder)
    return order_files(folder)


def default_input(spark, workdir, args, with_id=False):
    """The default regime's rows (`generate`) in workdir/input and their first 20,000 in
    workdir/warmup (the warm-up runs' input); returns both folders."""
    source, small = os.path.join(workdir, "input"), os.path.join(workdir, "warmup")
    what = "ids" if with_id else "keys"
    where = ", duplicates on other partitions" if with_id else ""
    print(
        f"generating {args.rows:,} rows ({args.keys:,} {what}, 1 in {args.dup_every} a duplicate, "
        f"{args.partitions} partitions{where}, {args.files} files) ...",
        flush=True,
    )
    generate(spark, source, args, with_id)
    spark.read.parquet(source).limit(20000).write.parquet(small)
    return source, small


def order_files(folder):
    """Give the folder's Parquet files increasing modification times in name order (the file
    source reads them in modification-time order, one per micro-batch); returns their count."""
    files = sorted(f for f in os.listdir(folder) if f.endswith(".parquet"))
    for n, f in enumerate(files):  # file source order = modification time: keep id order
        os.utime(os.path.join(folder, f), (1_700_000_000 + n, 1_700_000_000 + n))
    return len(files)


def write_batches(spark, folder, frames):
    """Write each DataFrame as one Parquet file in `folder` (one micro-batch each, in order)."""
    os.makedirs(folder, exist_ok=True)
    staging = folder + ".staging"
    for n, df in enumerate(frames):
        part = os.path.join(staging, str(n))
        df.coalesce(1).write.mode("overwrite").parquet(part)
        (written,) = [f for f in os.listdir(part) if f.endswith(".parquet")]
        os.replace(os.path.join(part, written), os.path.join(folder, f"batch-{n:06d}.parquet"))
    shutil.rmtree(staging, ignore_errors=True)
    return order_files(folder)


def generate_live_keys(spark, folder, live_keys, args):
    """The long-interval rows: `live_keys` distinct keys built up first, then the measured
    micro-batches. Returns the number of build-up micro-batches (files).

    * build-up: rows 0..live_keys-1, one new key each ("k<row>"), in micro-batches of at most
      `build_rows` rows, event times spread evenly over the first 10 minutes;
    * measured: `batches` micro-batches of `batch_rows` rows, event time starting at minute 10
      and advancing 1 s per micro-batch (so with a 1-hour interval every key stays live); every
      `dup_every`-th row (25% by default) repeats a random earlier key (from the build-up or an
      earlier measured micro-batch), the others are new keys;
    * a key's partition is `key % partitions`, so a duplicate is on its original's partition
      (deduplicate_by_key is per partition); offsets are the row number."""
    from pyspark.sql import functions as F

    print(
        f"generating {live_keys:,} live keys (build-up micro-batches of at most {args.build_rows:,} rows), "
        f"then {args.batches} micro-batches of {args.batch_rows:,} rows, {args.partitions} partitions ...",
        flush=True,
    )
    base_ms = int(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)
    n_live, size, every = live_keys, args.batch_rows, args.dup_every
    i = F.col("id")
    build = i < n_live
    j = i - n_live  # row number among the measured rows
    batch = F.floor(j / size).cast("long")  # measured micro-batch number
    pos = F.pmod(j, F.lit(size))  # row number inside it
    ts = F.when(build, F.lit(base_ms) + F.floor(i * 600_000 / n_live).cast("long")).otherwise(
        F.lit(base_ms + 600_000) + batch * 1000 + F.floor(pos * 1000 / size).cast("long")
    )
    if every > 1:
        # an earlier row's number: a build-up row or one of an earlier measured micro-batch; if
        # that row was itself a duplicate, the new-key row just before it
        earlier = F.pmod(i * 2654435761, F.greatest(F.lit(n_live), F.lit(n_live) + batch * size))
        was_dup = (earlier >= n_live) & (
            F.pmod(F.pmod(earlier - n_live, F.lit(size)), F.lit(every)) == every - 1
        )
        earlier = F.when(was_dup, earlier - 1).otherwise(earlier)
        key_id = F.when(~build & (F.pmod(pos, F.lit(every)) == every - 1), earlier).otherwise(i)
    else:
        key_id = i

    def rows(start, end):
        return spark.range(start, end, 1, 1).select(
            F.concat(F.lit("k"), key_id.cast("string")).alias("key"),
            F.concat(F.lit("v"), i.cast("string")).alias("value"),
            F.timestamp_millis(ts).alias("timestamp"),
            F.pmod(key_id, F.lit(args.partitions)).cast("int").alias("partition"),
            i.alias("offset"),
        )

    step = max(1, args.build_rows)
    frames = [rows(start, min(n_live, start + step)) for start in range(0, n_live, step)]
    n_build = len(frames)
    frames += [rows(n_live + b * size, n_live + (b + 1) * size) for b in range(args.batches)]
    write_batches(spark, folder, frames)
    return n_build


def generate_realistic(spark, folder, args):
    """The demo's at-least-once stream (`kstreams_spark.demo_data`) at scale, as one Parquet file
    per micro-batch: unique event ids as keys, event times out of order by up to 2 s, producer
    replays of a send's tail (same record at a new offset), 1 in 500 events held back three
    micro-batches (minutes behind their partition). Returns the generator's account."""
    from kstreams_spark.demo_data import generate as generate_stream
    from pyspark.sql import functions as F

    json_folder = folder + "-json"
    made = generate_stream(
        json_folder, rows=args.realistic_rows, partitions=args.cold_partitions, files=args.realistic_batches
    )
    schema = "key STRING, value STRING, timestamp STRING, partition INT, offset LONG"
    frames = [
        spark.read.schema(schema)
        .json(os.path.join(json_folder, name))
        .select("key", "value", F.to_timestamp("timestamp").alias("timestamp"), "partition", "offset")
        for name in sorted(os.listdir(json_folder))
        if name.endswith(".json")
    ]
    write_batches(spark, folder, frames)
    shutil.rmtree(json_folder, ignore_errors=True)
    return made
