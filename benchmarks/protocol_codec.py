"""Protocol codec speed on the producer's hot messages: this tree against a baseline commit.

    .venv/bin/python benchmarks/protocol_codec.py [--baseline REF] [--trials 100] [--ms 2]
        [--only TEXT]

Times the public frame functions a client calls per round trip —
``encode_request`` of a ProduceRequest (acks=1, one topic, one partition, records as
one 100-byte buffer: ``bytes`` and, at v9, a ``memoryview``), ``decode_response`` of a
ProduceResponse, ``encode_request`` of a MetadataRequest for no topics and
``decode_response`` of a MetadataResponse with one broker and no topics — at every
version kclient speaks.

"old" is ``kclient/protocol`` as it was at ``--baseline`` (default: the commit before
the generated fast path), loaded from ``git show`` into a temporary package; "new" is the
working tree. Both encode to the same bytes and decode to the same dicts (checked before
timing). Many short old and new trials alternate and the best trial of each counts (the
least disturbed by other work on the machine); time is the process's CPU time. Prints a
Markdown table and the machine it ran on.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kclient.protocol import frame as new_frame  # noqa: E402

BASELINE = "0684c84"  # the last commit with only the closure-compiled codec
BASELINE_PACKAGE = "kclient_protocol_baseline"
PRODUCE, METADATA = 0, 3
RECORDS = bytes(range(100))  # stands in for one record batch; only its length matters


def load_baseline(ref: str, into: Path) -> ModuleType:
    """``kclient/protocol`` at ``ref`` as package ``kclient_protocol_baseline``; its frame."""
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", ref, "kclient/protocol"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    if not names:
        raise SystemExit(f"no kclient/protocol at {ref!r}; pass --baseline")
    for name in names:
        if not name.endswith(".py"):
            continue
        text = subprocess.run(
            ["git", "show", f"{ref}:{name}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        target = into / BASELINE_PACKAGE / Path(name).relative_to("kclient/protocol")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace("kclient.protocol", BASELINE_PACKAGE))
    sys.path.insert(0, str(into))
    return importlib.import_module(f"{BASELINE_PACKAGE}.frame")


TOPIC_ID = uuid.UUID("6a1f7c1e-0d35-4c11-8a49-0f3e2a9b7d11")


def produce_request(records: Any, version: int = 12) -> dict[str, Any]:
    """The Sender's body: v13 (KIP-516) has the topic's id too, as the Sender writes it."""
    topic: dict[str, Any] = {"name": "bench-topic"}
    if version >= 13:
        topic["topic_id"] = TOPIC_ID
    return {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30000,
        "topic_data": [{**topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def produce_response(version: int) -> dict[str, Any]:
    named = {"topic_id": TOPIC_ID} if version >= 13 else {"name": "bench-topic"}
    return {
        "responses": [
            {
                **named,
                "partition_responses": [
                    {"index": 0, "error_code": 0, "base_offset": 1234, "log_append_time_ms": -1}
                ],
            }
        ],
        "throttle_time_ms": 0,
    }


METADATA_REQUEST = {"topics": [], "allow_auto_topic_creation": False}
METADATA_RESPONSE = {
    "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
    "cluster_id": "bench-cluster",
    "controller_id": 1,
    "topics": [],
}


def cases(frame: ModuleType) -> list[tuple[str, int, Callable[[], Any]]]:
    """(message, version, one call) for everything timed, using ``frame``'s functions."""
    out: list[tuple[str, int, Callable[[], Any]]] = []
    encode, decode = frame.encode_request, frame.decode_response

    def response(api_key: int, version: int, body: dict[str, Any]) -> bytes:
        # encoded by this tree; the old and new decoders read the same bytes
        data: bytes = new_frame.frame_bytes(new_frame.encode_response(api_key, version, 7, body))
        return data[4:]

    for version in range(3, 14):
        body = produce_request(RECORDS, version)
        out.append(
            (
                "ProduceRequest encode",
                version,
                lambda v=version, b=body: encode(0, v, 7, "bench", b),
            )
        )
        if version == 9:
            view_body = produce_request(memoryview(RECORDS))
            out.append(
                (
                    "ProduceRequest encode (memoryview)",
                    version,
                    lambda v=version, b=view_body: encode(0, v, 7, "bench", b),
                )
            )
    for version in range(3, 14):
        data = response(PRODUCE, version, produce_response(version))
        out.append(("ProduceResponse decode", version, lambda v=version, d=data: decode(0, v, d)))
    out.extend(
        (
            "MetadataRequest encode",
            version,
            lambda v=version: encode(METADATA, v, 7, "bench", METADATA_REQUEST),
        )
        for version in range(14)
    )
    for version in range(14):
        data = response(METADATA, version, METADATA_RESPONSE)
        out.append(("MetadataResponse decode", version, lambda v=version, d=data: decode(3, v, d)))
    return out


def comparable(result: Any) -> Any:
    """An encode's bytes or a decode's (correlation id, body) with views made bytes."""
    if isinstance(result, list):
        return b"".join(bytes(part) for part in result)
    correlation_id, body = result
    return correlation_id, _plain(body)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def calls_for(fn: Callable[[], Any], ms: float) -> int:
    """How many calls take about ``ms`` milliseconds."""
    calls = 16
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed * 1000 >= ms / 4:
            return max(1, int(calls * ms / 1000 / elapsed))
        calls *= 4


def trial_us(fn: Callable[[], Any], calls: int) -> float:
    """Microseconds per call over ``calls`` calls, in process CPU time."""
    start = time.process_time_ns()
    for _ in range(calls):
        fn()
    return (time.process_time_ns() - start) / calls / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help="git ref of the 'old' codec")
    parser.add_argument("--trials", type=int, default=100, help="alternating trials per side")
    parser.add_argument("--ms", type=float, default=2, help="milliseconds per trial")
    parser.add_argument("--only", default="", help="run only messages containing this text")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        old_frame = load_baseline(args.baseline, Path(tmp))
        old_cases = cases(old_frame)
        new_cases = cases(new_frame)
        rows = []
        for (message, version, old), (_, _, new) in zip(old_cases, new_cases, strict=True):
            if args.only not in message:
                continue
            if comparable(old()) != comparable(new()):
                raise SystemExit(f"{message} v{version}: old and new results differ")
            old_calls, new_calls = calls_for(old, args.ms), calls_for(new, args.ms)
            old_us = new_us = float("inf")
            for _ in range(args.trials):  # alternate, so both sides see the same machine
                old_us = min(old_us, trial_us(old, old_calls))
                new_us = min(new_us, trial_us(new, new_calls))
            rows.append((message, version, old_us, new_us))

    commit = subprocess.run(
        ["git", "rev-parse", "--short", args.baseline],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"Protocol codec: µs per call, old = kclient/protocol at {commit}, new = this tree")
    print()
    print("| message | version | old µs | new µs | speedup |")
    print("|---|---:|---:|---:|---:|")
    for message, version, old_us, new_us in rows:
        print(f"| {message} | v{version} | {old_us:.2f} | {new_us:.2f} | {old_us / new_us:.1f}x |")
    print()
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}),"
        f" {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()};"
        f" best of {args.trials} alternating trials of ~{args.ms:g} ms each, process CPU time"
    )


if __name__ == "__main__":
    main()
