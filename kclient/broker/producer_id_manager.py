"""Producer ids that are never handed out twice (Kafka's ``ProducerIdManager``).

Kafka's controller gives brokers producer ids in blocks of 1000 and records the end of
each block durably before any id of it is used, so that an id is unique for the life of
the cluster even across restarts (a reused id would make a new producer's first batches
look like duplicates of an old producer's, answered with offsets that hold someone
else's records). The embedded cluster does the same for all its brokers at once: with a
log dir, ``producer_ids.json`` holds the first id of the next block and is rewritten
atomically (``durable_file``) before a new block is used; without one, ids live in
memory.

A block of ids not used up before a restart is skipped, as in Kafka. A log dir whose
file is missing or damaged (written by an older kclient, or by hand) starts above every
producer id found in the partition logs, far enough to clear any block that may have
been handed out without being written to a log.

Thread-safe: request handler threads of every broker call ``next_id``.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from kclient.broker.durable_file import DamagedFileError, read_json, write_json

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000
FIRST_PRODUCER_ID = 1000
#: How far above the largest producer id seen in the logs a log dir without a readable
#: block file starts: more ids than could have been handed out unseen.
_RECOVERY_GAP = 1 << 32
FILE_NAME = "producer_ids.json"


class ProducerIdManager:
    """Hands out producer ids from durably reserved blocks."""

    def __init__(self, log_dir: Path | None, block_size: int = BLOCK_SIZE) -> None:
        self._path = log_dir / FILE_NAME if log_dir is not None else None
        self._block_size = block_size
        self._lock = threading.Lock()
        self._next_id = FIRST_PRODUCER_ID
        self._block_end = FIRST_PRODUCER_ID  # exclusive: the next id needs a new block
        self._next_block_start = FIRST_PRODUCER_ID
        self._known = True  # the block file was read (or there is no log dir)
        if self._path is not None:
            self._load(self._path)

    def _load(self, path: Path) -> None:
        try:
            data = read_json(path)
            start = data["next_block_start"]
            if not isinstance(start, int) or start < FIRST_PRODUCER_ID:
                raise DamagedFileError(f"{path} holds no valid next_block_start: {start!r}")
        except FileNotFoundError:
            self._known = False
            return
        except (DamagedFileError, KeyError, TypeError) as exc:
            log.warning("%s; producer ids will start far above every id in the logs", exc)
            self._known = False
            return
        self._next_block_start = start
        self._next_id = self._block_end = start

    def recovered(self, max_producer_id_in_logs: int) -> None:
        """After the logs are loaded: with no readable block file, start above them."""
        if self._known or self._path is None:
            return
        start = max(FIRST_PRODUCER_ID, max_producer_id_in_logs + _RECOVERY_GAP)
        if max_producer_id_in_logs < 0:
            start = FIRST_PRODUCER_ID
        with self._lock:
            self._next_block_start = max(self._next_block_start, start)
            self._next_id = self._block_end = self._next_block_start
            self._known = True

    def next_id(self) -> int:
        """A producer id no one has had. Raises OSError if the block file cannot be
        written (the id is then not handed out)."""
        with self._lock:
            if self._next_id >= self._block_end:
                start = self._next_block_start
                end = start + self._block_size
                if self._path is not None:
                    write_json(self._path, {"version": 1, "next_block_start": end})
                self._next_block_start = end
                self._next_id, self._block_end = start, end
                log.debug("producer id block %d..%d", start, end - 1)
            producer_id = self._next_id
            self._next_id += 1
            return producer_id
