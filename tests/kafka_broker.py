"""A real single-node Apache Kafka broker (KRaft, broker and controller in one JVM) for the tests.

The jars come from Maven Central through ``make kafka-broker`` (``tests/kafka_broker-pom.xml``:
kafka_2.13 3.9.2 with its runtime dependencies, copied into ``.tools/kafka-broker``); ``make test``
fetches them first, and the fixture runs that target itself if they are missing. The broker
listens on 127.0.0.1 on free ports, keeps its logs in a temp dir, and is stopped by ``stop()``.
"""

from __future__ import annotations

import base64
import glob
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKER_JARS = os.path.join(REPO, ".tools", "kafka-broker")
# Broker JVM: small heap, quick start (C1 only), few threads: the machine has 2 shared cores.
JVM_OPTS = [
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
]


def _cluster_id() -> str:
    """A random KRaft cluster id: 22 url-safe base64 characters of a UUID.

    One that starts with "-" is drawn again, as Kafka's own `Uuid.randomUuid` does: the storage
    tool's argument parser would read it as an option ("--cluster-id: expected one argument"),
    which failed about one broker start in 64.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[:22]
        if not cluster_id.startswith("-"):
            return cluster_id


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _classpath() -> str:
    """The broker's classpath; fetches the jars (`make kafka-broker`) when pytest runs on its own."""
    if not os.path.exists(os.path.join(BROKER_JARS, ".fetched")):
        fetch = subprocess.run(
            ["make", "-C", REPO, "kafka-broker"], capture_output=True, text=True, timeout=600
        )
        if fetch.returncode != 0:
            raise RuntimeError(f"`make kafka-broker` failed:\n{fetch.stdout[-2000:]}\n{fetch.stderr[-2000:]}")
    if not glob.glob(os.path.join(BROKER_JARS, "kafka_2.13-*.jar")):
        raise RuntimeError(f"no Kafka broker jars in {BROKER_JARS}; run `make kafka-broker`")
    return os.path.join(BROKER_JARS, "*")


@dataclass
class KafkaBroker:
    """One broker process; ``bootstrap`` is ``127.0.0.1:<port>``."""

    root: str
    port: int = 0
    controller_port: int = 0
    process: subprocess.Popen | None = None
    log_path: str = ""
    _admin: object = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> KafkaBroker:
        self.port, self.controller_port = free_port(), free_port()
        data = os.path.join(self.root, "data")
        os.makedirs(data, exist_ok=True)
        config = os.path.join(self.root, "server.properties")
        with open(config, "w") as f:
            f.write(
                "\n".join(
                    [
                        "process.roles=broker,controller",
                        "node.id=1",
                        f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                        f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                        f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                        "controller.listener.names=CONTROLLER",
                        "inter.broker.listener.name=PLAINTEXT",
                        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                        f"log.dirs={data}",
                        "num.network.threads=2",
                        "num.io.threads=2",
                        "background.threads=2",
                        "offsets.topic.replication.factor=1",
                        "offsets.topic.num.partitions=1",
                        "transaction.state.log.replication.factor=1",
                        "transaction.state.log.min.isr=1",
                        "group.initial.rebalance.delay.ms=0",
                        "auto.create.topics.enable=false",
                        # records with timestamps far in the past are part of the tests: keep everything
                        "log.retention.ms=-1",
                        "",
                    ]
                )
            )
        cluster_id = _cluster_id()
        java = ["java", *JVM_OPTS, "-cp", _classpath()]
        fmt = subprocess.run(
            [*java, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", config],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka storage format failed:\n{fmt.stdout}\n{fmt.stderr}")
        self.log_path = os.path.join(self.root, "broker.log")
        log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [*java, "kafka.Kafka", config], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self._wait_ready(timeout)
        return self

    @classmethod
    def attach(cls, bootstrap: str) -> KafkaBroker:
        """A handle to a broker another process started and stops (``stop`` leaves it running)."""
        host, port = bootstrap.rsplit(":", 1)
        assert host == "127.0.0.1", bootstrap
        from confluent_kafka.admin import AdminClient

        broker = cls(root="", port=int(port))
        broker._admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        return broker

    def _wait_ready(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the Kafka broker exited with {self.process.returncode}:\n" + self.log_tail()
                )
            try:
                # log_level 0: no "connection refused" lines while the broker is starting
                admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
                metadata = admin.list_topics(timeout=2)
                if metadata.brokers:
                    self._admin = admin
                    return
            except Exception:  # not up yet
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the Kafka broker did not start within {timeout:.0f} s:\n" + self.log_tail())

    def log_tail(self, chars: int = 4000) -> str:
        try:
            with open(self.log_path) as f:
                return f.read()[-chars:]
        except OSError:
            return ""

    def create_topic(self, name: str, partitions: int = 4) -> str:
        from confluent_kafka.admin import NewTopic

        futures = self._admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        futures[name].result(timeout=30)
        return name

    def stop(self) -> None:
        self._admin = None  # its background thread would log "connection refused" from now on
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None


@dataclass(frozen=True)
class KafkaRecord:
    """A record as the broker stored it."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    partition: int
    offset: int
    headers: tuple = ()


def produce(bootstrap: str, topic: str, records: Iterable[tuple]) -> None:
    """Sends ``(partition, key, value, timestamp_ms)`` tuples in order and waits for every ack.

    Keys and values are ``str``, ``bytes`` or ``None``. Order per partition is kept (one in flight).
    """
    from confluent_kafka import Producer

    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "max.in.flight.requests.per.connection": 1,
            "enable.idempotence": False,
        }
    )
    for partition, key, value, ts in records:
        producer.produce(
            topic, key=key, value=value, partition=partition, timestamp=ts, on_delivery=on_delivery
        )
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or errors:
        raise RuntimeError(f"produce to {topic}: {remaining} not delivered, errors {errors[:3]}")


def read_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> list[KafkaRecord]:
    """Every record of ``topic`` from offset 0 to the current end, in (partition, offset) order."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {}
        for p in partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[KafkaRecord] = []
        done = {p for p, high in ends.items() if high == 0}
        deadline = time.time() + timeout
        while len(done) < len(ends):
            if time.time() > deadline:
                raise RuntimeError(f"reading {topic} timed out at {len(out)} records, ends {ends}")
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise RuntimeError(f"reading {topic}: {msg.error()}")
            if msg.offset() < ends[msg.partition()]:
                out.append(_record(msg))
            if msg.offset() >= ends[msg.partition()] - 1:
                done.add(msg.partition())
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def _record(msg) -> KafkaRecord:
    return KafkaRecord(
        msg.key(), msg.value(), msg.timestamp()[1], msg.partition(), msg.offset(), tuple(msg.headers() or ())
    )


def read_committed(bootstrap: str, topic: str, timeout: float = 60.0) -> list[KafkaRecord]:
    """What a ``read_committed`` consumer reads of ``topic`` up to its current end (a written
    topic's last offsets may be transaction markers, which no consumer receives), in (partition,
    offset) order, with the records of aborted transactions left out."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        tps = [TopicPartition(topic, p, 0) for p in partitions]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions
        }
        consumer.assign(tps)
        out: list[KafkaRecord] = []
        deadline = time.time() + timeout
        while True:
            positions = {tp.partition: tp.offset for tp in consumer.position(tps)}
            if all(ends[p] == 0 or positions[p] >= ends[p] for p in partitions):
                break
            if time.time() > deadline:
                raise RuntimeError(
                    f"reading {topic} timed out at {len(out)} records, ends {ends}, at {positions}"
                )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    continue
                raise RuntimeError(f"reading {topic}: {msg.error()}")
            out.append(_record(msg))
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


class EndOffsets:
    """Watches how many records a topic holds (the sum of its partitions' end offsets)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer

        self.topic = topic
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4()}"})
        self._partitions = list(self._consumer.list_topics(topic, timeout=10).topics[topic].partitions)

    def total(self) -> int:
        from confluent_kafka import TopicPartition

        return sum(
            self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
            for p in self._partitions
        )

    def close(self) -> None:
        self._consumer.close()


def topic_sizes(records: Sequence[KafkaRecord]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for r in records:
        sizes[r.partition] = sizes.get(r.partition, 0) + 1
    return sizes
