"""Writes over TLS: chunking, and OpenSSL's rule that a refused write is retried with the
very same bytes. A scripted stand-in for the TLS socket; no sockets."""

from __future__ import annotations

import ssl

from kclient.network.channel import NetworkSend
from kclient.tls import WRITE_CHUNK_BYTES, tls_chunks


class ScriptedTlsSocket:
    """Takes whole chunks, refusing (want-write) every call listed in ``refuse``."""

    def __init__(self, refuse: set[int]) -> None:
        self.refuse = refuse
        self.calls: list[bytes] = []
        self.taken = bytearray()

    def send(self, chunk: bytes) -> int:
        self.calls.append(bytes(chunk))
        if len(self.calls) - 1 in self.refuse:
            raise ssl.SSLWantWriteError("the socket is full")
        self.taken += chunk
        return len(chunk)


def test_small_buffers_are_joined_and_big_ones_cut_into_bounded_chunks() -> None:
    buffers = [b"a" * 10, bytearray(b"b" * 20), memoryview(b"c" * 200_000), b"", b"d"]
    chunks = tls_chunks(buffers)
    assert b"".join(chunks) == b"".join(bytes(b) for b in buffers)
    assert [len(c) for c in chunks] == [WRITE_CHUNK_BYTES] * 3 + [200_031 - 3 * WRITE_CHUNK_BYTES]


def test_a_refused_chunk_is_offered_again_unchanged_and_nothing_is_lost() -> None:
    pieces = [bytes([i]) * (3_000 + i * 7) for i in range(100)]  # ~335 KB in 100 buffers
    send = NetworkSend(1, pieces)
    sock = ScriptedTlsSocket(refuse={1, 2, 5})
    rounds = 0
    while not send.completed:
        send.write_to_tls(sock)  # type: ignore[arg-type]
        rounds += 1
        assert rounds < 20
    assert bytes(sock.taken) == b"".join(pieces)
    for refused in (1, 2, 5):
        assert sock.calls[refused + 1] == sock.calls[refused]  # the same bytes again
    assert rounds == 4  # stopped at each of the three refusals (1 and 2 in a row, then 5)
    assert all(len(c) <= WRITE_CHUNK_BYTES for c in sock.calls)


def test_a_tls_write_that_takes_everything_completes_the_send_in_one_call() -> None:
    send = NetworkSend(1, [b"\x00\x00\x00\x05", b"hello"])
    sock = ScriptedTlsSocket(refuse=set())
    assert send.write_to_tls(sock) == 9  # type: ignore[arg-type]
    assert send.completed
    assert sock.calls == [b"\x00\x00\x00\x05hello"]  # one TLS record, not two
