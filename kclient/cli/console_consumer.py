"""``kclient-console-consumer``: print a topic's records (Kafka's ``kafka-console-consumer.sh``).

A small reader on top of Fetch and ListOffsets, through the command-line tools' blocking
connection (``kclient.cli.admin``): no consumer group, no committed offsets. It reads
every partition of the topic (or one, with ``--partition``) from the end, from the
beginning (``--from-beginning``) or from an offset, prints each record's value (and, when
asked, its key, headers, partition, offset and timestamp) one per line, and stops after
``--max-messages`` records or when nothing new arrived for ``--timeout-ms``. Control
records (transaction markers) are skipped. Runs on the caller's thread.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from kclient import errors
from kclient.cli.admin import ClusterReader, exit_code
from kclient.cli.properties import parse_pairs
from kclient.protocol import ApiKey
from kclient.record import Record, iter_batches

_EARLIEST = -2
_LATEST = -1
_FETCH_WAIT_MS = 200
_FETCH_MAX_BYTES = 8 << 20


@dataclass(frozen=True)
class Formatter:
    """How a record becomes a line (Kafka's ``print.*`` properties)."""

    print_key: bool = False
    print_value: bool = True
    print_headers: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_timestamp: bool = False
    key_separator: str = "\t"
    headers_separator: str = ","
    null_literal: str = "null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> Formatter:
        names = {
            "print.key": "print_key",
            "print.value": "print_value",
            "print.headers": "print_headers",
            "print.partition": "print_partition",
            "print.offset": "print_offset",
            "print.timestamp": "print_timestamp",
            "key.separator": "key_separator",
            "headers.separator": "headers_separator",
            "null.literal": "null_literal",
        }
        values: dict[str, Any] = {}
        for name, text in props.items():
            attr = names.get(name)
            if attr is None:
                raise errors.ConfigError(
                    f"unknown --property {name!r}; known: {', '.join(sorted(names))}"
                )
            if attr.startswith("print_"):
                if text.lower() not in ("true", "false"):
                    raise errors.ConfigError(f"--property {name} must be true or false")
                values[attr] = text.lower() == "true"
            else:
                values[attr] = text.encode().decode("unicode_escape")
        return cls(**values)

    def line(self, partition: int, record: Record) -> bytes:
        sep = self.key_separator.encode()
        parts: list[bytes] = []
        if self.print_timestamp:
            parts.append(f"CreateTime:{record.timestamp}".encode())
        if self.print_partition:
            parts.append(f"Partition:{partition}".encode())
        if self.print_offset:
            parts.append(f"Offset:{record.offset}".encode())
        if self.print_headers:
            if record.headers:
                parts.append(
                    self.headers_separator.encode().join(
                        name.encode() + b":" + self._bytes(value) for name, value in record.headers
                    )
                )
            else:
                parts.append(b"NO_HEADERS")
        if self.print_key:
            parts.append(self._bytes(record.key))
        if self.print_value:
            parts.append(self._bytes(record.value))
        return sep.join(parts) + b"\n"

    def _bytes(self, data: bytes | None) -> bytes:
        return self.null_literal.encode() if data is None else data


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kclient-console-consumer",
        description="Print the records of a Kafka topic, one per line. Reads without a "
        "consumer group: nothing is committed.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    p.add_argument("--topic", required=True)
    p.add_argument(
        "--partition", type=int, metavar="N", help="read only this partition (default: all)"
    )
    start = p.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the oldest record instead of waiting for new ones",
    )
    start.add_argument(
        "--offset",
        type=int,
        metavar="N",
        help="start at this offset (needs --partition)",
    )
    p.add_argument(
        "--max-messages",
        type=int,
        metavar="N",
        help="stop after printing N records (default: no limit)",
    )
    p.add_argument(
        "--timeout-ms",
        type=int,
        metavar="MS",
        help="stop when no record arrived for MS milliseconds (default: wait until Ctrl-C)",
    )
    p.add_argument(
        "--property",
        action="append",
        metavar="NAME=VALUE",
        help="what to print: print.key, print.headers, print.partition, print.offset, "
        "print.timestamp, print.value (true or false), key.separator (default a tab), "
        "headers.separator (default ','), null.literal (default 'null')",
    )
    return p


class PartitionReader:
    """Fetches from each partition's leader in turn, remembering the next offset to read."""

    def __init__(self, reader: ClusterReader, topic: str, partitions: list[int]) -> None:
        self.reader = reader
        self.topic = topic
        self.positions: dict[int, int] = dict.fromkeys(partitions, 0)

    def seek(self, which: int) -> None:
        """Move every partition to its earliest (-2) or latest (-1) offset."""
        offsets = self.reader.end_offsets(self.topic, which)
        for partition in self.positions:
            self.positions[partition] = offsets[partition]

    def poll(self) -> list[tuple[int, Record]]:
        """One Fetch per leader; the records read, in partition then offset order."""
        by_leader: dict[int, list[int]] = {}
        for partition, leader in self.reader.leaders(self.topic).items():
            if partition in self.positions:
                by_leader.setdefault(leader, []).append(partition)
        out: list[tuple[int, Record]] = []
        for leader, partitions in by_leader.items():
            body = self.reader.node(leader).request(
                ApiKey.FETCH,
                {
                    "replica_id": -1,
                    "max_wait_ms": _FETCH_WAIT_MS,
                    "min_bytes": 1,
                    "max_bytes": _FETCH_MAX_BYTES,
                    "isolation_level": 0,
                    "topics": [
                        {
                            "topic": self.topic,
                            "partitions": [
                                {
                                    "partition": p,
                                    "fetch_offset": self.positions[p],
                                    "partition_max_bytes": _FETCH_MAX_BYTES,
                                }
                                for p in sorted(partitions)
                            ],
                        }
                    ],
                },
            )
            for topic in body["responses"]:
                for data in topic["partitions"]:
                    out.extend(self._records(data))
        return out

    def _records(self, data: dict[str, Any]) -> list[tuple[int, Record]]:
        partition = int(data["partition_index"])
        position = self.positions[partition]
        if data["error_code"] == errors.OffsetOutOfRangeError.code:
            raise errors.OffsetOutOfRangeError(
                f"offset {position} is not in {self.topic}-{partition} "
                f"(its records end at {data['high_watermark']})"
            )
        if data["error_code"]:
            raise errors.for_code(data["error_code"])(
                f"Fetch {self.topic}-{partition} at offset {position}"
            )
        out: list[tuple[int, Record]] = []
        for batch in iter_batches(data["records"] or b""):
            if not batch.is_control:
                out.extend(
                    (partition, record) for record in batch.records() if record.offset >= position
                )
            position = max(position, batch.next_offset)
        self.positions[partition] = position
        return out


def run(args: argparse.Namespace, out: IO[bytes], err: IO[str]) -> int:
    formatter = Formatter.from_properties(
        {k: str(v) for k, v in parse_pairs(args.property, "--property").items()}
    )
    reader = ClusterReader(args.bootstrap_server, client_id="console-consumer")
    printed = 0
    try:
        leaders = reader.leaders(args.topic)
        if args.partition is not None and args.partition not in leaders:
            raise errors.ConfigError(
                f"--partition {args.partition}: topic {args.topic!r} has partitions "
                f"0 to {len(leaders) - 1}"
            )
        partitions = sorted(leaders) if args.partition is None else [args.partition]
        consumer = PartitionReader(reader, args.topic, partitions)
        consumer.seek(_EARLIEST if args.from_beginning else _LATEST)
        if args.offset is not None:
            consumer.positions[partitions[0]] = args.offset
        last_record = time.monotonic()
        while args.max_messages is None or printed < args.max_messages:
            records = consumer.poll()
            now = time.monotonic()
            if records:
                last_record = now
            for partition, record in records:
                out.write(formatter.line(partition, record))
                printed += 1
                if args.max_messages is not None and printed >= args.max_messages:
                    break
            out.flush()
            if args.timeout_ms is not None and (now - last_record) * 1000 >= args.timeout_ms:
                break
    except KeyboardInterrupt:
        pass
    finally:
        reader.close()
    print(f"Processed a total of {printed} messages", file=err)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.offset is not None and args.partition is None:
        print("error: --offset needs --partition", file=sys.stderr)
        return 2
    for flag, value in (("--max-messages", args.max_messages), ("--timeout-ms", args.timeout_ms)):
        if value is not None and value <= 0:
            print(f"error: {flag} must be above 0", file=sys.stderr)
            return 2
    return exit_code(lambda: run(args, sys.stdout.buffer, sys.stderr))


if __name__ == "__main__":
    sys.exit(main())
