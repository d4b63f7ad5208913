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
