"""``send``'s futures when the producer's Sender runs on a thread of its own (a scripted
``kafka_client`` without ``on_ready``: tests, and the design the benchmark compares with).

No Kafka counterpart. A record's callback runs on the Sender thread; it queues the outcome
and brings it to the loop in bursts, one ``loop.call_soon_threadsafe`` per burst of
acknowledgements, where ``deliver`` settles the asyncio futures.

Threads: ``callback``'s function runs on the Sender thread; ``deliver`` on the loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable

from kclient.sender.future import RecordMetadata


class ThreadCompletions:
    """Outcomes from the Sender thread, settled on the loop."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._done: collections.deque[
            tuple[asyncio.Future[RecordMetadata], RecordMetadata | None, BaseException | None]
        ] = collections.deque()
        self._scheduled = False

    def callback(
        self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[RecordMetadata]
    ) -> Callable[[RecordMetadata | None, BaseException | None], None]:
        """The ``send`` callback that settles ``future`` on ``loop``."""
        done = self._done

        def completed(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            done.append((future, metadata, error))
            if not self._scheduled:
                self._scheduled = True
                try:
                    loop.call_soon_threadsafe(self.deliver)
                except RuntimeError:  # the loop was closed without stop()
                    self._log.warning("a record completed after its event loop was closed")

        return completed

    def deliver(self) -> None:
        """On the loop: settle every future completed since the last call."""
        self._scheduled = False
        done = self._done
        while done:
            future, metadata, error = done.popleft()
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                assert metadata is not None
                future.set_result(metadata)
