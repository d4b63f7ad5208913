"""From ``bootstrap.servers`` to the bootstrap nodes: Java's ``ClientUtils.parseAddresses``
(``client.dns.lookup``) and ``NetworkClient.ensureBootstrapped``
(``bootstrap.resolve.timeout.ms``, KIP-909).

``client.dns.lookup``:

- ``use_all_dns_ips`` (the default): a bootstrap name stays a name; it must resolve, and
  each connection attempt resolves it again and tries its next address
  (``connection_states``).
- ``resolve_canonical_bootstrap_servers_only`` (KIP-235): each name is resolved to all its
  addresses and each address replaced by its canonical host name, as Java's
  ``InetAddress.getCanonicalHostName`` does: the reverse lookup's name if that name
  resolves back to the address, else the address itself. Those names are the bootstrap
  nodes: TLS verifies them and GSSAPI names its service principal after them. Brokers the
  metadata names afterwards are used as advertised.

``bootstrap.resolve.timeout.ms``:

- ``0`` (the default, as in Java): the names are resolved once, when the client is created
  (``resolve_at_creation``; ``kclient.aio``: by ``start()``, on the loop, nothing
  connecting until then: ``defer``). A name that does not resolve is left out with a
  warning; when none resolves, ``ConfigError``.
- above 0: the client's thread resolves them (``BootstrapResolution.poll``, from
  ``NetworkClient.poll``), no connection being made meanwhile; a round in which no name
  resolves is tried again ``retry.backoff.ms`` later. Once the setting's time has passed
  since the first round with none resolved, ``BootstrapResolutionError``: final, as Java's
  ``BootstrapResolutionException``; every later metadata wait raises it.

Either way the bootstrap nodes are the names that resolved; whether they then accept
connections is ``bootstrap.refused.timeout.ms``'s (``bootstrap_refusals``).

Owned by the network client's thread (``resolve_at_creation``: the creating thread, before
the client runs).
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
from collections.abc import Callable, Sequence

from kclient.errors import BootstrapResolutionError, ConfigError
from kclient.network.connection_states import NO_DELAY_LIMIT_MS, Address, Resolver

__all__ = [
    "CLIENT_DNS_LOOKUPS",
    "RESOLVE_CANONICAL_BOOTSTRAP_SERVERS_ONLY",
    "USE_ALL_DNS_IPS",
    "BootstrapLookup",
    "BootstrapResolution",
    "HostPort",
    "ReverseResolver",
    "bootstrap_lookup",
    "canonical_host_name",
    "confirmed_name",
    "is_ip_literal",
    "reverse_lookup",
]

log = logging.getLogger("kclient.network.client")

USE_ALL_DNS_IPS = "use_all_dns_ips"
RESOLVE_CANONICAL_BOOTSTRAP_SERVERS_ONLY = "resolve_canonical_bootstrap_servers_only"
#: ``client.dns.lookup``'s values (Java's ``ClientDnsLookup`` since Kafka 3.0, KIP-602).
CLIENT_DNS_LOOKUPS = (USE_ALL_DNS_IPS, RESOLVE_CANONICAL_BOOTSTRAP_SERVERS_ONLY)

HostPort = tuple[str, int]

BootstrapLookup = Callable[[str, int], list[HostPort]]
"""One ``bootstrap.servers`` entry → the bootstrap (host, port) entries it stands for;
raises ``OSError`` when its name does not resolve (``errno.EAGAIN``: not known yet)."""

ReverseResolver = Callable[[str], str]
"""An IP address → its name (a reverse lookup); raises ``OSError`` when it has none."""


def reverse_lookup(ip: str) -> str:
    """The name ``ip`` reverse-resolves to (``getnameinfo``, blocking)."""
    return socket.getnameinfo((ip, 0), socket.NI_NAMEREQD)[0]


def is_ip_literal(host: str) -> bool:
    """Whether ``host`` is an IPv4 or IPv6 address rather than a name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def canonical_host_name(ip: str, resolve: Resolver, reverse: ReverseResolver) -> str:
    """Java's ``InetAddress.getCanonicalHostName``: the name ``ip`` reverse-resolves to
    when that name resolves forward to ``ip`` again; else ``ip`` itself."""
    try:
        name = reverse(ip)
        forward = resolve(name, 0)
    except OSError:
        return ip
    return confirmed_name(ip, name, forward)


def confirmed_name(ip: str, name: str, forward: Sequence[Address]) -> str:
    """``name`` (``ip``'s reverse lookup) when its forward lookup ``forward`` holds ``ip``
    again, else ``ip``."""
    return name if name and any(address[1] == ip for address in forward) else ip


def bootstrap_lookup(
    client_dns_lookup: str, resolve: Resolver, reverse: ReverseResolver = reverse_lookup
) -> BootstrapLookup:
    """The ``BootstrapLookup`` of a ``client.dns.lookup`` value over these resolvers."""

    def all_dns_ips(host: str, port: int) -> list[HostPort]:
        if not is_ip_literal(host):
            resolve(host, port)  # raises when it does not resolve
        return [(host, port)]

    def canonical(host: str, port: int) -> list[HostPort]:
        entries: list[HostPort] = []
        for _family, ip, _port in resolve(host, port):
            entry = (canonical_host_name(ip, resolve, reverse), port)
            if entry not in entries:
                entries.append(entry)
        return entries

    if client_dns_lookup == RESOLVE_CANONICAL_BOOTSTRAP_SERVERS_ONLY:
        return canonical
    return all_dns_ips


def _reason(exc: OSError) -> str:
    if isinstance(exc, socket.gaierror) and exc.errno in (
        socket.EAI_NONAME,
        getattr(socket, "EAI_NODATA", None),
    ):
        return "no such host"
    return str(exc.strerror or exc).lower()


def _server(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class BootstrapResolution:
    """Resolves ``bootstrap.servers`` into the bootstrap nodes (see the module docstring)."""

    def __init__(
        self,
        servers: Sequence[HostPort],
        lookup: BootstrapLookup,
        *,
        timeout_ms: int,
        retry_backoff_ms: int,
        log_prefix: str = "",
    ) -> None:
        self.servers = list(servers)
        self._lookup = lookup
        self.timeout_ms = timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._prefix = log_prefix
        self.pending = timeout_ms > 0 and bool(self.servers)
        """True until a name resolved on the client's thread (``bootstrap.resolve.timeout.ms``
        above 0; a client made with metadata already known has nothing to resolve); no
        connection is made meanwhile."""
        self.error: BootstrapResolutionError | None = None
        """Set once the timeout passed with no name resolved; final."""
        self._started_ms: int | None = None
        self._next_round_ms = 0
        self._failures: dict[str, str] = {}

    def resolve_once(self) -> list[HostPort]:
        """One round over every entry: the bootstrap entries of the names that resolved
        (in order, without repeats); the others are remembered with their reasons."""
        found: list[HostPort] = []
        self._failures.clear()
        for host, port in self.servers:
            try:
                entries = self._lookup(host, port)
            except OSError as exc:
                self._failures[_server(host, port)] = (
                    "not resolved yet" if exc.errno == errno.EAGAIN else _reason(exc)
                )
                continue
            for entry in entries:
                if entry not in found:
                    found.append(entry)
        for server, why in self._failures.items():
            if found:
                log.warning(
                    "%sleaving %s out of 'bootstrap.servers': %s", self._prefix, server, why
                )
        if found != self.servers:
            log.info(
                "%sbootstrap servers %s resolved to %s",
                self._prefix,
                ",".join(_server(h, p) for h, p in self.servers),
                ",".join(_server(h, p) for h, p in found) or "nothing",
            )
        return found

    def resolve_at_creation(self) -> list[HostPort]:
        """``bootstrap.resolve.timeout.ms`` 0: one round now; ``ConfigError`` when no name
        resolves (Java: ``ConfigException``, no client created)."""
        found = self.resolve_once()
        self.pending = not found
        if not found:
            raise ConfigError(
                f"no name in 'bootstrap.servers' resolves ({self._tried()}): check the names "
                "and DNS, or set 'bootstrap.resolve.timeout.ms' to keep trying for a while"
            )
        return found

    def poll(self, now_ms: int) -> list[HostPort] | None:
        """``bootstrap.resolve.timeout.ms`` above 0, each poll of the client until resolved:
        a round when one is due; the bootstrap entries once a name resolved (then
        ``pending`` is False), else None (``error`` is set once the time is up)."""
        if self.error is not None or self.timeout_ms == 0:  # 0: deferred to its creator
            return None
        if self._started_ms is None:
            self._started_ms = now_ms
        if now_ms < self._next_round_ms and now_ms - self._started_ms < self.timeout_ms:
            return None
        found = self.resolve_once()
        if found:
            self.pending = False
            return found
        waited_ms = now_ms - self._started_ms
        if waited_ms >= self.timeout_ms:
            self.error = BootstrapResolutionError(
                f"no name in 'bootstrap.servers' resolved within {self.timeout_ms} ms "
                f"('bootstrap.resolve.timeout.ms'; {self._tried()}). Check the names and DNS, "
                "then create the producer again"
            )
            return None
        log.debug(
            "%sbootstrap servers not resolved (%s); again in %d ms, %d ms left",
            self._prefix,
            self._tried(),
            self._retry_backoff_ms,
            self.timeout_ms - waited_ms,
        )
        self._next_round_ms = now_ms + self._retry_backoff_ms
        return None

    def defer(self) -> None:
        """``bootstrap.resolve.timeout.ms`` 0 where creating must not block (``kclient.aio``):
        nothing connects until the creator calls ``resolve_at_creation``."""
        self.pending = True

    def delay_ms(self, now_ms: int) -> int:
        """How long until the next round is due (0: now); the last one is at the timeout."""
        if self.timeout_ms == 0:  # deferred: its creator's call ends it, not time
            return NO_DELAY_LIMIT_MS
        due_ms = self._next_round_ms
        if self._started_ms is not None:
            due_ms = min(due_ms, self._started_ms + self.timeout_ms)
        return max(due_ms - now_ms, 0)

    def _tried(self) -> str:
        return "; ".join(f"{server}: {why}" for server, why in self._failures.items())
