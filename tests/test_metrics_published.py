"""the manual, "Metrics": each operator's counters published through Spark's metrics system, scraped
from the driver's Prometheus endpoint of a running local query (Spark's PrometheusServlet). In a
process of its own: the metrics sinks and the web UI they are served on are set when a
SparkContext starts, and the tests' shared session runs without a UI."""

import os
import subprocess
import sys

SCRIPT = r"""
import os, re, socket, sys, tempfile, time, urllib.request
sys.path.insert(0, {tests!r})
from kstreams_spark import KStream
from local_spark import local_spark
from streams import Rec, StreamRun, with_offsets

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
spark = local_spark("metrics", **{{
    "spark.ui.enabled": "true",
    "spark.ui.port": str(port),
    "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
}})
root = tempfile.mkdtemp()
run = StreamRun(spark, root, lambda d: d)
# micro-batch 0: a@1 forwarded, a@2 a duplicate, b@3 forwarded; 1: a@20 forwarded (a@1's entry
# expired), then b@4, 16 s behind the partition's stream time (20): b@3's entry expired too, so it
# is forwarded (late, which the default policy forwards). The count after the dedup updates a and b
# twice each.
run.add_batch(with_offsets([Rec("a", 1), Rec("a", 2), Rec("b", 3)]))
run.add_batch([Rec("a", 20, offset=3), Rec("b", 4, offset=4)])
source = spark.readStream.schema(run.schema).option("maxFilesPerTrigger", 1).json(os.path.join(root, "in"))
deduped = KStream(source).deduplicate_by_key("10 seconds")
counts = deduped.group_by_key().count().to_stream().df
query = counts.writeStream.format("memory").queryName("dedup_counts").start()
query.processAllAvailable()


def scrape():
    text = urllib.request.urlopen(f"http://127.0.0.1:{{port}}/metrics/prometheus").read().decode()
    return sorted(
        re.sub(r"^metrics_[^_]+_[0-9]+_driver_", "", line)
        for line in text.splitlines()
        if "_driver_kstreams_" in line
    )


deadline = time.time() + 60
def both_batches_read():
    return any(line.startswith("kstreams_dedup_counts_count_forwarded_Count") and line.endswith(" 4") for line in scrape())


while time.time() < deadline and not both_batches_read():
    time.sleep(0.2)  # the listener reads each progress after the micro-batch, on the listener bus
print("RUNNING", scrape())
query.stop()
while time.time() < deadline and scrape():
    time.sleep(0.2)
print("STOPPED", scrape())
"""


def test_the_counters_of_a_running_query_are_scraped_from_prometheus():
    tests = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(tests=tests)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = {line.split(" ", 1)[0]: eval(line.split(" ", 1)[1]) for line in done.stdout.splitlines()}
    assert lines["RUNNING"] == [
        'kstreams_dedup_counts_count_forwarded_Count{type="counters"} 4',
        'kstreams_dedup_counts_count_idempotent_updates_dropped_Count{type="counters"} 0',
        'kstreams_dedup_counts_count_late_dropped_Count{type="counters"} 0',
        'kstreams_dedup_counts_count_null_keys_dropped_Count{type="counters"} 0',
        'kstreams_dedup_counts_count_null_values_dropped_Count{type="counters"} 0',
        'kstreams_dedup_counts_deduplicate_by_key_duplicates_dropped_Count{type="counters"} 1',
        'kstreams_dedup_counts_deduplicate_by_key_forwarded_Count{type="counters"} 4',
    ]
    assert lines["STOPPED"] == []  # removed with the query, as Spark's own source is
