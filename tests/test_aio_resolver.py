"""kclient.aio's LoopResolver: broker names are looked up with the loop's getaddrinfo
(scripted here), never in the middle of the Sender's step; IP literals need no lookup."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from kclient.aio.resolver import LoopResolver

V4 = int(socket.AF_INET)


def test_a_name_is_looked_up_on_the_loop_and_answered_from_then_on() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        answer = asyncio.Event()
        lookups: list[str] = []

        async def getaddrinfo(host: str, port: int, **kwargs: Any) -> list[Any]:
            lookups.append(host)
            await answer.wait()
            if host == "nowhere":
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port))] * 2

        loop.getaddrinfo = getaddrinfo  # type: ignore[method-assign]
        resolved: list[int] = []
        resolver = LoopResolver(loop, lambda: resolved.append(1), ttl_s=3600)
        assert resolver("127.0.0.1", 9092) == [(V4, "127.0.0.1", 9092)]  # no lookup
        assert resolver("::1", 9092)[0][1:] == ("::1", 9092)
        with pytest.raises(OSError, match="resolving broker-1"):
            resolver("broker-1", 9092)  # the lookup starts; this attempt fails at once
        with pytest.raises(OSError, match="resolving broker-1"):
            resolver("broker-1", 9092)
        with pytest.raises(OSError, match="resolving nowhere"):
            resolver("nowhere", 9092)
        answer.set()
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(resolved) == 2  # the Sender is woken to try again
        assert resolver("broker-1", 9092) == [(V4, "10.0.0.7", 9092)]
        with pytest.raises(socket.gaierror, match="not known"):
            resolver("nowhere", 9092)  # the lookup's failure, once
        assert lookups == ["broker-1", "nowhere"]  # one lookup each, none for literals

    asyncio.run(asyncio.wait_for(main(), 10))


def test_prime_resolves_the_bootstrap_servers_before_the_first_connection() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def getaddrinfo(host: str, port: int, **kwargs: Any) -> list[Any]:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.8", port))]

        loop.getaddrinfo = getaddrinfo  # type: ignore[method-assign]
        resolver = LoopResolver(loop, lambda: None)
        await resolver.prime([("kafka", 9093), ("127.0.0.1", 9092)])
        assert resolver("kafka", 9093) == [(V4, "10.0.0.8", 9093)]

    asyncio.run(asyncio.wait_for(main(), 10))


# ---- client.dns.lookup / bootstrap.resolve.timeout.ms on the loop ---------------------------

_FORWARD = {"kafka.example": ["10.0.0.1", "10.0.0.2"], "b1.internal": ["10.0.0.1"]}
_FORWARD["b2.internal"] = ["10.0.0.2"]
_REVERSE = {"10.0.0.1": "b1.internal", "10.0.0.2": "b2.internal", "10.0.0.3": "b1.internal"}


def _script_dns(loop: asyncio.AbstractEventLoop, calls: list[str]) -> None:
    """The loop's getaddrinfo and getnameinfo, answering from the tables above."""

    async def getaddrinfo(host: str, port: int, **kwargs: Any) -> list[Any]:
        calls.append(f"forward {host}")
        ips = [host] if host[0].isdigit() else _FORWARD.get(host)
        if not ips:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in ips]

    async def getnameinfo(sockaddr: tuple[str, int], flags: int = 0) -> tuple[str, str]:
        calls.append(f"reverse {sockaddr[0]}")
        name = _REVERSE.get(sockaddr[0])
        if name is None:
            raise socket.herror(1, "Unknown host")
        return name, "0"

    loop.getaddrinfo = getaddrinfo  # type: ignore[method-assign]
    loop.getnameinfo = getnameinfo  # type: ignore[method-assign]


def test_canonical_names_are_found_on_the_loop_by_prime() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        calls: list[str] = []
        _script_dns(loop, calls)
        woken: list[int] = []
        resolver = LoopResolver(loop, lambda: woken.append(1))
        lookup = resolver.bootstrap_lookup("resolve_canonical_bootstrap_servers_only")
        with pytest.raises(OSError, match="resolving kafka.example"):
            lookup("kafka.example", 9093)  # never blocks: looked up in the background
        await resolver.prime(
            [("kafka.example", 9093), ("10.0.0.3", 9094), ("10.0.0.9", 9095)], canonical=True
        )
        assert lookup("kafka.example", 9093) == [("b1.internal", 9093), ("b2.internal", 9093)]
        assert lookup("10.0.0.3", 9094) == [("10.0.0.3", 9094)]  # its name is not its own
        assert lookup("10.0.0.9", 9095) == [("10.0.0.9", 9095)]  # no name at all
        assert "reverse 10.0.0.1" in calls and "forward b1.internal" in calls
        assert woken  # the Sender is told

    asyncio.run(asyncio.wait_for(main(), 10))


def test_aio_start_with_no_bootstrap_name_resolving_is_a_config_error() -> None:
    from kclient.aio import AIOKafkaProducer
    from kclient.errors import ConfigError

    async def main() -> None:
        _script_dns(asyncio.get_running_loop(), [])
        producer = AIOKafkaProducer(bootstrap_servers="nohost.invalid:9092")
        with pytest.raises(ConfigError, match="nohost.invalid:9092: no such host"):
            await producer.start()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_aio_start_above_0_fails_with_bootstrap_resolution_error() -> None:
    from kclient.aio import AIOKafkaProducer
    from kclient.errors import BootstrapResolutionError

    async def main() -> None:
        _script_dns(asyncio.get_running_loop(), [])
        producer = AIOKafkaProducer(
            bootstrap_servers="nohost.invalid:9092",
            bootstrap_resolve_timeout_ms=200,
            retry_backoff_ms=50,
        )
        with pytest.raises(BootstrapResolutionError, match="'bootstrap.resolve.timeout.ms'"):
            await producer.start()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_aio_start_uses_the_canonical_names_as_bootstrap_nodes() -> None:
    from kclient.aio.loop_sender import LoopProducer

    async def main() -> None:
        loop = asyncio.get_running_loop()
        _script_dns(loop, [])
        producer = LoopProducer(
            {
                "bootstrap.servers": "kafka.example:9093",
                "client.dns.lookup": "resolve_canonical_bootstrap_servers_only",
            },
            loop,
        )
        try:
            await producer.prime()
            nodes = producer._metadata.fetch().nodes
            assert [(n.host, n.port) for n in nodes] == [
                ("b1.internal", 9093),
                ("b2.internal", 9093),
            ]
        finally:
            await producer.aclose(1.0)

    asyncio.run(asyncio.wait_for(main(), 10))
