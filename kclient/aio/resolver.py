"""LoopResolver: broker host names resolved on the event loop (``loop.getaddrinfo``)
instead of a blocking ``getaddrinfo`` in the middle of the Sender's step.

No Kafka counterpart (Java resolves on its network thread, where blocking is allowed).
``ClusterConnectionStates`` calls its resolver when a connection starts; this one answers
IP literals and names it has resolved at once, and for a name it has not, starts the
lookup and raises ``OSError`` (the attempt ends as a failed connection, tried again after
``reconnect.backoff.ms``, by when the answer is usually there). Answers are kept for
``ttl_s`` and refreshed in the background after that, so a reconnect never waits for DNS.
``prime`` resolves the bootstrap servers before the first connection.

Owned by the event loop's thread (``loop.getaddrinfo`` runs in the loop's executor).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from collections.abc import Callable, Iterable

from kclient.network.connection_states import Address

_TTL_S = 60.0


class LoopResolver:
    """A ``Resolver`` (``host, port -> [(family, ip, port)]``) that never blocks the loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_resolved: Callable[[], None],
        ttl_s: float = _TTL_S,
    ) -> None:
        self._loop = loop
        self._on_resolved = on_resolved
        self._ttl_s = ttl_s
        self._answers: dict[tuple[str, int], tuple[list[Address] | OSError, float]] = {}
        self._lookups: dict[tuple[str, int], asyncio.Task[None]] = {}

    def __call__(self, host: str, port: int) -> list[Address]:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
            return [(int(family), host, port)]
        key = (host, port)
        answer = self._answers.get(key)
        if answer is None:
            self._start(key)
            raise OSError(
                errno.EAGAIN, f"resolving {host} (without blocking the event loop); retrying"
            )
        addresses, resolved_at = answer
        if isinstance(addresses, OSError):
            del self._answers[key]  # the next attempt looks it up again
            raise addresses
        if self._loop.time() - resolved_at > self._ttl_s:
            self._start(key)  # refreshed in the background; this attempt uses the old answer
        return addresses

    async def prime(self, hosts: Iterable[tuple[str, int]]) -> None:
        """Resolve these (the bootstrap servers) now."""
        keys = [key for key in hosts if not _is_literal(key[0]) and key not in self._answers]
        for key in keys:
            self._start(key)
        lookups = [self._lookups[key] for key in keys if key in self._lookups]
        if lookups:
            await asyncio.gather(*lookups)

    def _start(self, key: tuple[str, int]) -> None:
        if key not in self._lookups:
            self._lookups[key] = self._loop.create_task(self._lookup(key))

    async def _lookup(self, key: tuple[str, int]) -> None:
        host, port = key
        try:
            infos = await self._loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            addresses: list[Address] = []
            for family, _type, _proto, _canon, sockaddr in infos:
                address = (int(family), str(sockaddr[0]), int(sockaddr[1]))
                if family in (socket.AF_INET, socket.AF_INET6) and address not in addresses:
                    addresses.append(address)
            if not addresses:
                raise socket.gaierror(socket.EAI_NONAME, f"no IPv4/IPv6 address for {host}")
            self._answers[key] = (addresses, self._loop.time())
        except OSError as exc:
            self._answers[key] = (exc, self._loop.time())
        finally:
            self._lookups.pop(key, None)
            self._on_resolved()

    def close(self) -> None:
        for task in self._lookups.values():
            task.cancel()
        self._lookups.clear()


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
