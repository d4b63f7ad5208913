"""SaslAuthenticate (api key 36): one round of a SASL exchange (tokens as opaque bytes).

Corresponds to Kafka's ``SaslAuthenticateRequest.json`` / ``SaslAuthenticateResponse.json``.
v1 adds the session lifetime (for re-authentication, KIP-368); flexible from v2.
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "SaslAuthenticateRequest",
    36,
    "0-2",
    "2+",
    (F("AuthBytes", "bytes", "0+"),),
)

RESPONSE = message(
    "SaslAuthenticateResponse",
    36,
    "0-2",
    "2+",
    (
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F("AuthBytes", "bytes", "0+"),
        F("SessionLifetimeMs", "int64", "1+", default=0),
    ),
)
