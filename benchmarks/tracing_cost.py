"""What ``kclient.opentelemetry``'s tracing costs per record; no broker.

    .venv/bin/python benchmarks/tracing_cost.py [--records 100000] [--size 100] [--rounds 3]

A producer on a scripted client (no sockets) that answers every Produce request at once,
so each record is sent, acknowledged and its span ended: ``--records`` records of
``--size`` bytes, keyless, to one partition, with ``send`` then ``flush``, timed whole
(wall clock, the caller's ``send`` and the I/O thread's acknowledgements). Rows: no
interceptor (``send``'s fast path: tracing off), a no-op ``ProducerInterceptor`` (the
general path every interceptor takes), ``TracingInterceptor`` without an SDK (the API's
no-op tracer: the extra installed, tracing not configured), with the SDK sampling
nothing, and with the SDK recording every span (a ``SimpleSpanProcessor`` into an
exporter that drops them: the cost is kclient's and the SDK's, not an exporter's; a
``BatchSpanProcessor`` drops spans once a burst fills its queue, which would flatter it).
Then ``send_batch`` in calls of 10,000 rows, off and traced (each record its own span).
Medians of ``--rounds``; prints a Markdown table (µs per record, and the cost over off).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF  # noqa: E402
from opentelemetry.trace import NoOpTracerProvider  # noqa: E402

from benchmarks.send_cpu import BlockingMockClient  # noqa: E402
from kclient import ProducerInterceptor  # noqa: E402
from kclient.clock import SYSTEM_CLOCK  # noqa: E402
from kclient.network.kafka_client import ClientRequest  # noqa: E402
from kclient.opentelemetry import TracingInterceptor  # noqa: E402
from kclient.producer import KafkaProducer  # noqa: E402
from kclient.protocol import ApiKey  # noqa: E402
from kclient.record import RecordBatch  # noqa: E402
from kclient.testing.client import metadata_update_with  # noqa: E402


class AnsweringClient(BlockingMockClient):
    """Answers each Produce request at once with the next offsets; ``poll`` blocks up to
    its timeout (or a ``wakeup``) when there is nothing to answer, as a real client does."""

    def __init__(self, partitions: int) -> None:
        super().__init__(SYSTEM_CLOCK, metadata_update_with(1, {"t": partitions}))
        self._offsets: dict[tuple[str, int], int] = defaultdict(int)

    def send(self, request: ClientRequest, now_ms: int) -> None:
        if request.api_key == ApiKey.PRODUCE:
            responses = []
            for topic in request.body_for(12)["topic_data"]:
                parts = []
                for part in topic["partition_data"]:
                    tp = (topic["name"], part["index"])
                    count = RecordBatch(part["records"]).record_count
                    parts.append(
                        {"index": tp[1], "error_code": 0, "base_offset": self._offsets[tp]}
                    )
                    self._offsets[tp] += count
                responses.append({"name": topic["name"], "partition_responses": parts})
            self.prepare_response({"responses": responses}, api_key=ApiKey.PRODUCE)
        super().send(request, now_ms)


class DroppingExporter(SpanExporter):
    """Takes every span and keeps none."""

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


_providers: list[TracerProvider] = []
"""The recording providers made, shut down at the end."""


def recording_provider() -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(DroppingExporter()))
    _providers.append(provider)
    return provider


def producer(interceptors: list[Any], partitions: int = 1) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers="127.0.0.1:9092",
        linger_ms=5,
        batch_size=1 << 18,
        buffer_memory=1 << 30,
        acks=1,
        kafka_client=AnsweringClient(partitions),
        interceptors=interceptors,
    )


def sends_s(interceptors: list[Any], records: int, size: int) -> float:
    """Seconds for ``records`` sends and the flush that acknowledges them all."""
    value = b"v" * size
    with producer(interceptors) as p:
        p.send("t", value).result(10)  # metadata known, the I/O thread running
        send = p.send
        start = time.perf_counter()
        for _ in range(records):
            send("t", value)
        p.flush(60)
        return time.perf_counter() - start


def send_batch_s(interceptors: list[Any], records: int, size: int) -> float:
    """Seconds for ``send_batch`` calls of 10,000 rows and the flush."""
    values = [b"v" * size] * 10_000
    with producer(interceptors) as p:
        p.send("t", values[0]).result(10)
        start = time.perf_counter()
        for _ in range(max(records // 10_000, 1)):
            p.send_batch("t", values)
        p.flush(60)
        return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    cases: list[tuple[str, Callable[[], list[Any]], Callable[..., float]]] = [
        ("send, tracing off (no interceptor)", list, sends_s),
        ("send, a no-op interceptor", lambda: [ProducerInterceptor()], sends_s),
        (
            "send, traced, no SDK (API no-op tracer)",
            lambda: [TracingInterceptor(tracer_provider=NoOpTracerProvider())],
            sends_s,
        ),
        (
            "send, traced, SDK sampling none",
            lambda: [TracingInterceptor(tracer_provider=TracerProvider(sampler=ALWAYS_OFF))],
            sends_s,
        ),
        (
            "send, traced, SDK recording every span",
            lambda: [TracingInterceptor(tracer_provider=recording_provider())],
            sends_s,
        ),
        ("send_batch (10,000 rows), tracing off", list, send_batch_s),
        (
            "send_batch (10,000 rows), traced, SDK recording",
            lambda: [TracingInterceptor(tracer_provider=recording_provider())],
            send_batch_s,
        ),
    ]
    print(f"{args.records} records of {args.size} B, median of {args.rounds} rounds\n")
    print("| case | µs per record | over off |")
    print("|---|---:|---:|")
    off: dict[Callable[..., float], float] = {}
    for name, interceptors, run in cases:
        seconds = statistics.median(
            run(interceptors(), args.records, args.size) for _ in range(args.rounds)
        )
        us = seconds / args.records * 1e6
        base = off.setdefault(run, us)
        print(f"| {name} | {us:.2f} | {'-' if us is base else f'+{us - base:.2f}'} |", flush=True)
    for provider in _providers:
        provider.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
