"""The PySpark sink: ``write_dataframe``, ``foreach_batch`` and ``KafkaSink`` (see
``kclient.spark.sink``). The package's modules: ``sink`` (at least once, the entry points),
``columns`` (Arrow and Row columns to records), ``producers`` (each Python worker's shared
producers), ``eos`` (the exactly-once commit protocol on the driver) and ``eos_task`` (its
tasks)."""

from __future__ import annotations

from kclient.spark.sink import (
    COLUMNS,
    DEFAULT_PRODUCER_IDLE_S,
    HEADERS_TYPE,
    SINK_BATCH_SIZE,
    KafkaSink,
    ProducerCache,
    SinkDeliveryError,
    SinkResult,
    SinkSchemaError,
    foreach_batch,
    validate_schema,
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
