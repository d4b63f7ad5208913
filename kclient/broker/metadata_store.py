"""The cluster metadata of a log dir: topics, their partitions and leader epochs.

What Kafka keeps in its metadata log (KRaft) and in each partition directory's
``partition.metadata``, reduced to files written atomically (``durable_file``):

* ``<log_dir>/topics.json``: every topic's name, id, configs, replica lists and the
  leader epoch of each partition, rewritten whole on every change (topics are few; a
  change is rare next to produce traffic);
* ``<log_dir>/<topic>-<n>/partition.metadata``: the topic's name and id, written when the
  partition is created, so that the topics (not their configs) can be rebuilt from the
  partition directories if ``topics.json`` is lost or damaged;
* ``<log_dir>/.kclient-clean-shutdown``: written after every log was flushed and closed,
  removed when the broker starts; its absence means the last shutdown was a crash, and
  the logs' unflushed tails are then checked on recovery.

A partition directory whose topic is not in ``topics.json`` is a leftover (a topic
deleted, or created by a request that never completed, when the process died) and is
removed on start-up. Called under the controller's lock.
"""

from __future__ import annotations

import logging
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kclient import errors
from kclient.broker.durable_file import DamagedFileError, read_json, write_json

log = logging.getLogger(__name__)

TOPICS_FILE = "topics.json"
PARTITION_METADATA_FILE = "partition.metadata"
CLEAN_SHUTDOWN_FILE = ".kclient-clean-shutdown"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<index>\d+)$")


class LogDirError(errors.KafkaError):
    """The broker cannot start on its log dir: what it holds cannot be read or rebuilt.
    The message names the file and what to do."""


@dataclass
class TopicRecord:
    """One topic as stored: enough to reopen its logs and elect its leaders."""

    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    replicas: list[list[int]]
    leader_epochs: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic_id": str(self.topic_id),
            "partitions": self.replicas,
            "leader_epochs": self.leader_epochs,
            "configs": self.configs,
        }


class MetadataStore:
    """The metadata files of one log dir."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.topics_path = log_dir / TOPICS_FILE

    # ---- clean shutdown --------------------------------------------------------------

    def take_clean_shutdown_marker(self) -> bool:
        """Whether the last shutdown was clean; the marker is removed (a crash from now
        on must look unclean)."""
        marker = self.log_dir / CLEAN_SHUTDOWN_FILE
        if not marker.exists():
            return False
        marker.unlink()
        return True

    def mark_clean_shutdown(self) -> None:
        (self.log_dir / CLEAN_SHUTDOWN_FILE).write_bytes(b"")

    # ---- topics ----------------------------------------------------------------------

    def save(self, topics: list[TopicRecord]) -> None:
        """Rewrite ``topics.json`` atomically. Raises OSError."""
        data = {t.name: t.to_json() for t in topics}
        write_json(self.topics_path, {"version": 2, "topics": data})

    def load(self) -> list[TopicRecord]:
        """The stored topics. A missing ``topics.json`` with partition directories, or a
        damaged one, is rebuilt from the partition directories (configs are lost, with
        a WARNING naming the topics); raises LogDirError if even that is impossible."""
        path = self.topics_path
        try:
            return _parse_topics(path, read_json(path))
        except FileNotFoundError:
            if not self._partition_dirs():
                return []
            problem = f"{path} is missing"
        except DamagedFileError as exc:
            problem = str(exc)
        return self._rebuild(problem)

    def _rebuild(self, problem: str) -> list[TopicRecord]:
        found: dict[str, tuple[uuid.UUID, int]] = {}
        unreadable: list[Path] = []
        for directory, _, _ in self._partition_dirs():
            try:
                name, topic_id, index = read_partition_metadata(directory)
            except (DamagedFileError, OSError, LogDirError):
                unreadable.append(directory)
                continue
            known = found.get(name)
            if known is not None and known[0] != topic_id:
                unreadable.append(directory)
                continue
            found[name] = (topic_id, max(index, known[1] if known else -1))
        if unreadable and not found:
            raise LogDirError(
                f"{problem}, and the partition directories ({unreadable[0].name}, ...) "
                "hold no readable partition.metadata to rebuild it from: restore "
                f"{self.topics_path.name} from a backup, or start with an empty --log-dir"
            )
        topics = [
            TopicRecord(name, topic_id, {}, [[] for _ in range(last + 1)])
            for name, (topic_id, last) in sorted(found.items())
        ]
        damaged = self.topics_path.with_name(self.topics_path.name + ".damaged")
        if self.topics_path.exists():
            self.topics_path.replace(damaged)
        log.warning(
            "%s; rebuilt %d topics (%s) from their partition directories; their configs "
            "are lost (set them again)%s",
            problem,
            len(topics),
            ", ".join(t.name for t in topics) or "none",
            f"; the damaged file was kept as {damaged.name}" if damaged.exists() else "",
        )
        for directory in unreadable:
            log.warning("%s has no readable partition.metadata; ignoring it", directory)
        self.save(topics)
        return topics

    # ---- partition directories -------------------------------------------------------

    def partition_dir(self, topic: str, index: int) -> Path:
        return self.log_dir / f"{topic}-{index}"

    def _partition_dirs(self) -> list[tuple[Path, str, int]]:
        """(directory, topic, index) of every directory that looks like a partition's.
        Internal logs (names starting with ``__``) are not partitions of user topics."""
        found = []
        for path in self.log_dir.iterdir():
            match = _PARTITION_DIR.match(path.name)
            if match and path.is_dir() and not path.name.startswith("__"):
                found.append((path, match["topic"], int(match["index"])))
        return found

    def remove_strays(self, topics: list[TopicRecord]) -> None:
        """Delete partition directories no stored topic owns (leftovers of a crash)."""
        owned = {(t.name, i) for t in topics for i in range(len(t.replicas))}
        for directory, topic, index in self._partition_dirs():
            if (topic, index) in owned:
                continue
            if not (directory / PARTITION_METADATA_FILE).exists() and any(
                p.suffix not in (".log", ".snapshot") for p in directory.iterdir()
            ):
                continue  # not ours: leave it alone
            log.warning("removing %s: no topic owns it (left by a crash)", directory)
            shutil.rmtree(directory, ignore_errors=True)


def write_partition_metadata(directory: Path, topic: str, topic_id: uuid.UUID, index: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    # not fsynced: topics.json (fsynced) is what a restart reads; this file only helps
    # rebuild it, and fsyncing each of 10,000 partitions took seconds
    write_json(
        directory / PARTITION_METADATA_FILE,
        {"version": 1, "topic": topic, "topic_id": str(topic_id), "partition": index},
        sync=False,
    )


def read_partition_metadata(directory: Path) -> tuple[str, uuid.UUID, int]:
    path = directory / PARTITION_METADATA_FILE
    data = read_json(path)
    try:
        return str(data["topic"]), uuid.UUID(data["topic_id"]), int(data["partition"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DamagedFileError(f"{path} is damaged: {exc!r}") from None


def _parse_topics(path: Path, data: Any) -> list[TopicRecord]:
    try:
        topics = []
        for name, info in data["topics"].items():
            replicas = [[int(r) for r in rs] for rs in info["partitions"]]
            epochs = [int(e) for e in info.get("leader_epochs", [])]
            if len(epochs) != len(replicas):
                epochs = [-1] * len(replicas)
            configs = {str(k): str(v) for k, v in info.get("configs", {}).items()}
            topics.append(
                TopicRecord(str(name), uuid.UUID(info["topic_id"]), configs, replicas, epochs)
            )
        return topics
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DamagedFileError(f"{path} is damaged: unexpected content ({exc!r})") from None
