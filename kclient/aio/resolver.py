"""LoopResolver: broker host names resolved on the event loop (``loop.getaddrinfo``)
instead of a blocking ``getaddrinfo`` in the middle of the Sender's step.

No Kafka counterpart (Java resolves on its network thread, where blocking is allowed).
``ClusterConnectionStates`` calls its resolver when a connection starts; this one answers
IP literals and names it has resolved at once, and for a name it has not, starts the
lookup and raises ``OSError`` (the attempt ends as a failed connection, tried again after
``reconnect.backoff.ms``, by when the answer is usually there). Answers are kept for
``ttl_s`` and refreshed in the background after that, so a reconnect never waits for DNS.
``prime`` resolves the bootstrap servers before the first connection. With
``client.dns.lookup=resolve_canonical_bootstrap_servers_only`` it also finds their canonical
names (``canonical``: ``loop.getaddrinfo``, then ``loop.getnameinfo`` for each address
and ``loop.getaddrinfo`` again to confirm the name, as ``bootstrap_resolution`` does
blocking).

Owned by the event loop's thread (``loop.getaddrinfo`` runs in the loop's executor).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from collections.abc import Callable, Iterable

from kclient.network.bootstrap_resolution import (
    RESOLVE_CANONICAL_BOOTSTRAP_SERVERS_ONLY,
    BootstrapLookup,
    HostPort,
    bootstrap_lookup,
    confirmed_name,
    is_ip_literal,
)
from kclient.network.connection_states import Address, stream_addresses

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
        self._canonical: dict[tuple[str, int], list[HostPort] | OSError] = {}
        self._canonical_lookups: dict[tuple[str, int], asyncio.Task[None]] = {}

    def bootstrap_lookup(self, client_dns_lookup: str) -> BootstrapLookup:
        """The ``BootstrapLookup`` of a ``client.dns.lookup`` value, answering from what
        ``prime`` (or an earlier call) found; ``OSError`` (EAGAIN) while it looks."""
        if client_dns_lookup == RESOLVE_CANONICAL_BOOTSTRAP_SERVERS_ONLY:
            return self.canonical
        return bootstrap_lookup(client_dns_lookup, self)

    def canonical(self, host: str, port: int) -> list[HostPort]:
        """The canonical names of ``host``'s addresses (KIP-235), once looked up."""
        key = (host, port)
        answer = self._canonical.get(key)
        if answer is None:
            self._start_canonical(key)
            raise _looking_up(host)
        if isinstance(answer, OSError):
            del self._canonical[key]  # the next attempt looks it up again
            raise answer
        return answer

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
            raise _looking_up(host)
        addresses, resolved_at = answer
        if isinstance(addresses, OSError):
            del self._answers[key]  # the next attempt looks it up again
            raise addresses
        if self._loop.time() - resolved_at > self._ttl_s:
            self._start(key)  # refreshed in the background; this attempt uses the old answer
        return addresses

    async def prime(self, hosts: Iterable[tuple[str, int]], *, canonical: bool = False) -> None:
        """Resolve these (the bootstrap servers) now; ``canonical``: find their canonical
        names too (IP literals included: 127.0.0.1 may be ``localhost``)."""
        if canonical:
            wanted = [key for key in hosts if key not in self._canonical]
            for key in wanted:
                self._start_canonical(key)
            pending = [self._canonical_lookups[k] for k in wanted if k in self._canonical_lookups]
            if pending:
                await asyncio.gather(*pending)
            return
        keys = [key for key in hosts if not is_ip_literal(key[0]) and key not in self._answers]
        for key in keys:
            self._start(key)
        lookups = [self._lookups[key] for key in keys if key in self._lookups]
        if lookups:
            await asyncio.gather(*lookups)

    def _start(self, key: tuple[str, int]) -> None:
        if key not in self._lookups:
            self._lookups[key] = self._loop.create_task(self._lookup(key))

    async def _addresses(self, host: str, port: int) -> list[Address]:
        infos = await self._loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return stream_addresses(host, infos)

    def _start_canonical(self, key: tuple[str, int]) -> None:
        if key not in self._canonical_lookups:
            self._canonical_lookups[key] = self._loop.create_task(self._canonical_lookup(key))

    async def _canonical_lookup(self, key: tuple[str, int]) -> None:
        host, port = key
        try:
            entries: list[HostPort] = []
            for _family, ip, _port in await self._addresses(host, port):
                entry = (await self._canonical_name(ip), port)
                if entry not in entries:
                    entries.append(entry)
            self._canonical[key] = entries
        except OSError as exc:
            self._canonical[key] = exc
        finally:
            self._canonical_lookups.pop(key, None)
            self._on_resolved()

    async def _canonical_name(self, ip: str) -> str:
        """``canonical_host_name`` on the loop: the reverse name if it resolves back to ip."""
        try:
            name, _service = await self._loop.getnameinfo((ip, 0), socket.NI_NAMEREQD)
            forward = await self._addresses(name, 0)
        except OSError:
            return ip
        return confirmed_name(ip, name, forward)

    async def _lookup(self, key: tuple[str, int]) -> None:
        host, port = key
        try:
            addresses = await self._addresses(host, port)
            self._answers[key] = (addresses, self._loop.time())
        except OSError as exc:
            self._answers[key] = (exc, self._loop.time())
        finally:
            self._lookups.pop(key, None)
            self._on_resolved()

    def close(self) -> None:
        for task in [*self._lookups.values(), *self._canonical_lookups.values()]:
            task.cancel()
        self._lookups.clear()
        self._canonical_lookups.clear()


def _looking_up(host: str) -> OSError:
    """What a lookup not answered yet raises (EAGAIN: the caller tries again later)."""
    return OSError(errno.EAGAIN, f"resolving {host} (without blocking the event loop); retrying")
