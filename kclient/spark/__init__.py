"""The PySpark sink: ``write_dataframe``, ``foreach_batch`` and ``KafkaSink`` (see
``kclient.spark.sink``). The package's modules: ``sink`` (at least once, the entry points),
``columns`` (Arrow and Row columns to records), ``producers`` (each Python worker's shared
producers), ``eos`` (the exactly-once commit protocol on the driver) and ``eos_task`` (its
tasks)."""

from __future__ import annotations

from kclient.spark.columns import COLUMNS, HEADERS_TYPE, SinkSchemaError, validate_schema
from kclient.spark.producers import ProducerCache
from kclient.spark.sink import (
    DEFAULT_PRODUCER_IDLE_S,
    SINK_BATCH_SIZE,
    KafkaSink,
    SinkDeliveryError,
    SinkResult,
    foreach_batch,
    write_dataframe,
)

__all__ = [
    "COLUMNS",
    "DEFAULT_PRODUCER_IDLE_S",
    "HEADERS_TYPE",
    "SINK_BATCH_SIZE",
    "KafkaSink",
    "ProducerCache",
    "SinkDeliveryError",
    "SinkResult",
    "SinkSchemaError",
    "foreach_batch",
    "validate_schema",
    "write_dataframe",
]
