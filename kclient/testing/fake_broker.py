"""FakeBroker: a tiny Kafka-speaking server on 127.0.0.1 whose answers a test scripts, to
see what a client does with a broken or hostile broker (a response larger than it may
be, a size announced and never sent, metadata for topics nobody asked about).

A test double, not a broker: one thread accepts, one thread per connection reads whole
requests with blocking calls and writes the scripted answer. ``answers`` maps an api key
to ``answer(header, body) -> Answer`` (looked up at each request, so entries may be added
once the broker's port is known):

* a dict: a response body, encoded at the request's version (an encoding is kept per body
  object and version, so a large prepared body is encoded once);
* bytes: written as they are (a frame the test built, or only a size prefix);
* ``None``: no answer (the request stays unanswered).

Unless ``answers`` says otherwise, ApiVersions is answered with every version kclient
speaks, InitProducerId with producer id 1, and Produce with success (offsets counting
from 0 per partition); any other request closes its connection. ``close()`` stops the
threads and closes every socket it opened.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kclient.errors import KafkaError
from kclient.protocol import ApiKey
from kclient.protocol.frame import (
    RequestHeader,
    decode_request,
    encode_response,
    frame_bytes,
    response_header_version,
)
from kclient.testing.selector import api_versions_body

__all__ = ["Answer", "FakeBroker", "metadata_body"]

Answer = Mapping[str, Any] | bytes | None
Answerer = Callable[[RequestHeader, dict[str, Any]], Answer]

_SIZE = struct.Struct(">i")


class FakeBroker:
    """A scripted Kafka server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, answers: Mapping[int, Answerer], *, node_id: int = 0) -> None:
        self.node_id = node_id
        self._offsets: dict[tuple[object, int], int] = {}
        self._scripted = answers  # read at each request: a test may add answers later
        self._defaults: dict[int, Answerer] = {
            int(ApiKey.API_VERSIONS): lambda header, body: api_versions_body(),
            int(ApiKey.INIT_PRODUCER_ID): lambda header, body: {
                "error_code": 0,
                "producer_id": 1,
                "producer_epoch": 0,
            },
            int(ApiKey.PRODUCE): self._produce,
        }
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host = "127.0.0.1"
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._connections: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._encoded: dict[tuple[int, int, int], tuple[Mapping[str, Any], bytes]] = {}
        self._closed = False
        self.requests: list[RequestHeader] = []
        accept = threading.Thread(target=self._accept, name=f"fake-broker-{self.port}")
        accept.daemon = True
        self._threads.append(accept)
        accept.start()

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def __enter__(self) -> FakeBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections = list(self._connections)
        for sock in [self._listener, *connections]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def prepare(self, api_key: int, versions: range, body: Mapping[str, Any]) -> None:
        """Encode ``body`` now for these versions (a large answer is then ready when asked
        for, and the client's wait does not include the encoding)."""
        for version in versions:
            self._frame(RequestHeader(int(api_key), version, 0, None), body)

    def _produce(self, header: RequestHeader, body: dict[str, Any]) -> Answer:
        if body["acks"] == 0:
            return None
        topics = []
        for topic in body["topic_data"]:
            partitions = []
            for data in topic["partition_data"]:
                key = (topic.get("name") or topic.get("topic_id"), data["index"])
                with self._lock:
                    offset = self._offsets.get(key, 0)
                    self._offsets[key] = offset + 1  # one batch, counted as one record
                partitions.append({"index": data["index"], "error_code": 0, "base_offset": offset})
            topics.append(
                {
                    "name": topic.get("name", ""),
                    "topic_id": topic.get("topic_id"),
                    "partition_responses": partitions,
                }
            )
        return {"responses": topics, "throttle_time_ms": 0}

    # ---- threads ---------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._closed:
                    sock.close()
                    return
                self._connections.append(sock)
                thread = threading.Thread(
                    target=self._serve, args=(sock,), name=f"fake-broker-{self.port}-conn"
                )
                thread.daemon = True
                self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            while True:
                head = _read_exactly(sock, 4)
                if head is None:
                    return
                frame = _read_exactly(sock, _SIZE.unpack(head)[0])
                if frame is None:
                    return
                header, body = decode_request(frame)
                self.requests.append(header)
                answer = self._scripted.get(header.api_key) or self._defaults.get(header.api_key)
                if answer is None:
                    return
                reply = answer(header, body)
                if reply is None:
                    continue
                sock.sendall(reply if isinstance(reply, bytes) else self._frame(header, reply))
        except (OSError, KafkaError):  # the client left, or sent what we cannot read
            return
        finally:
            sock.close()

    def _frame(self, header: RequestHeader, body: Mapping[str, Any]) -> bytes:
        key = (id(body), header.api_key, header.api_version)
        cached = self._encoded.get(key)
        if cached is None or cached[0] is not body:
            whole = frame_bytes(encode_response(header.api_key, header.api_version, 0, body))
            skip = 4 + 4 + (1 if response_header_version(header.api_key, header.api_version) else 0)
            cached = self._encoded[key] = (body, whole[skip:])
        encoded = cached[1]
        header_bytes = struct.pack(">i", header.correlation_id)
        if response_header_version(header.api_key, header.api_version):
            header_bytes += b"\x00"  # no tagged fields
        return _SIZE.pack(len(header_bytes) + len(encoded)) + header_bytes + encoded


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks: list[bytes] = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def metadata_body(
    brokers: list[FakeBroker],
    topics: Mapping[str, int],
    *,
    leaders: Callable[[str, int], int] | None = None,
) -> dict[str, Any]:
    """A MetadataResponse body naming ``brokers`` (by their ``node_id``) and ``topics``
    with their partition counts; partition p of a topic is led by
    ``leaders(topic, p)`` (default: round-robin over the brokers)."""
    nodes = [b.node_id for b in brokers]

    def partition(topic: str, index: int) -> dict[str, Any]:
        leader = leaders(topic, index) if leaders is not None else nodes[index % len(nodes)]
        return {
            "error_code": 0,
            "partition_index": index,
            "leader_id": leader,
            "leader_epoch": 0,
            "replica_nodes": [leader],
            "isr_nodes": [leader],
            "offline_replicas": [],
        }

    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": None} for b in brokers
        ],
        "cluster_id": "fake",
        "controller_id": nodes[0],
        "topics": [
            {
                "error_code": 0,
                "name": topic,
                "is_internal": False,
                "partitions": [partition(topic, p) for p in range(count)],
            }
            for topic, count in topics.items()
        ],
    }
