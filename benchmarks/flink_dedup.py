"""The PyFlink candidate of bench.py: keep-first dedup per key (ROW_NUMBER) over the benchmark rows
as CSV, Flink local mode, parallelism 2, blackhole sink. Run by bench.py in its own virtualenv
(apache-flink pins a py4j that differs from pyspark's):

    python flink_dedup.py CSV_FOLDER ROWS   ->  prints {"rows_per_s": ..., "seconds": ...}
"""

import json
import sys
import time

from pyflink.table import EnvironmentSettings, TableEnvironment


def main(folder: str, rows: int) -> None:
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", "2")
    env.execute_sql(f"""
        CREATE TABLE events (
            `key` STRING, `value` STRING, ts_ms BIGINT, `partition` INT, `offset` BIGINT,
            proc AS PROCTIME()
        ) WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv')""")
    env.execute_sql("""
        CREATE TABLE sink (`key` STRING, `value` STRING, ts_ms BIGINT)
        WITH ('connector' = 'blackhole')""")
    started = time.perf_counter()
    env.execute_sql("""
        INSERT INTO sink
        SELECT `key`, `value`, ts_ms FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY `key` ORDER BY proc ASC) AS rn FROM events)
        WHERE rn = 1""").wait()
    seconds = time.perf_counter() - started
    print(json.dumps({"rows_per_s": rows / seconds, "seconds": seconds}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
