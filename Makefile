# Two commands: `make demo` and `make test`. Everything else is set up on demand and skipped when
# nothing changed: .venv (pinned pip packages), sbt (launcher from Maven Central), the jar (copied
# into the Python package), and the editable install of kstreams_spark.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SBT_VERSION := 1.12.14
SBT_LAUNCH := .tools/sbt-launch-$(SBT_VERSION).jar
VERSION := 0.1.0
JAR_NAME := kstreams-spark_2.13-$(VERSION).jar
JAR := python/kstreams_spark/jars/$(JAR_NAME)
KAFKA_CONNECTOR_DIR := python/kstreams_spark/jars/kafka
KAFKA_CONNECTOR := $(KAFKA_CONNECTOR_DIR)/.fetched
KAFKA_BROKER := .tools/kafka-broker/.fetched
SCALA_SRC := $(shell find jvm/src/main -name '*.scala' 2>/dev/null)
SCALA_TEST_SRC := $(shell find jvm/src/test -name '*.scala' 2>/dev/null)
# The Scala processor the Python crash test runs (tests/crash.py), from the sbt test classes.
CRASH_PROCESSORS := jvm/target/scala-2.13/test-classes/kstreams/CrashProcessors.class
SPARK_JARS = $(shell $(PY) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
# sbt reads only Maven Central (project/repositories); boot files stay in .tools.
SBT = SPARK_JARS=$(SPARK_JARS) java -Xms512m -Xmx2g -Xss4m \
	-Dsbt.repository.config=project/repositories -Dsbt.override.build.repos=true \
	-Dsbt.boot.directory=$(CURDIR)/.tools/sbt-boot -Dsbt.batch=true -Dsbt.color=false \
	-Dsbt.supershell=false -Dsbt.server.forcestart=false -Dsbt.ci=true \
	-jar $(SBT_LAUNCH)

.PHONY: all demo test test-scala test-python bench jar publish-local install clean kafka-connector kafka-broker
all: install

$(VENV)/.deps: requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

$(SBT_LAUNCH):
	mkdir -p .tools
	mvn -q -B dependency:copy -Dartifact=org.scala-sbt:sbt-launch:$(SBT_VERSION) -DoutputDirectory=.tools

# The built jar into the package, keeping its time (sbt rewrites it only when it changed), so that
# what depends on $(JAR) is not redone when nothing changed.
define copy-jar
	mkdir -p $(dir $(JAR))
	cmp -s jvm/target/scala-2.13/$(JAR_NAME) $(JAR) || \
		{ rm -f python/kstreams_spark/jars/*.jar && cp -p jvm/target/scala-2.13/$(JAR_NAME) $(JAR); }
endef

$(JAR): $(SBT_LAUNCH) $(VENV)/.deps build.sbt project/build.properties $(SCALA_SRC)
	$(SBT) package
	$(copy-jar)
	touch $(JAR)

jar: $(JAR)

# The library as a JVM dependency: kstreams-spark_2.13 with its POM (Spark and Kafka provided)
# into the local Maven repository (~/.m2), where Maven, Gradle (mavenLocal()) and sbt
# (Resolver.mavenLocal) builds find it; the manual, "Scala" gives the dependency lines.
PUBLISHED := $(HOME)/.m2/repository/io/github/kstreams-spark/kstreams-spark_2.13/$(VERSION)/kstreams-spark_2.13-$(VERSION).jar
$(PUBLISHED): $(JAR)
	$(SBT) root/publishM2
	touch $(PUBLISHED)

publish-local: $(PUBLISHED)

# The Spark Connect client's messages, generated from proto/ by the pinned grpcio-tools (the wheel
# ships the module; the server reads the same fields itself, kstreams.internal.connect).
CONNECT_PB2 := python/kstreams_spark/kstreams_connect_pb2.py
$(CONNECT_PB2): proto/kstreams_connect.proto $(VENV)/.deps
	$(PY) -m grpc_tools.protoc -Iproto --python_out=python/kstreams_spark proto/kstreams_connect.proto

$(VENV)/.installed: $(VENV)/.deps pyproject.toml $(JAR) $(CONNECT_PB2)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

install: $(VENV)/.installed $(KAFKA_CONNECTOR)

# One sbt launch packages the jar (for the Python tests after it) and runs the Scala tests.
test-scala: $(SBT_LAUNCH) $(VENV)/.deps
	$(SBT) package test
	$(copy-jar)
	$(mark-built-current)

# sbt leaves an unchanged jar and unchanged test classes as they were: mark both current, so that
# the rules for $(JAR) and $(CRASH_PROCESSORS) do not launch sbt once more
define mark-built-current
	if [ -n "$$(find build.sbt project/build.properties $(SCALA_SRC) -newer $(JAR))" ]; then touch $(JAR); fi
	touch -c $(CRASH_PROCESSORS)
endef

$(CRASH_PROCESSORS): $(JAR) $(SCALA_TEST_SRC)
	$(SBT) Test/compile
	touch $@

# The manual's blocks (README and docs/guide/) run once, from the wheel in a fresh venv (tests/test_packaging.py runs
# tests/test_readme.py there); by hand `pytest tests/test_readme.py` runs them in this venv.
# Every example in the package's docstrings runs too (namespace: conftest.py), in the same run
# and Spark session as the tests beside it.
PYTEST = $(PY) -m pytest -q --durations=20 --doctest-modules
PYTEST_ALL = tests python/kstreams_spark --ignore=tests/test_readme.py
test-python: install $(KAFKA_BROKER) $(CRASH_PROCESSORS) chromium $(PUBLISHED)
	$(PYTEST) $(PYTEST_ALL)

# Everything in two lanes at once, each about half the work, so that both cores stay busy to the
# end: alone, each suite leaves about a quarter of 2 cores idle (JVM starts, waits for a broker, a
# cluster, a real-time batch). Lane 1 runs the Scala suite, then the pytest files not in lane 2;
# lane 2 the pytest files that start other processes (a Kafka broker, Spark Connect, a standalone
# cluster, the CLI, the crash job), longest first, and one more that evens the lanes. A new test
# file goes to lane 1. Each lane's output is printed whole when it ends (--output-sync), so the two
# do not interleave. README gives the times.
# The real-time suite (RealTimeSpec) runs alone before the lanes, in the sbt launch that builds the
# jar and the test classes (52 s): its queries keep a task per slot polling for records, and in
# lane 1 beside lane 2's start-up its first test took 50 s and the crash test 335 s instead of
# 274: a fresh clone took 21 min 12 s against 18 min 51 s with the suite alone.
PYTEST_LANE_2 = tests/test_crash.py tests/test_connect.py tests/test_real_time.py tests/test_cli.py \
	tests/test_cluster.py tests/test_kafka_cli.py tests/test_packaging.py tests/test_exactly_once.py \
	tests/test_kafka.py tests/test_kafka_bad_input.py tests/test_kafka_dsl.py tests/test_processor.py
REAL_TIME_SUITE = kstreams.RealTimeSpec
# Before the lanes, also two at a time: on a fresh clone pip's download and install of the pinned
# packages (about a minute, one core mostly idle) leaves room for what the lanes fetch from Maven
# Central and Debian (test-fetch) and for scalafmt's and sbt's launchers; lint then runs beside
# sbt's compile.
test:
	$(MAKE) --no-print-directory -j2 --output-sync=target lint test-fetch test-build
	$(MAKE) --no-print-directory -j2 --output-sync=target test-lane-1 test-lane-2

.PHONY: test-build test-fetch test-lane-1 test-lane-2
test-fetch: $(KAFKA_BROKER) $(KAFKA_CONNECTOR) chromium

test-build: $(SBT_LAUNCH) $(VENV)/.deps
	$(SBT) package root/publishM2 Test/compile "testOnly $(REAL_TIME_SUITE)"
	$(copy-jar)
	$(mark-built-current)

# (sbt finds nothing to compile: test-build built it)
test-lane-1: install $(KAFKA_BROKER) $(CRASH_PROCESSORS) chromium
	KSTREAMS_SKIP_SUITES=$(REAL_TIME_SUITE) $(SBT) test
	$(PYTEST) $(PYTEST_ALL) $(addprefix --ignore=,$(PYTEST_LANE_2))

test-lane-2: install $(KAFKA_BROKER) $(CRASH_PROCESSORS)
	$(PYTEST) $(PYTEST_LANE_2)

# Formatting and lint, pinned: ruff (requirements-dev.txt, settings in pyproject.toml) and
# scalafmt (jvm/scalafmt-pom.xml, settings in .scalafmt.conf). `make test` checks, `make fmt` fixes.
SCALAFMT_CP := .tools/scalafmt.classpath
SCALAFMT = java -cp "$$(cat $(SCALAFMT_CP))" org.scalafmt.cli.Cli
$(SCALAFMT_CP): jvm/scalafmt-pom.xml
	mkdir -p .tools
	mvn -q -B -f jvm/scalafmt-pom.xml dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$@

.PHONY: lint fmt
lint: $(VENV)/.deps $(SCALAFMT_CP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(SCALAFMT) --test

fmt: $(VENV)/.deps $(SCALAFMT_CP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
	$(SCALAFMT)

# The Kafka Streams conformance suite on more seeds than `make test` runs (0-39), e.g.
# `make conformance SEEDS=0-499` or `SEEDS=7,42`.
.PHONY: conformance
SEEDS ?= 0-199
conformance: $(JAR)
	KSTREAMS_CONFORMANCE_SEEDS="$(SEEDS)" $(SBT) "testOnly kstreams.conformance.ConformanceSpec"

# The crash test (tests/test_crash.py, also part of test-python) as a longer soak: more kills on a
# longer stream, every operator from both sources, e.g. `make test-crash CRASH_KILLS=20`.
.PHONY: test-crash
CRASH_KILLS ?= 9
CRASH_EVENTS ?= 60
CRASH_BATCHES ?= 6
test-crash: install $(KAFKA_BROKER) $(CRASH_PROCESSORS)
	CRASH_BOTH_SOURCES=1 CRASH_KILLS=$(CRASH_KILLS) CRASH_EVENTS=$(CRASH_EVENTS) CRASH_BATCHES=$(CRASH_BATCHES) \
		$(PY) -m pytest -q -s tests/test_crash.py

# Only the standalone-cluster test (also part of test-python): `pytest -m "not cluster"` skips it.
.PHONY: test-cluster
test-cluster: install
	$(PY) -m pytest -q -m cluster tests

# The manual: README and the guide's pages (docs/guide/), the contract, the benchmark results, the Python API
# reference (from the docstrings) and the Scaladoc, as a static site in site/ (open site/index.html);
# then two pages opened in headless Chromium (Debian's package, installed here when missing) and
# their screenshots checked to show a rendered page (docs/check_render.py).
.PHONY: docs
docs: install chromium
	$(SBT) doc
	$(PY) docs/build_site.py --out site --scaladoc jvm/target/scala-2.13/api
	$(PY) docs/check_render.py site index.html api.html

# Debian's Chromium, for the manual's rendering check (docs/check_render.py; tests/test_docs.py)
.PHONY: chromium
chromium:
	command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

demo: install
	$(VENV)/bin/kstreams-spark demo

$(VENV)/.bench-deps: $(VENV)/.deps requirements-bench.txt
	$(PY) -m pip install -q -r requirements-bench.txt
	touch $@

# PyFlink pins its own py4j, so it gets a virtualenv of its own.
# With Flink's Parquet format and the Hadoop client it reads files with (benchmarks/flink_dedup.py
# reads the Spark candidates' Parquet files).
FLINK_JARS := .venv-flink/jars/.fetched
.venv-flink/.deps: requirements-flink.txt $(FLINK_JARS)
	test -x .venv-flink/bin/python || $(PYTHON) -m venv .venv-flink
	.venv-flink/bin/python -m pip install -q -r requirements-flink.txt
	touch $@

$(FLINK_JARS):
	for a in org.apache.flink:flink-sql-parquet:2.3.0 org.apache.hadoop:hadoop-client-api:3.3.6 \
		org.apache.hadoop:hadoop-client-runtime:3.3.6; do \
		mvn -q -B dependency:copy -Dartifact=$$a -DoutputDirectory=$(CURDIR)/$(dir $@) || exit 1; done
	touch $@

# The benchmark-only classes (kstreams.bench: TwsFloor, DedupLimit), out of the shipped jar.
BENCH_JAR := jvm-bench/target/scala-2.13/kstreams-spark-bench_2.13-$(VERSION).jar
$(BENCH_JAR): $(JAR) $(shell find jvm-bench/src -name '*.scala' 2>/dev/null)
	$(SBT) bench/package

# Every regime in turn (default, cold, realistic, long, catchup, global, kafka_sink: bench --regime all), each in a
# JVM of its own, the scaling series (bench --scaling, about 20 minutes), then the latency regime
# (benchmarks/latency.py: a job process per run).
# BENCH_ARGS="--rows 200000 --keys 150000 --live-keys 100000,300000" for a quick run.
bench: install $(BENCH_JAR) $(VENV)/.bench-deps .venv-flink/.deps $(KAFKA_BROKER)
	$(PY) benchmarks/bench --regime all $(BENCH_ARGS)
	$(PY) benchmarks/bench --scaling
	$(PY) benchmarks/latency.py
	$(PY) benchmarks/latency.py $(LATENCY_LONG_BATCHES)
	$(PY) benchmarks/cli_mistakes.py
	$(PY) benchmarks/dsl.py

# The time from `kstreams-spark` with a mistake to its one-line error, for each mistake it checks
# before Spark starts.
bench-cli: install
	$(PY) benchmarks/cli_mistakes.py

# The DSL regimes (benchmarks/dsl.py): a windowed count and a stream-stream join, kstreams against
# Spark's, a process per candidate and round; BENCH_ARGS="--before-jar JAR" adds kstreams on an
# earlier build's jar, BENCH_ARGS="--workload join" runs one of the two.
bench-dsl: install $(VENV)/.bench-deps
	$(PY) benchmarks/dsl.py $(BENCH_ARGS)

# One regime at a time.
.PHONY: bench-default bench-cold bench-realistic bench-long bench-catchup bench-global bench-scaling bench-kafka_sink bench-tune bench-cli bench-dsl bench-latency bench-latency-long-batches scale-test
bench-default: install $(BENCH_JAR) $(VENV)/.bench-deps .venv-flink/.deps
	$(PY) benchmarks/bench --regime default $(BENCH_ARGS)

bench-cold bench-realistic bench-long bench-catchup bench-global: bench-%: install $(BENCH_JAR) $(VENV)/.bench-deps
	$(PY) benchmarks/bench --regime $* $(BENCH_ARGS)

# The scaling series: 1M to 16M rows and 10,000 to 10M keys, every count checked (about 20 minutes).
bench-scaling: install $(BENCH_JAR) $(VENV)/.bench-deps
	$(PY) benchmarks/bench --scaling $(BENCH_ARGS)

bench-kafka_sink: install $(BENCH_JAR) $(VENV)/.bench-deps $(KAFKA_BROKER)
	$(PY) benchmarks/bench --regime kafka_sink $(BENCH_ARGS)

# Kafka -> dedup -> Kafka end-to-end latency p50/p90/p99, kstreams and Spark's dedup, real-time
# and micro-batch (benchmarks/latency.py: a job process per run, the tests' broker), e.g.
# BENCH_ARGS="--rates 1000 --duration 10 --rounds 1" for a quick run, "--sustain" for the highest
# sustained rate too (long). bench-latency-long-batches: the real-time candidates at the default
# batch duration, 5 minutes (no batch boundary within a run: records while a batch runs), into
# results/latency-5min.json; `make bench` runs both.
LATENCY_LONG_BATCHES = --only kstreams_real_time,spark_real_time --rates 1000,10000,20000 \
	--batch-duration "5 minutes" --no-update --json benchmarks/results/latency-5min.json
bench-latency: install $(VENV)/.bench-deps $(KAFKA_BROKER)
	$(PY) benchmarks/latency.py $(BENCH_ARGS)

bench-latency-long-batches: install $(VENV)/.bench-deps $(KAFKA_BROKER)
	$(PY) benchmarks/latency.py $(LATENCY_LONG_BATCHES)

# The RocksDB settings experiment behind bench's SPARK_ROCKSDB_CONF and KSTREAMS_CONF (long
# regime at small sizes, every variant; narrow it with BENCH_ARGS="--tune-variants defaults,changelog").
bench-tune: install $(BENCH_JAR)
	$(PY) benchmarks/bench --regime long --tune --no-update --live-keys 200000,500000 --batches 8 $(BENCH_ARGS)

# By hand, not part of `make test`: kstreams alone, 2 GB driver, 10M against 1M live keys (1-hour
# interval); PASS if ms per 20,000-row micro-batch grows at most 1.3x, exit code 1 on FAIL.
scale-test: install $(BENCH_JAR)
	$(PY) benchmarks/bench --regime scale $(BENCH_ARGS)

clean:
	rm -rf jvm/target jvm-bench/target project/target project/project $(VENV) .tools python/kstreams_spark/jars/*.jar demo-output
	rm -rf $(KAFKA_CONNECTOR_DIR)

# Spark's Kafka connector, bundled with the package (jvm/kafka/connector-pom.xml says which jars
# and why those versions); configure_spark puts every jar of that folder on the classpath.
$(KAFKA_CONNECTOR): jvm/kafka/connector-pom.xml
	rm -rf $(KAFKA_CONNECTOR_DIR)
	mkdir -p $(KAFKA_CONNECTOR_DIR)
	mvn -q -B -f jvm/kafka/connector-pom.xml dependency:copy -DoutputDirectory=$(CURDIR)/$(KAFKA_CONNECTOR_DIR)
	touch $@

kafka-connector: $(KAFKA_CONNECTOR)

# The tests' Kafka broker (tests/kafka_broker.py starts it): kafka_2.13 and its runtime jars.
$(KAFKA_BROKER): tests/kafka_broker-pom.xml
	rm -rf $(dir $(KAFKA_BROKER))
	mkdir -p $(dir $(KAFKA_BROKER))
	mvn -q -B -f tests/kafka_broker-pom.xml dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory=$(CURDIR)/$(dir $(KAFKA_BROKER))
	touch $@

kafka-broker: $(KAFKA_BROKER)
