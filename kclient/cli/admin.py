"""A small blocking client for the command-line tools: metadata, topics, offsets, fetch.

The demo uses it to create its topic and to read every record back through Fetch, on a
path of its own (plain blocking sockets, one request at a time) so that verification does
not share code with the producer's NetworkClient it is checking.
"""

from __future__ import annotations

import socket
import struct
import sys
from collections.abc import Callable, Iterator
from typing import Any

from kclient import errors
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.record import Record, iter_batches

# Highest versions this tool sends: Fetch and ListOffsets stay on topic names (Fetch v13+
# addresses topics by id); Metadata v12 is understood by every broker we talk to.
_CAPS = {ApiKey.FETCH: 12, ApiKey.METADATA: 12}
_SIZE = struct.Struct(">i")
_MAX_RESPONSE_BYTES = 256 * 1024 * 1024


def exit_code(run: Callable[[], int]) -> int:
    """A command-line tool's exit status: ``run()``'s, or 2 for a ``ConfigError`` (what to
    change) and 1 for any other Kafka error, each printed as one line on stderr."""
    try:
        return run()
    except errors.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except errors.KafkaError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.strip().rpartition(":")
    if not sep or not port.isdigit():
        raise errors.ConfigError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


class BlockingConnection:
    """One socket to one broker; ``request`` sends and waits for the matching response."""

    def __init__(
        self, host: str, port: int, client_id: str = "kclient-cli", timeout_s: float = 30.0
    ) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise errors.KafkaConnectionError(
                f"cannot connect to {self.address}: {exc.strerror or exc}"
            ) from exc
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation_id = 0
        self.versions: dict[int, int] = {}
        try:
            body = self._roundtrip(ApiKey.API_VERSIONS, 0, {})
        except BaseException:  # a peer that is not a broker, or one that went away
            self.sock.close()
            raise
        if body["error_code"]:
            raise errors.for_code(body["error_code"])(f"ApiVersions from {self.address}")
        for entry in body["api_keys"]:
            key = entry["api_key"]
            if key in SUPPORTED_VERSIONS:
                ours_min, ours_max = SUPPORTED_VERSIONS[ApiKey(key)]
                top = min(ours_max, entry["max_version"], _CAPS.get(ApiKey(key), ours_max))
                if top >= max(ours_min, entry["min_version"]):
                    self.versions[key] = top

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, api_key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
        version = self.versions.get(api_key)
        if version is None:
            raise errors.UnsupportedVersionError(
                f"broker {self.address} supports no version of {api_key.name} that kclient knows"
            )
        return self._roundtrip(api_key, version, body)

    def _roundtrip(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self._correlation_id += 1
        frames = encode_request(api_key, version, self._correlation_id, self.client_id, body)
        try:
            self.sock.sendall(b"".join(frames))
            size = _SIZE.unpack(self._read_exactly(4))[0]
            if not 0 <= size <= _MAX_RESPONSE_BYTES:
                raise errors.ProtocolDecodeError(
                    f"{self.address} answered with a frame size of {size} bytes"
                )
            frame = self._read_exactly(size)
        except OSError as exc:
            raise errors.KafkaConnectionError(
                f"{api_key.name} to {self.address} failed: {exc.strerror or exc}"
            ) from exc
        correlation_id, response = decode_response(api_key, version, frame)
        if correlation_id != self._correlation_id:
            raise errors.ProtocolDecodeError(
                f"{self.address} answered correlation id {correlation_id}, "
                f"expected {self._correlation_id}"
            )
        return response

    def _read_exactly(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(min(n - len(chunks), 1 << 20))
            if not chunk:
                raise errors.KafkaConnectionError(f"{self.address} closed the connection")
            chunks += chunk
        return bytes(chunks)


class ClusterReader:
    """Metadata, topic creation, end offsets and full-partition reads against a cluster."""

    def __init__(
        self, bootstrap_servers: str, client_id: str = "kclient-cli", timeout_s: float = 30.0
    ) -> None:
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._conns: dict[str, BlockingConnection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        last: Exception | None = None
        for address in bootstrap_servers.split(","):
            try:
                self.bootstrap = self._connect(*parse_address(address))
                break
            except errors.KafkaConnectionError as exc:
                last = exc
        else:
            raise errors.KafkaConnectionError(f"no broker reachable in {bootstrap_servers}: {last}")

    def _connect(self, host: str, port: int) -> BlockingConnection:
        key = f"{host}:{port}"
        conn = self._conns.get(key)
        if conn is None:
            conn = BlockingConnection(host, port, self.client_id, self.timeout_s)
            self._conns[key] = conn
        return conn

    def node(self, node_id: int) -> BlockingConnection:
        return self._connect(*self.brokers[node_id])

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def metadata(self, topic: str) -> dict[str, Any]:
        """The topic's metadata entry; refreshes the broker list."""
        body = self.bootstrap.request(
            ApiKey.METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        )
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in body["brokers"]}
        self.controller_id = body.get("controller_id", -1)
        for entry in body["topics"]:
            if entry["name"] == topic:
                return dict(entry)
        raise errors.UnknownTopicOrPartitionError(f"topic {topic!r} missing from metadata")

    def leaders(self, topic: str) -> dict[int, int]:
        entry = self.metadata(topic)
        if entry["error_code"]:
            raise errors.for_code(entry["error_code"])(f"metadata for topic {topic!r}")
        return {p["partition_index"]: p["leader_id"] for p in entry["partitions"]}

    def create_topic(self, topic: str, partitions: int, replication_factor: int = 1) -> bool:
        """Create the topic; False when it already exists."""
        conn = self.bootstrap
        body = conn.request(
            ApiKey.CREATE_TOPICS,
            {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": partitions,
                        "replication_factor": replication_factor,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 30000,
            },
        )
        result = body["topics"][0]
        if result["error_code"] == errors.TopicAlreadyExistsError.code:
            return False
        if result["error_code"]:
            raise errors.for_code(result["error_code"])(
                result.get("error_message") or f"creating topic {topic!r}"
            )
        return True

    def end_offsets(self, topic: str, timestamp: int = -1) -> dict[int, int]:
        """Latest (-1) or earliest (-2) offset of every partition, asked of each leader."""
        out: dict[int, int] = {}
        by_leader: dict[int, list[int]] = {}
        for partition, leader in self.leaders(topic).items():
            by_leader.setdefault(leader, []).append(partition)
        for leader, parts in by_leader.items():
            body = self.node(leader).request(
                ApiKey.LIST_OFFSETS,
                {
                    "replica_id": -1,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [
                                {"partition_index": p, "timestamp": timestamp} for p in parts
                            ],
                        }
                    ],
                    "timeout_ms": 30_000,
                },
            )
            for t in body["topics"]:
                for p in t["partitions"]:
                    if p["error_code"]:
                        raise errors.for_code(p["error_code"])(
                            f"ListOffsets {topic}-{p['partition_index']}"
                        )
                    out[p["partition_index"]] = p["offset"]
        return out

    def read(
        self, topic: str, partition: int, start: int, end: int, max_bytes: int = 8 << 20
    ) -> Iterator[Record]:
        """Every record of ``topic-partition`` in ``[start, end)``, through Fetch."""
        leader = self.leaders(topic)[partition]
        conn = self.node(leader)
        offset = start
        stalls = 0
        while offset < end:
            body = conn.request(
                ApiKey.FETCH,
                {
                    "replica_id": -1,
                    "max_wait_ms": 100,
                    "min_bytes": 1,
                    "max_bytes": max_bytes,
                    "topics": [
                        {
                            "topic": topic,
                            "partitions": [
                                {
                                    "partition": partition,
                                    "fetch_offset": offset,
                                    "partition_max_bytes": max_bytes,
                                }
                            ],
                        }
                    ],
                },
            )
            data = body["responses"][0]["partitions"][0]
            if data["error_code"]:
                raise errors.for_code(data["error_code"])(f"Fetch {topic}-{partition}@{offset}")
            progressed = False
            for batch in iter_batches(data["records"] or b""):
                for record in batch.records():
                    if start <= record.offset < end and record.offset >= offset:
                        yield record
                if batch.next_offset > offset:
                    offset = batch.next_offset
                    progressed = True
            if progressed:
                stalls = 0
                continue
            stalls += 1
            if data["high_watermark"] <= offset or stalls >= 50:
                raise errors.OffsetOutOfRangeError(
                    f"{topic}-{partition}: no records past offset {offset} "
                    f"(high watermark {data['high_watermark']}, expected up to {end})"
                )
