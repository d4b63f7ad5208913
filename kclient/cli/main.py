"""``kclient``: the umbrella command (``kclient demo``, ``kclient broker``, ...)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kclient.errors import KafkaError


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {
        "demo": "produce 1,000,000 records to an embedded 3-broker cluster and verify them",
        "broker": "run the embedded broker (same as kclient-broker)",
        "topics": "list, describe, create and delete topics",
        "console-producer": "send lines from stdin (same as kclient-console-producer)",
        "console-consumer": "print a topic's records (same as kclient-console-consumer)",
        "producer-perf": "kafka-producer-perf-test (same as kclient-producer-perf)",
    }
    if not args or args[0] not in commands:
        p = argparse.ArgumentParser(prog="kclient")
        p.add_argument(
            "command",
            choices=sorted(commands),
            help="; ".join(f"{name}: {text}" for name, text in commands.items()),
        )
        p.parse_args(args[:1])
        return 2
    command, rest = args[0], args[1:]
    try:
        if command == "demo":
            from kclient.cli import demo

            return demo.main(rest)
        if command == "broker":
            from kclient.broker.__main__ import main as broker_main

            return int(broker_main(rest) or 0)
        if command == "topics":
            from kclient.cli import topics

            return topics.main(rest)
        if command == "console-consumer":
            from kclient.cli import console_consumer

            return console_consumer.main(rest)
        if command == "console-producer":
            from kclient.cli import console_producer

            return console_producer.main(rest)
        from kclient.cli import producer_perf

        return producer_perf.main(rest)
    except KafkaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
