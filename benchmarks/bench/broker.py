"""The tests' Kafka broker for the regimes that write to or read from Kafka (kafka_sink here, and
benchmarks/latency.py)."""

from __future__ import annotations

import os
import sys

from bench import REPO


def start_broker(workdir):
    """The tests' Kafka broker (tests/kafka_broker.py: pinned jars, 127.0.0.1, free ports), started."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from kafka_broker import KafkaBroker

    return KafkaBroker(os.path.join(workdir, "broker")).start()
