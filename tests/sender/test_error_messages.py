"""A broker's per-partition error message reaches the record's error once, named by its
partition: prefixed with it, unless the broker named the partition itself (kclient's
embedded broker does; the error read "t-0: t-0: ..." before)."""

from __future__ import annotations

import pytest

from kclient import errors
from tests.sender.sender_helpers import make, produce_response


@pytest.mark.parametrize(
    ("broker_message", "expected"),
    [
        ("not authorized", "t-0: not authorized"),
        ("t-0: not authorized", "t-0: not authorized"),
        (None, "t-0"),
    ],
)
def test_the_error_names_the_partition_once(broker_message: str | None, expected: str) -> None:
    h = make()
    (future,) = h.send("t", 0)
    h.run()
    h.client.respond(
        produce_response(
            {("t", 0): (errors.TopicAuthorizationFailedError.code, -1)},
            error_message=broker_message,
        )
    )
    h.run()
    error = future.exception(0)
    assert isinstance(error, errors.TopicAuthorizationFailedError)
    assert str(error) == f"[Error 29] TOPIC_AUTHORIZATION_FAILED: {expected}"
