"""How long a big CreateTopics holds the embedded broker's controller lock (which every
Metadata request takes), with a log dir.

    .venv/bin/python benchmarks/controller_lock.py [--partitions 10000] [--rounds 3]

For each round a fresh ``EmbeddedBroker(log_dir=...)`` creates a topic of ``--partitions``
partitions through a CreateTopics request while two probes run: a thread that takes the
controller lock every millisecond (the longest it waited is how long the lock was held),
and a client sending Metadata requests one after another on its own connection (the
slowest answer is what other clients saw). Prints a Markdown table of the medians.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kclient.broker import EmbeddedBroker  # noqa: E402
from kclient.protocol import ApiKey  # noqa: E402
from kclient.protocol.frame import decode_response, encode_request  # noqa: E402


def roundtrip(sock: socket.socket, api_key: int, version: int, body: dict[str, object]) -> object:
    sock.sendall(b"".join(encode_request(api_key, version, 1, "bench", body)))
    size = int.from_bytes(_exactly(sock, 4), "big")
    return decode_response(api_key, version, _exactly(sock, size))[1]


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def one_round(partitions: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as log_dir, EmbeddedBroker(log_dir=log_dir) as broker:
        address = (broker.host, broker.port)
        stop = threading.Event()
        lock_waits: list[float] = []
        metadata_s: list[float] = []

        def lock_probe() -> None:
            lock = broker.controller.lock
            while not stop.is_set():
                start = time.perf_counter()
                with lock:
                    pass
                lock_waits.append(time.perf_counter() - start)
                time.sleep(0.001)

        def metadata_probe() -> None:
            with socket.create_connection(address, timeout=30) as sock:
                while not stop.is_set():
                    start = time.perf_counter()
                    roundtrip(sock, ApiKey.METADATA, 12, {"topics": None})
                    metadata_s.append(time.perf_counter() - start)
                    time.sleep(0.001)

        probes = [threading.Thread(target=f, daemon=True) for f in (lock_probe, metadata_probe)]
        for t in probes:
            t.start()
        time.sleep(0.2)
        with socket.create_connection(address, timeout=120) as admin:
            start = time.perf_counter()
            body = roundtrip(
                admin,
                ApiKey.CREATE_TOPICS,
                7,
                {
                    "topics": [
                        {
                            "name": "big",
                            "num_partitions": partitions,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        }
                    ],
                    "timeout_ms": 60_000,
                    "validate_only": False,
                },
            )
            create_s = time.perf_counter() - start
        assert isinstance(body, dict) and body["topics"][0]["error_code"] == 0, body
        time.sleep(0.2)
        stop.set()
        for t in probes:
            t.join(30)
    return {
        "create_s": create_s,
        "lock_max_ms": max(lock_waits) * 1e3,
        "metadata_max_ms": max(metadata_s) * 1e3,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = [one_round(args.partitions) for _ in range(args.rounds)]
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(
        f"\nCreateTopics of {args.partitions:,} partitions with a log dir, medians of "
        f"{args.rounds} rounds\n"
    )
    print("| create s | longest controller-lock wait ms | slowest Metadata answer ms |")
    print("|---:|---:|---:|")
    print(f"| {med['create_s']:.2f} | {med['lock_max_ms']:,.0f} | {med['metadata_max_ms']:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
