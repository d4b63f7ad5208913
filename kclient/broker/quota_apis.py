"""DescribeClientQuotas and AlterClientQuotas (KIP-546): Kafka's
``KafkaApis.handleDescribeClientQuotasRequest`` / ``ControllerApis.handleAlterClientQuotas``
over the cluster's ``ClientQuotas``.

Any broker answers both (there is one configuration per cluster, in this process). An
alteration is checked as Kafka's controller checks it (entity types user and client-id,
names not empty, known keys, values above 0 and whole for the byte rates; ``ip`` entities
are refused: connection-rate quotas are not enforced here); each entry is applied whole
or refused with INVALID_REQUEST and the reason. Run on request handler threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kclient.broker.client_quotas import ClientQuotas, Entity, QuotaAlterError, QuotaOp
from kclient.broker.request_channel import Request
from kclient.protocol import ApiKey


def _entity_out(ent: Entity) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in ent]


class QuotaApis:
    """The two client quota APIs of one broker."""

    def __init__(
        self, quotas: ClientQuotas, send: Callable[[Request, dict[str, Any]], None]
    ) -> None:
        self.quotas = quotas
        self._send = send

    def handlers(self) -> dict[int, Callable[[Request], None]]:
        return {
            ApiKey.DESCRIBE_CLIENT_QUOTAS: self.handle_describe_client_quotas,
            ApiKey.ALTER_CLIENT_QUOTAS: self.handle_alter_client_quotas,
        }

    def handle_describe_client_quotas(self, request: Request) -> None:
        body = request.body
        assert body is not None
        try:
            found = self.quotas.describe(body["components"], bool(body["strict"]))
        except QuotaAlterError as exc:
            request.error_count += 1
            self._send(
                request,
                {"error_code": exc.error.code, "error_message": exc.message, "entries": None},
            )
            return
        entries = [
            {
                "entity": _entity_out(ent),
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
            }
            for ent, values in found
        ]
        self._send(request, {"error_code": 0, "error_message": None, "entries": entries})

    def handle_alter_client_quotas(self, request: Request) -> None:
        body = request.body
        assert body is not None
        changes = [
            (
                tuple(sorted((e["entity_type"], e["entity_name"]) for e in entry["entity"])),
                [QuotaOp(op["key"], float(op["value"]), bool(op["remove"])) for op in entry["ops"]],
            )
            for entry in body["entries"]
        ]
        results = self.quotas.alter(changes, validate_only=bool(body["validate_only"]))
        out = []
        for entry, result in zip(body["entries"], results, strict=True):
            if result is not None:
                request.error_count += 1
            out.append(
                {
                    "error_code": 0 if result is None else result.error.code,
                    "error_message": None if result is None else result.message,
                    "entity": [
                        {"entity_type": e["entity_type"], "entity_name": e["entity_name"]}
                        for e in entry["entity"]
                    ],
                }
            )
        self._send(request, {"entries": out})
