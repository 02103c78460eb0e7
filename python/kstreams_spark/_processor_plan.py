"""Planning of Python processors: checks the arguments, prepares each source on the JVM
(``kstreams.PythonAPI.processorInput``: grouped by input partition, in offset order, timestamp
without watermark metadata) and runs :class:`~kstreams_spark._processor_runtime.Runner` over it
with Spark's ``transformWithState``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from pyspark.sql.types import DataType, IntegerType, LongType, StructField, StructType

from kstreams_spark._columns import quote
from kstreams_spark._processor_runtime import (
    FORWARD_TS,
    GROUP,
    KEY,
    ORDER,
    PARTITION,
    SINK,
    SOURCE,
    TIMESTAMP_MICROS,
    TOPIC,
    VALUE,
    NodeSpec,
    Runner,
)
from kstreams_spark.errors import KStreamsError
from kstreams_spark.processor import Processor, StoreSpec


def supplier_of(supplier: Any) -> Callable[[], Processor]:
    """A processor class or a zero-argument callable returning a new processor."""
    if isinstance(supplier, Processor):
        raise KStreamsError(
            "process takes a supplier (the processor class, or a function returning a new "
            f"processor), not an instance: got {type(supplier).__name__} instance; pass "
            f"{type(supplier).__name__} or lambda: {type(supplier).__name__}(...)"
        )
    if not callable(supplier) or (
        isinstance(supplier, type) and not callable(getattr(supplier, "process", None))
    ):
        raise KStreamsError(
            f"process takes a processor class (with a process(record) method, e.g. a subclass of "
            f"kstreams_spark.Processor) or a function returning a processor, got {type(supplier).__name__} "
            f"{supplier!r}"
        )
    return supplier


def check_stores(stores: Iterable[StoreSpec]) -> list[str]:
    """The names of the declared ``stores``, each checked to be a spec, once."""
    if isinstance(stores, (StoreSpec, str)) or not isinstance(stores, Iterable):
        raise KStreamsError(
            f"stores must be a list of Stores.key_value(...) specs, e.g. stores=[Stores.key_value('seen')], got {stores!r}"
        )
    stores = list(stores)
    for s in stores:
        if not isinstance(s, StoreSpec):
            raise KStreamsError(f"stores must be Stores.key_value(...) specs, got {s!r}")
    names = [s.name for s in stores]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise KStreamsError(f"store names must be unique; declared more than once: {', '.join(twice)}")
    return names


def normalized_input(stream, source: int, checked=()):
    """The stream's rows as the runner reads them, grouped by input partition in arrival order
    (prepared by the JVM, ``kstreams.PythonAPI.processorInput``), with the source's index (its
    place in name order). With
    ``checked``, the processors (``NodeSpec``s) the input feeds, a streaming query over it is
    checked against its checkpoint as it starts: their names and stores, which decide the state a
    record meets (their code may change, as in Kafka Streams), must be the checkpoint's."""
    from pyspark.sql import functions as F

    from kstreams_spark._jvm import door, python_dataframe

    names = stream._names
    spark = stream.df.sparkSession
    processors = json.dumps([n.name for n in checked])
    stores = json.dumps([store for n in checked for store in n.stores])
    prepared = python_dataframe(door(spark).processorInput(stream._j, processors, stores), spark)
    fields = {f.name: f for f in prepared.schema.fields}
    topic = (
        F.col("topic")
        if "topic" in fields and fields["topic"].dataType.simpleString() == "string"
        else F.lit(None).cast("string")
    )
    offset = names["offset"]
    helpers = json.loads(door(spark).processorInputColumns())  # the JVM's names, not copies
    return prepared.select(
        F.col(quote(names["key"])).alias(KEY),
        F.col(quote(names["value"])).alias(VALUE),
        topic.alias(TOPIC),
        F.lit(source).cast("int").alias(SOURCE),
        F.col(quote(helpers["group"])).alias(GROUP),
        F.col(quote(helpers["partition"])).alias(PARTITION),
        F.col(quote(helpers["order"])).alias(ORDER),
        F.col(quote(helpers["timestampMicros"])).alias(TIMESTAMP_MICROS),
    ), offset is not None and offset in fields


# What pyspark 4.3.0's transformWithState needs in the driver and the Python workers (its own
# minimums, pyspark/sql/pandas/utils.py): checked here so that a plain `pip install kstreams-spark`
# hears which extra to install, not pyspark's "Pandas >= 2.2.0 must be installed".
WORKER_PACKAGES = {"pandas": (2, 2, 0), "pyarrow": (18, 0, 0)}


def _version_tuple(version: str) -> tuple[int, ...]:
    """The leading numbers of a version: "2.2.0rc1" -> (2, 2, 0)."""
    return tuple(int(n) for n in re.match(r"\d+(?:\.\d+)*", version).group(0).split(".")[:3])


def check_worker_packages() -> None:
    """Raises a KStreamsError naming the ``processor`` extra when pandas or pyarrow is missing or
    older than pyspark's minimum."""
    import importlib

    problems = []
    for name, minimum in WORKER_PACKAGES.items():
        wanted = ".".join(map(str, minimum))
        try:
            version = importlib.import_module(name).__version__
        except ImportError:
            problems.append(f"{name} is not installed")
            continue
        if _version_tuple(version) < minimum:
            problems.append(f"{name} is {version}, older than {wanted}")
    if problems:
        raise KStreamsError(
            "Python processors run on pyspark's transformWithState, which needs pandas >= 2.2.0 and "
            f"pyarrow >= 18.0.0 in the driver and the Python workers ({'; '.join(problems)}): "
            "pip install 'kstreams-spark[processor]'"
        )


def run(
    inputs, nodes, source_children, timestamp_name, has_offset, key_type, value_type, output_names, wall_clock
):
    """Plans the runner over the union of ``inputs`` (normalized DataFrames)."""
    check_worker_packages()
    df = inputs[0]
    for other in inputs[1:]:
        try:
            df = df.unionByName(other)
        except Exception as e:
            raise KStreamsError(f"sources must have the same key and value types: {e}") from None
    output = StructType(
        [
            StructField(SINK, string_type(), True),
            StructField(output_names[0], key_type, True),
            StructField(output_names[1], value_type, True),
            StructField(FORWARD_TS, LongType(), False),
            StructField(output_names[2], IntegerType(), False),
            StructField(output_names[3], LongType(), True),
        ]
    )
    runner = Runner(
        nodes,
        source_children,
        timestamp_name,
        has_offset,
        (SINK, output_names[0], output_names[1], FORWARD_TS, output_names[2], output_names[3]),
        output_names[2],
        (key_type, value_type),
    )
    return df.groupBy(GROUP).transformWithState(
        runner, output, "Append", "ProcessingTime" if wall_clock else "None"
    )


def string_type():
    from pyspark.sql.types import StringType

    return StringType()


def check_types(key_type, value_type) -> None:
    """``key_type`` and ``value_type``, each None or a pyspark ``DataType``."""
    for what, given in (("key_type", key_type), ("value_type", value_type)):
        if given is not None and not isinstance(given, DataType):
            raise KStreamsError(
                f"{what} must be a pyspark DataType such as StringType() or LongType() (from "
                f"pyspark.sql.types), got {given!r}"
            )


def process(
    stream,
    supplier: Any,
    stores: Iterable[StoreSpec] = (),
    name: str | None = None,
    wall_clock: bool = False,
    key_type=None,
    value_type=None,
):
    """Implementation of :meth:`kstreams_spark.KStream.process` (which documents it)."""
    from pyspark.sql import functions as F

    supplier = supplier_of(supplier)
    store_names = check_stores(stores)
    check_types(key_type, value_type)
    if name is not None and not isinstance(name, str):
        raise KStreamsError(f"name must be a str (it names the processor in errors), got {name!r}")
    df = stream.df
    if wall_clock and not df.isStreaming:
        raise KStreamsError(
            "wall-clock punctuation runs on Spark's processing-time timers, which "
            "need a streaming DataFrame; drop wall_clock=True for a batch DataFrame"
        )
    names = stream._names
    if name is None:
        name = getattr(supplier, "__name__", None) or type(supplier).__name__
    node = NodeSpec(name, supplier, store_names, children=[], sinks=[None])
    normalized, has_offset = normalized_input(stream, 0, [node])
    fields = {f.name: f for f in normalized.schema.fields}
    partition_name = names["partition"] or "partition"
    offset_name = names["offset"] or "offset"
    processed = run(
        [normalized],
        [node],
        [[0]],
        names["timestamp"],
        has_offset,
        key_type or fields[KEY].dataType,
        value_type or fields[VALUE].dataType,
        (names["key"], names["value"], partition_name, offset_name),
        wall_clock,
    )
    return processed.select(
        F.col(quote(names["key"])),
        F.col(quote(names["value"])),
        F.timestamp_micros(F.col(FORWARD_TS)).alias(names["timestamp"]),
        F.col(quote(partition_name)),
        F.col(quote(offset_name)),
    )
