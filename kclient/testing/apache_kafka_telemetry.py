"""Client metrics (KIP-714) on Apache Kafka for tests: a receiver plugin and a subscription.

Kafka serves GetTelemetrySubscriptions and PushTelemetry only with a client-telemetry
plugin among its ``metric.reporters``. ``KclientTelemetryRecorder`` (``java/``, compiled
here against the cluster's jars) is one, for Kafka 4.x's ``ClientTelemetryExporterProvider``:
it appends every push to a file, with the metric names Kafka's own OpenTelemetry classes
read from it. ``recorder_setup`` gives the ``ApacheKafka`` arguments that install it;
``subscribe`` creates a ``CLIENT_METRICS`` subscription with Kafka's ``ConfigCommand`` and
waits until a broker hands it out; ``read_pushes`` parses the file::

    classes, props = recorder_setup(kafka_jars("4.4.0"), tmp / "pushes.tsv")
    with ApacheKafka("4.4.0", properties=props, classpath=[classes]) as kafka:
        subscribe(kafka, "all-producers", ["org.apache.kafka.producer."], 1_000)
        ...
        pushes = read_pushes(tmp / "pushes.tsv")
"""

from __future__ import annotations

import base64
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.protocol.types import ZERO_UUID
from kclient.testing.apache_kafka import ApacheKafka
from kclient.testing.apache_kafka_node import ApacheKafkaError
from kclient.testing.maven import compile_java

__all__ = ["RECORDER", "JavaTelemetryPush", "read_pushes", "recorder_setup", "subscribe"]

RECORDER = "KclientTelemetryRecorder"
_SOURCE = Path(__file__).with_name("java") / f"{RECORDER}.java"


@dataclass(frozen=True)
class JavaTelemetryPush:
    """One push as Kafka handed it to the recorder."""

    client_instance_id: uuid.UUID
    """(Kafka's ``Uuid`` prints as url-safe base64; read back into a UUID.)"""
    terminating: bool
    content_type: str
    push_interval_ms: int
    data: bytes
    """The payload as Kafka gave it to the plugin (decompressed)."""
    metric_names: tuple[str, ...]
    """As Kafka's shaded OpenTelemetry ``MetricsData`` read them."""
    error: str | None
    """Why Kafka's classes could not read the payload, if they could not."""


def recorder_setup(libs: Path, file: Path) -> tuple[Path, dict[str, str]]:
    """The recorder's compiled classes (against the jars in ``libs``) and the broker
    properties that install it, writing to ``file``."""
    classes = compile_java({_SOURCE.name: _SOURCE.read_text()}, libs)
    return classes, {"metric.reporters": RECORDER, "kclient.telemetry.file": str(file)}


def read_pushes(file: Path) -> list[JavaTelemetryPush]:
    """Every push the recorder wrote so far, oldest first."""
    if not file.exists():
        return []
    pushes = []
    for line in file.read_text().splitlines():
        instance, terminating, content_type, interval, data, names = line.split("\t")
        error = names[1:] if names.startswith("!") else None
        pushes.append(
            JavaTelemetryPush(
                uuid.UUID(bytes=base64.urlsafe_b64decode(instance + "==")),
                terminating == "true",
                content_type,
                int(interval),
                base64.b64decode(data),
                () if error is not None or not names else tuple(names.split(",")),
                error,
            )
        )
    return pushes


def subscribe(
    kafka: ApacheKafka,
    name: str,
    metrics: Sequence[str],
    interval_ms: int,
    *,
    timeout_s: float = 30.0,
) -> None:
    """Create the client-metrics subscription ``name`` (``kafka-configs.sh --entity-type
    client-metrics``: these metric prefixes every ``interval_ms``) and wait until broker 1
    hands it to a new client."""
    kafka.run_tool(
        "org.apache.kafka.tools.ConfigCommand",
        "--alter",
        "--entity-type",
        "client-metrics",
        "--entity-name",
        name,
        "--add-config",
        f"metrics=[{','.join(metrics)}],interval.ms={interval_ms}",
        what=f"creating client metrics {name!r}",
        timeout_s=timeout_s,
    )
    deadline = time.monotonic() + timeout_s
    while list(_subscription(kafka.broker_address(1))) != list(metrics):
        if time.monotonic() > deadline:
            raise ApacheKafkaError(f"client metrics {name!r} not handed out after {timeout_s} s")
        time.sleep(0.2)


def _subscription(address: str) -> list[str]:
    """The ``requested_metrics`` broker ``address`` gives a new client."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        request = encode_request(
            ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
            0,
            1,
            "kclient-testing",
            {"client_instance_id": ZERO_UUID},
        )
        sock.sendall(b"".join(request))
        size = int.from_bytes(_read(sock, 4), "big")
        _, body = decode_response(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, _read(sock, size))
    return list(body["requested_metrics"]) if not body["error_code"] else []


def _read(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ApacheKafkaError("the broker closed the connection")
        data += chunk
    return bytes(data)
