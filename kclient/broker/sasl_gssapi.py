"""The broker's side of SASL GSSAPI (Kerberos V5, RFC 4752): Kafka's
``SaslServerAuthenticator`` with Java's GSSAPI ``SaslServer``, for
``sasl.enabled.mechanisms=GSSAPI`` (needs the optional ``gssapi`` package).

Written from RFC 4752, independently of the client in ``kclient.sasl_gssapi``. Sans-I/O
like the other exchanges in ``kclient.broker.sasl_server``: ``GssapiExchange.evaluate``
turns a client token into the answer or raises ``SaslFailure``, over an
``AcceptContext`` (the GSS-API calls; ``KerberosAcceptContext`` is the real one):

1. the client's AP-REQ is accepted with the broker's key from its keytab
   (``sasl.kerberos.keytab``, for ``sasl.kerberos.principal``, or any key in it whose
   service is ``sasl.kerberos.service.name``); the answer is the AP-REP;
2. after the client's (empty) next token, the answer is the wrapped offer: no security
   layer (``0x01``) and the largest message the broker takes before authentication
   (``sasl.server.max.receive.size``, 3 octets);
3. the client's wrapped answer must choose no security layer; an authorization id, if
   any, must be the authenticated principal (no impersonation). Empty answer: done.

The principal, as Kafka's default principal builder with the DEFAULT
``sasl.kerberos.principal.to.local.rules``: a principal of the broker's own realm is known
by its short name, the first component (``alice@REALM`` and ``alice/host@REALM`` are both
``alice``), which quotas and re-authentication use; one from another realm keeps its full
name. Accepting a context needs no KDC: nothing here blocks the Processor on the network.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

from kclient.broker.sasl_server import SaslFailure, loggable_name
from kclient.errors import ConfigError

__all__ = ["AcceptContext", "GssapiAcceptor", "GssapiExchange", "short_name"]

_NO_LAYER = 0x01
_REFUSED = (
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism GSSAPI"
)
_NOT_INSTALLED = (
    "'sasl.enabled.mechanisms' GSSAPI needs the optional 'gssapi' package: "
    "pip install 'kclient-kafka[gssapi]' (building it needs Debian's libkrb5-dev)"
)


class AcceptContext(Protocol):
    """The GSS-API calls of one accepting security context."""

    @property
    def complete(self) -> bool: ...

    def step(self, token: bytes) -> bytes | None:
        """``gss_accept_sec_context``: the output token, if any."""
        ...

    def initiator(self) -> str:
        """The authenticated client's principal (``alice@REALM``)."""
        ...

    def target(self) -> str:
        """The service principal the client asked for (``kafka/host@REALM``)."""
        ...

    def wrap(self, message: bytes) -> bytes: ...

    def unwrap(self, message: bytes) -> bytes: ...


def short_name(principal: str, realm: str | None) -> str:
    """Kafka's DEFAULT principal-to-local rule: the first component of a principal of
    ``realm``; another realm's principal as it is."""
    name, at, principal_realm = principal.rpartition("@")
    if not at:
        name, principal_realm = principal, ""
    if realm is not None and principal_realm == realm:
        return name.split("/", 1)[0]
    return principal


class GssapiExchange:
    """One GSSAPI authentication attempt, server side."""

    mechanism = "GSSAPI"

    def __init__(
        self,
        context: AcceptContext,
        service_name: str,
        realm: str | None,
        max_receive_size: int,
    ) -> None:
        self._context = context
        self._service_name = service_name
        self._realm = realm
        self._max_size = min(max(max_receive_size, 0), 0xFFFFFF)
        self._stage = 0  # 0: context, 1: offer sent, 2: done / failed
        self._principal: str | None = None
        self.username: str | None = None
        self.complete = False

    def _fail(self, reason: str) -> NoReturn:
        self._stage = 2
        raise SaslFailure(reason, _REFUSED)

    def evaluate(self, token: bytes) -> bytes:
        if self._stage == 2:
            self._fail("a token after the GSSAPI exchange ended")
        context = self._context
        try:
            if not context.complete:
                if not token:
                    self._fail("an empty GSSAPI token where a Kerberos AP-REQ belongs")
                out = context.step(token)
                if not context.complete:
                    return out or b""
                self._accepted()
                if out:
                    return out  # the AP-REP; the offer follows the client's empty token
                return self._offer()
            if self._stage == 0:
                return self._offer()  # after the client's empty token
            return self._answer(context.unwrap(token))
        except SaslFailure:
            self._stage = 2
            raise
        except Exception as exc:  # a bad token must never take the Processor down
            self._fail(f"GSSAPI: {loggable_name(str(exc).strip())}")

    def _accepted(self) -> None:
        context = self._context
        target = context.target()
        service = target.split("/", 1)[0].split("@", 1)[0]
        if service != self._service_name:
            self._fail(
                f"the client asked for service {loggable_name(target)}, not "
                f"{self._service_name} (sasl.kerberos.service.name)"
            )
        self._principal = context.initiator()
        self.username = short_name(self._principal, self._realm)

    def _offer(self) -> bytes:
        self._stage = 1
        return self._context.wrap(bytes((_NO_LAYER,)) + self._max_size.to_bytes(3, "big"))

    def _answer(self, message: bytes) -> bytes:
        if len(message) < 4:
            self._fail(f"a GSSAPI security-layer answer of {len(message)} bytes")
        if message[0] != _NO_LAYER:
            self._fail(f"the client chose security layer 0x{message[0]:02x}; only none is offered")
        authzid = message[4:].decode("utf-8", "replace")
        if authzid and authzid not in (self._principal, self.username):
            self._fail(
                f"the authorization id {loggable_name(authzid)!r} differs from the "
                f"principal {loggable_name(self._principal or '')!r} (impersonation)"
            )
        self._stage = 2
        self.complete = True
        return b""


# ---- the real GSS-API ---------------------------------------------------------------------


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError:
        raise ConfigError(_NOT_INSTALLED) from None
    return gssapi


class KerberosAcceptContext:
    """An ``AcceptContext`` over the ``gssapi`` package."""

    def __init__(self, credentials: Any) -> None:
        gssapi = _gssapi()
        self._context = gssapi.SecurityContext(creds=credentials, usage="accept")

    @property
    def complete(self) -> bool:
        return bool(self._context.complete)

    def step(self, token: bytes) -> bytes | None:
        out = self._context.step(token)
        return bytes(out) if out is not None else None

    def initiator(self) -> str:
        return str(self._context.initiator_name)

    def target(self) -> str:
        return str(self._context.target_name)

    def wrap(self, message: bytes) -> bytes:
        return bytes(self._context.wrap(message, False).message)

    def unwrap(self, message: bytes) -> bytes:
        return bytes(self._context.unwrap(message).message)


class GssapiAcceptor:
    """The listener's Kerberos identity: its keytab's credentials, acquired once (so a
    keytab without the principal fails at start), shared by every Processor."""

    def __init__(
        self,
        service_name: str,
        keytab: str,
        principal: str | None = None,
        *,
        context: Callable[[Any], AcceptContext] | None = None,
    ) -> None:
        self.service_name = service_name
        self.keytab = keytab
        self.principal = principal
        self._context = context or KerberosAcceptContext
        gssapi = _gssapi()
        if not os.access(keytab, os.R_OK):
            raise ConfigError(f"'sasl.kerberos.keytab' {keytab!r} is not a readable file")
        name = gssapi.Name(principal, gssapi.NameType.kerberos_principal) if principal else None
        try:
            self._credentials = gssapi.Credentials(
                name=name, usage="accept", store={"keytab": keytab}
            )
        except gssapi.exceptions.GSSError as error:
            raise ConfigError(
                f"'sasl.kerberos.keytab' {keytab!r} has no key for "
                f"{principal or 'any principal'} (check 'sasl.kerberos.principal'): "
                f"{str(error).strip()}"
            ) from None
        #: the realm whose principals go by their short names: the broker's own
        self.realm = (
            principal.rpartition("@")[2]
            if principal and "@" in principal
            else _default_realm(gssapi)
        )
        if principal and principal.split("/", 1)[0] != service_name:
            raise ConfigError(
                f"'sasl.kerberos.principal' {principal!r} is not a principal of the service "
                f"{service_name!r} ('sasl.kerberos.service.name'): they must agree"
            )

    def new_exchange(self, max_receive_size: int) -> GssapiExchange:
        return GssapiExchange(
            self._context(self._credentials), self.service_name, self.realm, max_receive_size
        )

    def __repr__(self) -> str:
        return (
            f"GssapiAcceptor(service_name={self.service_name!r}, keytab={self.keytab!r}, "
            f"principal={self.principal!r})"
        )


def _default_realm(gssapi: Any) -> str | None:
    try:
        name = gssapi.Name("x", gssapi.NameType.user).canonicalize(gssapi.MechType.kerberos)
    except gssapi.exceptions.GSSError:
        return None
    text = str(name)
    return text.rpartition("@")[2] if "@" in text else None
