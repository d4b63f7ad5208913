"""The ``embedded_kafka`` marker of kclient's pytest plugin refuses what it cannot honour
(issue 31, item 4), before any broker starts: a misspelt setting gets a "did you mean"
(before: ``dataclasses.replace``'s bare TypeError), and ``brokers=N`` with the one-broker
``kafka_broker`` fixture is an error (before: silently ignored)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def _run(pytester: pytest.Pytester, marker: str, fixture: str) -> pytest.RunResult:
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.embedded_kafka({marker})
        def test_it({fixture}):
            pass
        """
    )
    return pytester.runpytest_inprocess("-q")  # the plugin comes by its entry point


def test_a_misspelt_setting_says_did_you_mean(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "num_partition=3", "kafka_broker")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*'num_partition' is not a setting of the embedded broker*did you mean 'num_partitions'?*"]
    )


def test_brokers_with_the_one_broker_fixture_is_refused(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "brokers=3", "kafka_broker")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*brokers=3) sizes the kafka_cluster fixture*"])
