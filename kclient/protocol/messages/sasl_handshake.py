"""SaslHandshake (api key 17): the client names the SASL mechanism it will use.

Corresponds to Kafka's ``SaslHandshakeRequest.json`` / ``SaslHandshakeResponse.json``.
v1 means the SASL tokens then travel in SaslAuthenticate requests (v0 sent them as raw
size-prefixed frames, which kclient does not do). Never flexible.
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "SaslHandshakeRequest",
    17,
    "0-1",
    "none",
    (F("Mechanism", "string", "0+"),),
)

RESPONSE = message(
    "SaslHandshakeResponse",
    17,
    "0-1",
    "none",
    (
        F("ErrorCode", "int16", "0+"),
        F("Mechanisms", "[]string", "0+"),
    ),
)
