"""A local OIDC identity provider for the tests: a token endpoint (client-credentials grant)
and a JWKS endpoint over HTTP on 127.0.0.1, signing RS256 JWTs with a key it makes.

``LocalIdp`` is a context manager; it stops its server (by its handle) on exit. ``mode``
makes the token endpoint misbehave: ``"slow"`` (answers after ``slow_s``), ``"garbage"``
(200 with a body that is not JSON), ``"error"`` (HTTP 500) or ``"refuse"`` (HTTP 401).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

CLIENT_ID = "kafka-producer"
CLIENT_SECRET = "s3cr3t-Do-Not-Log"
AUDIENCE = "kafka-broker"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(n: int) -> str:
    return b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


class SigningKey:
    def __init__(self, kid: str) -> None:
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwk(self) -> dict[str, str]:
        numbers = self.key.public_key().public_numbers()
        return {
            "kty": "RSA",
            "kid": self.kid,
            "use": "sig",
            "alg": "RS256",
            "n": _uint(numbers.n),
            "e": _uint(numbers.e),
        }

    def sign(self, claims: dict[str, Any]) -> str:
        header = b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": self.kid}).encode())
        body = b64(json.dumps(claims).encode())
        signature = self.key.sign(f"{header}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{header}.{body}.{b64(signature)}"


class LocalIdp:
    """Token endpoint ``/token`` and JWKS ``/jwks`` on 127.0.0.1."""

    def __init__(self, lifetime_s: int = 3600, certs: Any = None) -> None:
        """``certs`` (``kclient.testing.tls.TestCertificates``): serve HTTPS with them."""
        self.key = SigningKey("key-1")
        self.issuer = "http://127.0.0.1/idp"
        self.lifetime_s = lifetime_s
        self.audience = AUDIENCE
        self.mode = "ok"
        self.slow_s = 3.0
        self.token_requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.scheme = "http"
        if certs is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(certs.server_cert, certs.server_key)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._server.server_address[1]}"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.base_url}/jwks"

    def __enter__(self) -> LocalIdp:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def token(self, subject: str = CLIENT_ID, key: SigningKey | None = None, **claims: Any) -> str:
        now = int(time.time())
        body = {
            "sub": subject,
            "iss": self.issuer,
            "aud": self.audience,
            "iat": now,
            "exp": now + self.lifetime_s,
            "scope": "kafka",
            **claims,
        }
        return (key or self.key).sign({k: v for k, v in body.items() if v is not None})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/jwks":
                    self._answer(200, json.dumps({"keys": [idp.key.jwk()]}).encode())
                else:
                    self._answer(404, b"{}")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                auth = self.headers.get("Authorization", "")
                idp.token_requests.append({"form": form, "authorization": auth})
                if idp.mode == "slow":
                    time.sleep(idp.slow_s)
                if idp.mode == "garbage":
                    self._answer(200, b"<html>this is not a token</html>")
                    return
                if idp.mode == "error":
                    self._answer(500, b'{"error":"server_error"}')
                    return
                expected = (
                    "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
                )
                if idp.mode == "refuse" or auth != expected:
                    self._answer(
                        401,
                        b'{"error":"invalid_client","error_description":"bad client credentials"}',
                    )
                    return
                if form.get("grant_type") != ["client_credentials"]:
                    self._answer(400, b'{"error":"unsupported_grant_type"}')
                    return
                answer = {
                    "access_token": idp.token(),
                    "token_type": "Bearer",
                    "expires_in": idp.lifetime_s,
                }
                self._answer(200, json.dumps(answer).encode())

        return Handler


@contextmanager
def local_idp(lifetime_s: int = 3600) -> Iterator[LocalIdp]:
    with LocalIdp(lifetime_s) as idp:
        yield idp
