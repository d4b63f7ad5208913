"""A Sender with a transactional TransactionManager on a scripted broker (no sockets, no
threads): ``TxnBroker`` answers every request the way a broker with a transaction
coordinator would, unless the test scripts an error for it or holds it."""

from __future__ import annotations

import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kclient.clock import Clock
from kclient.network.api_versions import NodeApiVersions
from kclient.network.kafka_client import ClientRequest
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.record import RecordBatch
from kclient.sender.accumulator import RecordAccumulator
from kclient.sender.future import FutureRecordMetadata
from kclient.sender.sender import Sender
from kclient.sender.transaction_manager import TransactionManager
from kclient.sender.txn_state import TransactionalRequestResult, TransactionState
from kclient.testing import MockClock
from kclient.testing.client import MockClient, metadata_update_with
from tests.sender.helpers import accumulator

TXN_ID = "orders-writer-1"
COORDINATOR = 1
S = TransactionState
F = ApiKey.FIND_COORDINATOR
INIT = ApiKey.INIT_PRODUCER_ID
ADD = ApiKey.ADD_PARTITIONS_TO_TXN
OFFSETS = ApiKey.ADD_OFFSETS_TO_TXN
COMMIT = ApiKey.TXN_OFFSET_COMMIT
END = ApiKey.END_TXN
PRODUCE = ApiKey.PRODUCE


@dataclass
class Sent:
    """A request as the broker saw it: api, node, negotiated version and body."""

    api_key: int
    node: int
    version: int
    body: dict[str, Any]


class TxnBroker(MockClient):
    """Answers like a broker with transactions (coordinator: node ``COORDINATOR``)."""

    def __init__(
        self, clock: Clock, topics: dict[str, int], topic_ids: dict[str, uuid.UUID] | None = None
    ) -> None:
        super().__init__(clock, metadata_update_with(2, topics, topic_ids=topic_ids))
        self.coordinator = COORDINATOR
        self.group_coordinator = 0
        self.errors: dict[int, deque[int]] = defaultdict(deque)
        self.held: set[int] = set()
        self.producer_id = 4000
        self.epoch = -1
        self.added: set[tuple[str, int]] = set()
        self.seen: list[Sent] = []
        self.produced: list[tuple[tuple[str, int], RecordBatch]] = []
        self.violations: list[str] = []
        self.v1_ended_epochs: set[int] = set()
        """Epochs a version-1 EndTxn (which keeps the epoch) ended a transaction with."""
        self.offsets: dict[tuple[str, int], int] = defaultdict(int)

    # ---- scripting --------------------------------------------------------------------

    def fail_next(self, api_key: int, *codes: int) -> None:
        """The next requests of ``api_key`` are answered with these error codes."""
        self.errors[api_key].extend(codes)

    def hold(self, api_key: int) -> None:
        """Requests of ``api_key`` stay in flight until the test answers them."""
        self.held.add(api_key)

    def release(self, api_key: int) -> None:
        """Answer every held request of ``api_key`` as the broker would, and stop holding."""
        self.held.discard(api_key)
        for request in [r for r in self.requests if r.api_key == api_key]:
            self.respond_to(request, self._answer(request, self._version(request)))

    def sent_apis(self) -> list[ApiKey]:
        return [ApiKey(s.api_key) for s in self.seen]

    def bodies(self, api_key: int) -> list[dict[str, Any]]:
        return [s.body for s in self.seen if s.api_key == api_key]

    def set_init_producer_id_max(self, version: int) -> None:
        versions = {int(k): v for k, v in SUPPORTED_VERSIONS.items()}
        versions[ApiKey.INIT_PRODUCER_ID] = (0, version)
        self.set_node_api_versions(NodeApiVersions(versions))

    def set_transaction_version(
        self, level: int, max_versions: Mapping[int, int] | None = None
    ) -> None:
        """Finalize ``transaction.version`` at ``level`` (KIP-890), optionally serving
        some apis only up to ``max_versions``."""
        versions = {int(k): v for k, v in SUPPORTED_VERSIONS.items()}
        for key, high in (max_versions or {}).items():
            versions[key] = (versions[key][0], high)
        self.set_node_api_versions(NodeApiVersions(versions, -1, {"transaction.version": level}))

    # ---- the broker -------------------------------------------------------------------

    def _version(self, request: ClientRequest) -> int:
        return self._api_versions.latest_usable_version(
            request.api_key, request.min_version, request.max_version
        )

    def send(self, request: ClientRequest, now_ms: int) -> None:
        try:
            version = self._version(request)
        except Exception:
            super().send(request, now_ms)
            return
        body = dict(request.body_for(version))
        self.seen.append(Sent(request.api_key, request.destination, version, body))
        if request.api_key not in self.held:
            self.prepare_response(self._answer(request, version), api_key=request.api_key)
        super().send(request, now_ms)

    def _next_error(self, api_key: int) -> int:
        queue = self.errors.get(api_key)
        return queue.popleft() if queue else 0

    def _answer(self, request: ClientRequest, version: int) -> dict[str, Any]:
        body = request.body_for(version)
        key = request.api_key
        if key == ApiKey.FIND_COORDINATOR:
            return self._find_coordinator(body, version)
        if key == ApiKey.INIT_PRODUCER_ID:
            return self._init_producer_id(body)
        if key == ApiKey.ADD_PARTITIONS_TO_TXN:
            code = self._next_error(key)
            topics = []
            for topic in body["v3_and_below_topics"]:
                if code == 0:
                    self.added.update((topic["name"], p) for p in topic["partitions"])
                results = [
                    {"partition_index": p, "partition_error_code": code}
                    for p in topic["partitions"]
                ]
                topics.append({"name": topic["name"], "results_by_partition": results})
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": topics}
        if key in (ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN):
            code = self._next_error(key)
            out: dict[str, Any] = {"throttle_time_ms": 0, "error_code": code}
            if key == ApiKey.END_TXN and code == 0:
                if version >= 5:  # transaction version 2: a new epoch per transaction
                    if body["producer_epoch"] != self.epoch:
                        self.violations.append(f"EndTxn v5 at epoch {body['producer_epoch']}")
                    if not self.added and body["committed"]:
                        self.violations.append("EndTxn v5 commit before any Produce")
                    self.epoch += 1
                    out |= {"producer_id": self.producer_id, "producer_epoch": self.epoch}
                else:
                    self.v1_ended_epochs.add(body["producer_epoch"])
                self.added.clear()
            return out
        if key == ApiKey.TXN_OFFSET_COMMIT:
            code = self._next_error(key)
            if version >= 5 and code == 0:  # transaction version 2: adds the offsets
                self.added.add(("__consumer_offsets", 0))
            topics = [
                {
                    "name": t["name"],
                    "partitions": [
                        {"partition_index": p["partition_index"], "error_code": code}
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ]
            return {"throttle_time_ms": 0, "topics": topics}
        if key == ApiKey.PRODUCE:
            return self._produce(body, version)
        raise AssertionError(f"unexpected request {ApiKey(key).name}")

    def _find_coordinator(self, body: Mapping[str, Any], version: int) -> dict[str, Any]:
        code = self._next_error(ApiKey.FIND_COORDINATOR)
        node = self.coordinator if body.get("key_type") == 1 else self.group_coordinator
        entry = {
            "node_id": node,
            "host": "localhost",
            "port": 9092 + node,
            "error_code": code,
            "error_message": "scripted" if code else None,
        }
        if version >= 4:
            return {"coordinators": [{"key": body["coordinator_keys"][0], **entry}]}
        return entry

    def _init_producer_id(self, body: Mapping[str, Any]) -> dict[str, Any]:
        code = self._next_error(ApiKey.INIT_PRODUCER_ID)
        if code:
            return {"error_code": code, "producer_id": -1, "producer_epoch": -1}
        if body["transactional_id"] != TXN_ID:
            self.violations.append(f"InitProducerId for {body['transactional_id']!r}")
        self.epoch += 1
        self.added.clear()
        return {"error_code": 0, "producer_id": self.producer_id, "producer_epoch": self.epoch}

    def _produce(self, body: Mapping[str, Any], version: int) -> dict[str, Any]:
        if body["transactional_id"] != TXN_ID:
            self.violations.append(f"Produce with transactional id {body['transactional_id']!r}")
        code = self._next_error(ApiKey.PRODUCE)
        responses = []
        for topic in body["topic_data"]:
            parts = []
            for part in topic["partition_data"]:
                tp = (topic["name"], part["index"])
                batch = RecordBatch(part["records"])
                if version >= 12 and batch.producer_epoch in self.v1_ended_epochs:
                    self.violations.append(
                        f"Produce v12 to {tp} at epoch {batch.producer_epoch}, which ended a "
                        "version-1 transaction (it could join that transaction)"
                    )
                if version >= 12 and code == 0:
                    self.added.add(tp)  # transaction version 2: the produce adds it
                if tp not in self.added:
                    self.violations.append(f"Produce to {tp} before AddPartitionsToTxn")
                if not batch.is_transactional:
                    self.violations.append(f"a batch for {tp} is not transactional")
                if code == 0:
                    self.produced.append((tp, batch))
                parts.append(
                    {"index": part["index"], "error_code": code, "base_offset": self.offsets[tp]}
                )
                if code == 0:
                    self.offsets[tp] += batch.record_count
            named = {"topic_id": topic["topic_id"]} if version >= 13 else {"name": topic["name"]}
            responses.append({**named, "partition_responses": parts})
        return {"responses": responses, "throttle_time_ms": 0}


@dataclass
class TxnHarness:
    clock: MockClock
    broker: TxnBroker
    acc: RecordAccumulator
    sender: Sender
    tm: TransactionManager

    def send(
        self, topic: str, partition: int, value: bytes = b"v", n: int = 1
    ) -> list[FutureRecordMetadata]:
        self.tm.check_send()
        queues = self.acc.topic_queues(topic)
        if not queues.num_partitions:
            self.acc.update_topic(queues, self.broker.metadata.fetch())
        return [
            self.acc.append(queues, partition, 1_000, None, value, None, None, 0, 82 + len(value))
            for _ in range(n)
        ]

    def run(self, times: int = 1) -> None:
        for _ in range(times):
            self.sender.run_once()

    def run_until(self, result: TransactionalRequestResult, steps: int = 30) -> None:
        """Run the Sender until ``result`` completes (the clock does not move); then the
        caller has seen it, as ``KafkaProducer`` does when it returns."""
        for _ in range(steps):
            if result.wait(0):
                return
            self.sender.run_once()
        assert result.wait(0), f"{result} did not complete in {steps} steps"

    def ready(self) -> None:
        """init_transactions() and begin_transaction()."""
        self.run_until(self.tm.initialize_transactions())
        self.tm.begin_transaction()


def make_txn(
    *,
    topics: dict[str, int] | None = None,
    retry_backoff_ms: int = 100,
    transaction_timeout_ms: int = 60_000,
    topic_ids: dict[str, uuid.UUID] | None = None,
    **acc_kwargs: Any,
) -> TxnHarness:
    clock = MockClock()
    broker = TxnBroker(clock, topics or {"t": 2}, topic_ids)
    tm = TransactionManager(TXN_ID, transaction_timeout_ms, retry_backoff_ms)
    acc_kwargs.setdefault("linger_ms", 0)
    acc = accumulator(clock, tm=tm, transactional=True, **acc_kwargs)
    sender = Sender(
        broker,
        acc,
        clock=clock,
        acks=-1,
        max_request_size=1 << 20,
        request_timeout_ms=30_000,
        retries=2_147_483_647,
        retry_backoff_ms=retry_backoff_ms,
        guarantee_message_order=False,
        transaction_manager=tm,
    )
    return TxnHarness(clock, broker, acc, sender, tm)


def in_transaction(setup: Callable[[TxnBroker], None] | None = None, **kwargs: Any) -> TxnHarness:
    """A harness past init_transactions() and begin_transaction(), ``setup`` applied to
    the broker first, with the requests seen so far forgotten."""
    h = make_txn(**kwargs)
    if setup is not None:
        setup(h.broker)
    h.ready()
    h.broker.seen.clear()
    return h
