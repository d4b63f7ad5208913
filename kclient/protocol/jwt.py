"""JSON Web Tokens in their compact form (RFC 7519), sans I/O: base64url pieces and the
unverified header and claims.

SASL OAUTHBEARER (KIP-255) carries a JWT on both sides of the wire: the producer reads a
token's expiry and subject (``kclient.oauth``), the embedded broker validates it
(``kclient.broker.sasl_oauth``). Both read it here; signatures are checked by the broker
alone. Pure functions: any thread.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

__all__ = ["b64url_decode", "b64url_encode", "decode"]

_B64URL = re.compile(r"[A-Za-z0-9\-_]*")


def b64url_encode(data: bytes) -> str:
    """base64url without padding, as JWTs write their parts."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(part: str) -> bytes:
    """The bytes of an unpadded base64url part; ``ValueError`` for any other character."""
    if not _B64URL.fullmatch(part):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def decode(token: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """``(header, claims, parts)`` of a compact JWT, unverified; ``ValueError`` saying why
    it is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError(f"a JWT has 3 dot-separated parts, this has {len(parts)}")
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
    except ValueError:  # binascii.Error, JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError("its header or payload is not base64url-encoded JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("its header or payload is not a JSON object")
    return header, claims, parts
