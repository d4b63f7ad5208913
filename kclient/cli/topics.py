"""``kclient topics``: list, describe, create and delete topics (Kafka's ``kafka-topics.sh``).

Sends Metadata, CreateTopics and DeleteTopics through the command-line tools' blocking
connection (``kclient.cli.admin``), so it works against any Kafka cluster and against
``kclient-broker``. Runs on the caller's thread; every request is bounded by
``--timeout-ms``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import IO, Any

from kclient import errors
from kclient.cli.admin import ClusterReader, exit_code
from kclient.cli.properties import parse_pairs
from kclient.protocol import ApiKey

_INTERNAL_PREFIX = "__"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kclient topics",
        description="List, describe, create and delete topics of a Kafka cluster.",
    )
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def common(name: str, text: str) -> argparse.ArgumentParser:
        q = sub.add_parser(name, help=text, description=text)
        q.add_argument(
            "--bootstrap-server",
            required=True,
            metavar="HOST:PORT[,...]",
            help="a broker of the cluster to ask",
        )
        q.add_argument(
            "--timeout-ms",
            type=int,
            default=30000,
            metavar="MS",
            help="how long to wait for each answer (default: %(default)s)",
        )
        return q

    q = common("list", "print the name of every topic, one a line")
    q.add_argument(
        "--exclude-internal", action="store_true", help="leave out topics whose name starts __"
    )
    q = common("describe", "print each partition's leader, replicas and in-sync replicas")
    q.add_argument("--topic", action="append", help="the topic (repeat for more; default: all)")
    q = common("create", "create a topic")
    q.add_argument("--topic", required=True)
    q.add_argument(
        "--partitions",
        type=int,
        default=-1,
        metavar="N",
        help="number of partitions (default: the broker's num.partitions)",
    )
    q.add_argument(
        "--replication-factor",
        type=int,
        default=-1,
        metavar="N",
        help="copies of each partition (default: the broker's default.replication.factor)",
    )
    q.add_argument(
        "--config",
        action="append",
        metavar="NAME=VALUE",
        help="a topic setting, for example retention.ms=86400000 (repeat for more)",
    )
    q.add_argument(
        "--if-not-exists", action="store_true", help="succeed when the topic exists already"
    )
    q = common("delete", "delete a topic and its records")
    q.add_argument("--topic", required=True)
    q.add_argument("--if-exists", action="store_true", help="succeed when there is no such topic")
    return p


def _metadata(reader: ClusterReader, topics: list[str] | None) -> list[dict[str, Any]]:
    body = reader.bootstrap.request(
        ApiKey.METADATA,
        {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
        },
    )
    return sorted(body["topics"], key=lambda t: str(t["name"]))


def list_topics(reader: ClusterReader, exclude_internal: bool, out: IO[str]) -> int:
    for entry in _metadata(reader, None):
        name = str(entry["name"])
        if exclude_internal and name.startswith(_INTERNAL_PREFIX):
            continue
        print(name, file=out)
    return 0


def describe_topics(
    reader: ClusterReader, topics: list[str] | None, out: IO[str], err: IO[str]
) -> int:
    status = 0
    for entry in _metadata(reader, topics):
        name = entry["name"]
        if entry["error_code"]:
            error = errors.for_code(entry["error_code"])
            print(f"error: topic {name!r}: {error.__name__}", file=err)
            status = 1
            continue
        partitions = sorted(entry["partitions"], key=lambda p: int(p["partition_index"]))
        replicas = len(partitions[0]["replica_nodes"]) if partitions else 0
        print(
            f"Topic: {name}\tPartitionCount: {len(partitions)}\tReplicationFactor: {replicas}",
            file=out,
        )
        for p in partitions:
            print(
                f"\tTopic: {name}\tPartition: {p['partition_index']}\t"
                f"Leader: {p['leader_id']}\t"
                f"Replicas: {','.join(map(str, p['replica_nodes']))}\t"
                f"Isr: {','.join(map(str, p['isr_nodes']))}",
                file=out,
            )
    return status


def create_topic(reader: ClusterReader, args: argparse.Namespace, out: IO[str]) -> int:
    configs = parse_pairs(args.config, "--config")
    body = reader.bootstrap.request(
        ApiKey.CREATE_TOPICS,
        {
            "topics": [
                {
                    "name": args.topic,
                    "num_partitions": args.partitions,
                    "replication_factor": args.replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": str(v)} for k, v in configs.items()],
                }
            ],
            "timeout_ms": args.timeout_ms,
            "validate_only": False,
        },
    )
    result = body["topics"][0]
    code = result["error_code"]
    if code == errors.TopicAlreadyExistsError.code and args.if_not_exists:
        print(f"Topic {args.topic} exists already.", file=out)
        return 0
    if code:
        raise errors.for_code(code)(
            f"creating topic {args.topic!r}: {result.get('error_message') or 'refused'}"
            + (
                " (add --if-not-exists to accept it)"
                if code == errors.TopicAlreadyExistsError.code
                else ""
            )
        )
    print(f"Created topic {args.topic}.", file=out)
    return 0


def delete_topic(reader: ClusterReader, args: argparse.Namespace, out: IO[str]) -> int:
    body = reader.bootstrap.request(
        ApiKey.DELETE_TOPICS,
        {
            "topics": [{"name": args.topic}],
            "topic_names": [args.topic],
            "timeout_ms": args.timeout_ms,
        },
    )
    result = body["responses"][0]
    code = result["error_code"]
    if code == errors.UnknownTopicOrPartitionError.code and args.if_exists:
        print(f"Topic {args.topic} does not exist.", file=out)
        return 0
    if code:
        raise errors.for_code(code)(
            f"deleting topic {args.topic!r}: {result.get('error_message') or 'refused'}"
        )
    print(f"Deleted topic {args.topic}.", file=out)
    return 0


def run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    reader = ClusterReader(args.bootstrap_server, timeout_s=args.timeout_ms / 1000)
    try:
        if args.action == "list":
            return list_topics(reader, args.exclude_internal, out)
        if args.action == "describe":
            return describe_topics(reader, args.topic, out, err)
        if args.action == "create":
            return create_topic(reader, args, out)
        return delete_topic(reader, args, out)
    finally:
        reader.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "timeout_ms", 1) <= 0:
        print("error: --timeout-ms must be above 0", file=sys.stderr)
        return 2
    return exit_code(lambda: run(args, sys.stdout, sys.stderr))


if __name__ == "__main__":
    sys.exit(main())
