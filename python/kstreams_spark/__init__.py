"""kstreams-spark: Kafka Streams semantics on Spark Structured Streaming.

>>> from kstreams_spark import KStream, configure_spark
>>> spark = configure_spark(SparkSession.builder.master("local[2]")).getOrCreate()
>>> KStream(df).deduplicate_by_key("10 seconds").df.count()
4
"""

from kstreams_spark._jars import jar_path
from kstreams_spark.errors import KStreamsError, KStreamsQueryError
from kstreams_spark.grouped import (
    KGroupedStream,
    SessionWindowedKStream,
    TimeWindowedKStream,
    WindowedKStream,
)
from kstreams_spark.kstream import BranchedKStream, KStream
from kstreams_spark.ktable import KTable
from kstreams_spark.metrics import operator_metrics
from kstreams_spark.processor import (
    KeyValueStore,
    Processor,
    ProcessorContext,
    PunctuationType,
    Record,
    Stores,
)
from kstreams_spark.session import configure_spark
from kstreams_spark.state import checkpoint_operators, read_state, repartition_state
from kstreams_spark.topology import Topology
from kstreams_spark.windows import JoinWindows, SessionWindows, TimeWindows

__all__ = [
    "BranchedKStream",
    "JoinWindows",
    "KTable",
    "KGroupedStream",
    "KStream",
    "KStreamsError",
    "KStreamsQueryError",
    "KeyValueStore",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Record",
    "Stores",
    "SessionWindows",
    "SessionWindowedKStream",
    "TimeWindows",
    "TimeWindowedKStream",
    "Topology",
    "WindowedKStream",
    "checkpoint_operators",
    "configure_spark",
    "jar_path",
    "operator_metrics",
    "read_state",
    "repartition_state",
]
__version__ = "0.1.0"
