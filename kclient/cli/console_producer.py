"""``kclient-console-producer``: kafka-console-producer.sh for kclient.

Reads lines from stdin (or ``--file``), turns each into a record with the line reader
(``--property parse.key=true`` etc.) and sends it. At the end of input, or on Ctrl-C, it
flushes, prints how many records were sent and how many failed, and exits non-zero when
any failed. Option names and defaults follow Kafka's tool; explicit flags win over
``--producer-property`` and ``--producer.config``, which win over the tool's defaults.
"""

from __future__ import annotations

import argparse
import io
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import IO, Any

from kclient.cli.line_reader import LineReader, LineReaderConfig, MalformedLineError
from kclient.cli.properties import load_properties, parse_pairs
from kclient.errors import ConfigError, KafkaError, KafkaTimeoutError, RecordTooLargeError
from kclient.settings import COMPRESSION_TYPES

CODECS = COMPRESSION_TYPES

# (flag dest, producer setting, the console tool's default)
_FLAG_SETTINGS: tuple[tuple[str, str, object], ...] = (
    ("batch_size", "batch.size", 16384),
    ("timeout", "linger.ms", 1000),
    ("request_required_acks", "acks", "-1"),
    ("request_timeout_ms", "request.timeout.ms", 1500),
    ("message_send_max_retries", "retries", 3),
    ("retry_backoff_ms", "retry.backoff.ms", 100),
    ("metadata_expiry_ms", "metadata.max.age.ms", 300000),
    ("max_block_ms", "max.block.ms", 60000),
    ("max_memory_bytes", "buffer.memory", 33554432),
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kclient-console-producer",
        description="Read lines from stdin (or --file) and produce them to a Kafka topic.",
    )
    p.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...]")
    p.add_argument("--topic", required=True)
    p.add_argument("--file", help="read lines from this file instead of stdin")
    p.add_argument("--sync", action="store_true", help="wait for each record's ack")
    p.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        default=None,
        choices=CODECS,
        help="none, gzip (the default when given without a value), snappy, lz4 or zstd",
    )
    p.add_argument("--batch-size", type=int)
    p.add_argument("--timeout", type=int, help="linger.ms (default 1000)")
    p.add_argument("--request-required-acks", help="acks: -1/all, 0 or 1 (default -1)")
    p.add_argument("--request-timeout-ms", type=int)
    p.add_argument("--message-send-max-retries", type=int)
    p.add_argument("--retry-backoff-ms", type=int)
    p.add_argument("--metadata-expiry-ms", type=int)
    p.add_argument("--max-block-ms", type=int)
    p.add_argument("--max-memory-bytes", type=int)
    p.add_argument("--producer-property", action="append", metavar="K=V")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE")
    p.add_argument("--property", action="append", metavar="K=V", help="line reader property")
    p.add_argument("--reader-property", action="append", metavar="K=V")
    return p


def producer_settings(args: argparse.Namespace) -> dict[str, object]:
    """The producer configuration, with Kafka's precedence rules."""
    props: dict[str, object] = {}
    if args.producer_config:
        props.update(load_properties(args.producer_config))
    props.update(parse_pairs(args.producer_property, "--producer-property"))
    props["bootstrap.servers"] = args.bootstrap_server
    props.setdefault("client.id", "console-producer")
    if args.compression_codec is not None or "compression.type" not in props:
        props["compression.type"] = args.compression_codec or "none"
    for dest, setting, default in _FLAG_SETTINGS:
        given = getattr(args, dest)
        if given is not None:
            props[setting] = given
        else:
            props.setdefault(setting, default)
    if str(props["acks"]) == "-1":
        props["acks"] = "all"
    return props


class _Tally:
    """Counts acks and failures; runs on the producer's sender thread."""

    def __init__(self, err: IO[str]) -> None:
        self.lock = threading.Lock()
        self.acked = 0
        self.failed = 0
        self.err = err

    def count_unsent(self) -> None:
        """A line that stopped the run unsent (``send()`` raised, or it was malformed)."""
        with self.lock:
            self.failed += 1

    def callback(self, _metadata: object, exc: BaseException | None) -> None:
        with self.lock:
            if exc is None:
                self.acked += 1
                return
            self.failed += 1
            if self.failed <= 5:
                print(f"error: record not delivered: {exc}", file=self.err)
            elif self.failed == 6:
                print("error: more records failed (not shown)", file=self.err)


def run(args: argparse.Namespace, lines: Iterable[str], err: IO[str], interactive: bool) -> int:
    from kclient import KafkaProducer

    reader = LineReader(
        LineReaderConfig.from_properties(
            {
                **parse_pairs(args.property, "--property"),
                **parse_pairs(args.reader_property, "--reader-property"),
            }
        )
    )
    tally = _Tally(err)
    skipped = 0
    aborted = False
    started = time.monotonic()
    last_progress = started
    producer: Any = KafkaProducer(producer_settings(args))
    try:
        for raw in lines:
            line = raw[:-1] if raw.endswith("\n") else raw
            try:
                parsed = reader.parse(line)
            except MalformedLineError as exc:
                if not reader.config.ignore_error:
                    tally.count_unsent()  # the line that stopped the run: not sent
                    print(f"error: {exc}", file=err)
                    aborted = True
                    break
                skipped += 1
                print(f"warning: skipped {exc}", file=err)
                continue
            try:
                future = producer.send(
                    args.topic,
                    value=parsed.value,
                    key=parsed.key,
                    headers=parsed.headers or None,
                    callback=tally.callback,
                )
            except RecordTooLargeError as exc:  # this line only: reported, the rest go on
                tally.callback(None, exc)
                continue
            if args.sync:
                try:
                    future.result()
                except KafkaError:
                    pass  # counted and reported by the callback
            now = time.monotonic()
            if not interactive and now - last_progress >= 1.0:
                last_progress = now
                print(
                    f"\r{reader.line_number} lines read, {tally.acked} records acknowledged",
                    end="",
                    file=err,
                    flush=True,
                )
    except KeyboardInterrupt:
        print("\ninterrupted: flushing what was read so far", file=err)
    except KafkaTimeoutError as exc:  # send() could not queue the line: it failed
        tally.count_unsent()
        print(f"error: {exc} (--bootstrap-server {args.bootstrap_server})", file=err)
        aborted = True
    except KafkaError as exc:  # the topic's (invalid, not authorized) or the producer's
        tally.count_unsent()
        print(f"error: {type(exc).__name__}: {exc}", file=err)
        aborted = True
    finally:
        producer.flush()
        producer.close()
    if not interactive and last_progress != started:
        print(file=err)
    print(f"{tally.acked} records sent, {tally.failed} failed, {skipped} lines skipped", file=err)
    return 1 if (tally.failed or aborted) else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.file:
            with open(args.file, encoding="utf-8", errors="surrogateescape") as handle:
                return run(args, handle, sys.stderr, interactive=False)
        # lines are split as text, but bytes that are not UTF-8 are sent exactly as read
        if isinstance(sys.stdin, io.TextIOWrapper):
            sys.stdin.reconfigure(encoding="utf-8", errors="surrogateescape")
        return run(args, sys.stdin, sys.stderr, interactive=sys.stdin.isatty())
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
