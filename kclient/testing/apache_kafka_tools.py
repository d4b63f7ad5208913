"""``python -m kclient.testing.apache_kafka fetch``: everything the Apache Kafka test peers
need, ahead of the tests (the jars of both versions, the Java reader, class archives).

Not part of the producer: the warm-up step of ``scripts/test`` for
:mod:`kclient.testing.apache_kafka`. Without ``java`` or ``mvn`` it prints one line saying
what to install and exits with 1.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from kclient.testing.apache_kafka import VERSIONS, ApacheKafka, kafka_jars
from kclient.testing.apache_kafka_java import compile_reader
from kclient.testing.apache_kafka_node import JVM_OPTIONS, class_archive
from kclient.testing.maven import JavaToolMissing, require_java

__all__ = ["fetch", "main"]


def fetch(versions: Sequence[str] = VERSIONS) -> list[Path]:
    """Download the jars of ``versions`` (and check ``java``), compile the Java reader
    and make each version's class-data-sharing archive; the folders of jars."""
    require_java()
    folders = [kafka_jars(version) for version in versions]
    compile_reader(folders[0])
    for version, libs in zip(versions, folders, strict=True):
        archive = class_archive(libs)
        if not archive.exists():
            _make_class_archive(version, archive)
    return folders


def _make_class_archive(version: str, archive: Path) -> None:
    """Run a broker once with ``-XX:ArchiveClassesAtExit`` (the JVM writes the classes it
    loaded when it exits), then move the archive into place."""
    staging = archive.with_name(f"{archive.name}.{uuid.uuid4().hex[:8]}")
    flag = f"-XX:ArchiveClassesAtExit={staging}"
    kafka = ApacheKafka(version, stop_timeout_s=60.0)
    kafka.jvm_options = (*JVM_OPTIONS, flag)
    with kafka:
        kafka.create_topic("warm-up", 1)
        kafka.stop_broker(1)  # a clean exit writes the archive
    if staging.exists():
        staging.replace(archive)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kclient.testing.apache_kafka fetch [VERSION...]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "fetch":
        print("usage: python -m kclient.testing.apache_kafka fetch [VERSION...]", file=sys.stderr)
        return 2
    versions = args[1:] or list(VERSIONS)
    try:
        folders = fetch(versions)
    except JavaToolMissing as exc:
        print(f"kclient.testing.apache_kafka: {exc}", file=sys.stderr)
        return 1
    for version, folder in zip(versions, folders, strict=True):
        print(f"Apache Kafka {version}: {folder}")
    return 0
