"""LostAnswers, the embedded broker's fault injection: which answers are lost, and how many."""

from __future__ import annotations

import pytest

from kclient.broker.faults import LostAnswers
from kclient.protocol import ApiKey


def test_only_the_chosen_api_loses_only_as_many_answers_as_asked() -> None:
    lost = LostAnswers()
    assert not lost.take(ApiKey.PRODUCE)  # nothing asked: every answer goes out
    lost.lose(ApiKey.PRODUCE, 2)
    assert lost.pending() == lost.pending(ApiKey.PRODUCE) == 2
    assert not lost.take(ApiKey.METADATA)
    assert lost.take(ApiKey.PRODUCE)
    assert lost.take(ApiKey.PRODUCE)
    assert not lost.take(ApiKey.PRODUCE)
    assert lost.pending() == 0


def test_requests_add_up_and_zero_changes_nothing() -> None:
    lost = LostAnswers()
    lost.lose(ApiKey.PRODUCE, 1)
    lost.lose(ApiKey.PRODUCE, 2)
    lost.lose(ApiKey.FETCH, 0)
    assert lost.pending(ApiKey.PRODUCE) == 3
    assert lost.pending(ApiKey.FETCH) == 0
    assert not lost.take(ApiKey.FETCH)


def test_a_negative_count_is_refused() -> None:
    with pytest.raises(ValueError, match="count must be >= 0"):
        LostAnswers().lose(ApiKey.PRODUCE, -1)
