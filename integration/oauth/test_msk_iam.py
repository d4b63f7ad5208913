"""AWS MSK IAM through OAUTHBEARER with AWS's own signer (``aws-msk-iam-sasl-signer-python``,
the ``msk-iam`` extra), as the docs' recipe does it: ``oauth_cb`` for ``KafkaProducer``, a
token provider for ``kclient.aio``. No AWS call: fake credentials in the environment, and
an embedded broker whose validator checks what reaches it is a SigV4-presigned
``kafka-cluster:Connect`` URL for the region, signed with those credentials."""

from __future__ import annotations

import asyncio
import base64
import time
import urllib.parse
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

from kclient import KafkaProducer
from kclient.aio import AIOKafkaProducer
from kclient.broker import EmbeddedCluster
from kclient.broker.sasl_oauth import TokenRejected, ValidatedToken

REGION = "eu-west-1"
ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example credentials
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


class PresignedUrlValidator:
    """What an MSK broker checks first: a base64url presigned URL for its region."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        try:
            url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        except ValueError:
            raise TokenRejected("not base64url") from None
        parts = urllib.parse.urlsplit(url)
        query = dict(urllib.parse.parse_qsl(parts.query))
        self.seen.append({"host": parts.netloc, **query})
        if parts.scheme != "https" or parts.netloc != f"kafka.{REGION}.amazonaws.com":
            raise TokenRejected(f"not for kafka in {REGION}")
        if query.get("Action") != "kafka-cluster:Connect":
            raise TokenRejected("not a kafka-cluster:Connect request")
        credential = query.get("X-Amz-Credential", "").split("/")
        if credential[:1] != [ACCESS_KEY] or credential[2:] != [
            REGION,
            "kafka-cluster",
            "aws4_request",
        ]:
            raise TokenRejected("not signed for kafka-cluster in the region")
        if len(query.get("X-Amz-Signature", "")) != 64:
            raise TokenRejected("no SigV4 signature")
        signed_at = datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(
            tzinfo=timezone.utc
        )
        expiry_ms = int(signed_at.timestamp() * 1000) + int(query["X-Amz-Expires"]) * 1000
        if expiry_ms <= now_ms:
            raise TokenRejected("expired")
        return ValidatedToken(ACCESS_KEY, expiry_ms)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def msk() -> Iterator[tuple[EmbeddedCluster, PresignedUrlValidator]]:
    validator = PresignedUrlValidator()
    with EmbeddedCluster(
        1,
        security_protocol="SASL_PLAINTEXT",
        sasl_enabled_mechanisms="OAUTHBEARER",
        sasl_server_callback_handler=validator,
    ) as cluster:
        cluster.create_topic("orders", 1)
        yield cluster, validator


@pytest.mark.usefixtures("aws_env")
def test_the_sync_recipe_sends_a_presigned_url_for_the_region(
    msk: tuple[EmbeddedCluster, PresignedUrlValidator],
) -> None:
    cluster, validator = msk

    def oauth_cb(config: str) -> tuple[str, float]:
        token, expiry_ms = MSKAuthTokenProvider.generate_auth_token(REGION)
        return token, expiry_ms / 1000

    with KafkaProducer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",  # SASL_SSL on MSK
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": oauth_cb,
        }
    ) as producer:
        assert producer.send("orders", b"paid").result(30).offset == 0
    seen = validator.seen[0]
    assert seen["host"] == "kafka.eu-west-1.amazonaws.com"
    assert seen["X-Amz-Credential"].startswith(f"{ACCESS_KEY}/")
    assert seen["X-Amz-Expires"] == "900"
    assert SECRET_KEY not in str(validator.seen)  # signed with it, never sent


@pytest.mark.usefixtures("aws_env")
def test_the_asyncio_recipe_with_a_token_provider(
    msk: tuple[EmbeddedCluster, PresignedUrlValidator],
) -> None:
    cluster, validator = msk

    class MskTokenProvider:
        async def token(self) -> tuple[str, float]:
            token, expiry_ms = await asyncio.to_thread(
                MSKAuthTokenProvider.generate_auth_token, REGION
            )
            return token, expiry_ms / 1000

    async def main() -> int:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=MskTokenProvider(),
        )
        await producer.start()
        try:
            return (await producer.send_and_wait("orders", b"shipped")).offset
        finally:
            await producer.stop()

    started = time.monotonic()
    assert asyncio.run(main()) == 0
    assert time.monotonic() - started < 30
    assert validator.seen and validator.seen[-1]["Action"] == "kafka-cluster:Connect"


@pytest.mark.usefixtures("aws_env")
def test_a_token_for_another_region_is_refused(
    msk: tuple[EmbeddedCluster, PresignedUrlValidator],
) -> None:
    cluster, _ = msk
    from kclient.errors import SaslAuthenticationError

    def oauth_cb(config: str) -> tuple[str, float]:
        token, expiry_ms = MSKAuthTokenProvider.generate_auth_token("us-east-1")
        return token, expiry_ms / 1000

    with (
        KafkaProducer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER",
                "oauth_cb": oauth_cb,
                "max.block.ms": 5000,
            }
        ) as producer,
        pytest.raises(SaslAuthenticationError, match="invalid_token"),
    ):
        producer.send("orders", b"x").result(30)
