"""The PyFlink candidate of benchmarks/bench: keep-first dedup per key (ROW_NUMBER) over the default
regime's Parquet files (the same input the Spark candidates read), Flink local mode, parallelism 2,
state TTL equal to the dedup interval, blackhole sink. Run by benchmarks/bench in its own
virtualenv (apache-flink pins a py4j that differs from pyspark's), with the jars of JARS_FOLDER
(Flink's Parquet format and the Hadoop client it reads files with, which `make .venv-flink/.deps`
fetches from Maven Central):

    python flink_dedup.py PARQUET_FOLDER ROWS TTL_MS JARS_FOLDER [--count OUTPUT_FOLDER]
        ->  prints {"rows_per_s": ..., "seconds": ...}

With --count OUTPUT_FOLDER the forwarded rows go to CSV files there instead of the blackhole sink
(with checkpoints every second: Flink's file sink commits its files on a checkpoint, the last one
when the input ends), and "forwarded" (their lines) is printed too: the check run, not timed
against the others (writing costs what the blackhole does not).

Its rule is not KIP-655's: Flink keeps a key's first row and forgets the key TTL_MS of processing
time after it was last written (`table.exec.state.ttl`), whatever the rows' event times say. That
is the closest a Flink SQL user gets to a dedup interval; the regime's table labels the row so.
"""

import json
import os
import sys
import time

from pyflink.table import EnvironmentSettings, TableEnvironment


def main(folder: str, rows: int, ttl_ms: int, jars: str, output: str | None = None) -> None:
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("parallelism.default", "2")
    jar_urls = [
        f"file://{os.path.join(jars, name)}" for name in sorted(os.listdir(jars)) if name.endswith(".jar")
    ]
    config.set("pipeline.jars", ";".join(jar_urls))
    config.set("table.exec.state.ttl", f"{ttl_ms} ms")
    # the rows' timestamp column is left out: keep-first orders by processing time, and Spark
    # writes it as INT96, which this rule never reads
    env.execute_sql(f"""
        CREATE TABLE events (
            `key` STRING, `value` STRING, `partition` INT, `offset` BIGINT,
            proc AS PROCTIME()
        ) WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'parquet')""")
    if output:
        config.set("execution.checkpointing.interval", "1 s")
    sink = (
        f"'connector' = 'filesystem', 'path' = '{output}', 'format' = 'csv'"
        if output
        else "'connector' = 'blackhole'"
    )
    env.execute_sql(f"""
        CREATE TABLE sink (`key` STRING, `value` STRING)
        WITH ({sink})""")
    dedup = """
        SELECT `key`, `value` FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY `key` ORDER BY proc ASC) AS rn FROM events)
        WHERE rn = 1"""
    started = time.perf_counter()
    env.execute_sql("INSERT INTO sink" + dedup).wait()
    seconds = time.perf_counter() - started
    result = {}
    if output:  # committed files only: a file not committed starts with "."
        files = [
            os.path.join(r, n) for r, _, names in os.walk(output) for n in names if not n.startswith(".")
        ]
        result["forwarded"] = sum(1 for f in files for _ in open(f, encoding="utf-8"))
    print(json.dumps({"rows_per_s": rows / seconds, "seconds": seconds, **result}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], *sys.argv[6:7])
