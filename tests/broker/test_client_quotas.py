"""Client quotas: the sampled rate, Kafka's throttle time, which entity governs a client,
AlterClientQuotas validation, DescribeClientQuotas filters, and the throttled connections
of a Processor. Times are given; no clock is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from kclient import errors
from kclient.broker.client_quota_manager import (
    INACTIVE_SENSOR_EXPIRATION_MS,
    ClientQuotaManager,
    SampledRate,
)
from kclient.broker.client_quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    ClientQuotas,
    Entity,
    QuotaAlterError,
    QuotaKey,
    QuotaOp,
    entity,
)
from kclient.broker.config import BrokerConfig
from kclient.broker.quota_factory import QuotaManagers
from kclient.broker.throttled_channel import ThrottledChannels, client_throttles
from kclient.errors import ConfigError
from kclient.protocol import ApiKey

T0 = 1_000_000


def manager(quotas: ClientQuotas, key: str = "producer_byte_rate") -> ClientQuotaManager:
    return ClientQuotaManager("Produce", key, quotas)


# ---- the rate and the throttle time ------------------------------------------------------


def test_a_new_rate_is_taken_over_ten_whole_windows() -> None:
    rate = SampledRate(11, 1000)
    rate.record(1000, T0)
    # nothing has elapsed: Kafka assumes (samples - 1) whole windows
    assert rate.window_size_ms(T0) == 10_000
    assert rate.measure(T0) == pytest.approx(100.0)
    rate.record(1000, T0 + 5_500)  # still under ten windows: counted as ten and a half
    assert rate.window_size_ms(T0 + 5_500) == 10_500
    rate.record(1000, T0 + 10_700)  # past ten: the time since the oldest sample
    assert rate.window_size_ms(T0 + 10_700) == 10_700
    assert rate.measure(T0 + 10_700) == pytest.approx(3000 / 10.7)


def test_samples_older_than_the_window_no_longer_count() -> None:
    rate = SampledRate(11, 1000)
    rate.record(5000, T0)
    assert rate.measure(T0 + 11_000) == 0.0  # 11 windows later: purged
    rate.record(100, T0 + 11_000)
    assert rate.measure(T0 + 11_000) == pytest.approx(10.0)


def test_over_quota_the_throttle_time_is_kafkas_formula() -> None:
    quotas = ClientQuotas({"producer_byte_rate": 100})
    produce = manager(quotas)
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "app", 1000, T0) == 0  # 100 B/s
    # 2000 B over 10 s: 200 B/s against 100; (200 - 100) / 100 * 10 s
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "app", 1000, T0) == 10_000
    # another client id has its own quota (broker defaults are per client id)
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "other", 1000, T0) == 0


def test_the_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    quotas = ClientQuotas({"producer_byte_rate": 1000})
    produce = manager(quotas)
    now = T0
    throttle = 0
    for _ in range(30):  # 30 KB at once: three times one window's worth
        throttle = produce.record_and_get_throttle_time_ms("ANONYMOUS", "app", 1000, now)
    assert throttle == 20_000
    # a client that waits that long is back within its quota
    now += throttle
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "app", 1, now) == 0


def test_the_request_quota_throttles_at_most_one_window() -> None:
    quotas = ClientQuotas({"request_percentage": 10})
    request = QuotaManagers(quotas).request
    # one second of a thread's time is 10 % of the ten seconds measured: at the quota
    assert request.record_and_get_throttle_time_ms("ANONYMOUS", "app", 100.0, T0) == 0
    # four more seconds: 50 % against 10 %, (50 - 10) / 10 * 10 s, bounded by one window
    assert request.record_and_get_throttle_time_ms("ANONYMOUS", "app", 400.0, T0) == 1000


def test_without_a_quota_nothing_is_measured_or_throttled() -> None:
    produce = manager(ClientQuotas())
    assert not produce.enabled
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "app", 10**12, T0) == 0
    assert produce.metrics(T0) == []
    assert produce.max_value_in_quota_window("ANONYMOUS", "app") == float("inf")


def test_a_fetch_may_ask_for_one_window_of_its_quota() -> None:
    fetch = ClientQuotaManager(
        "Fetch", "consumer_byte_rate", ClientQuotas({"consumer_byte_rate": 1000})
    )
    assert fetch.max_value_in_quota_window("ANONYMOUS", "app") == 10_000


def test_unrecord_takes_a_throttled_fetch_back() -> None:
    fetch = ClientQuotaManager(
        "Fetch", "consumer_byte_rate", ClientQuotas({"consumer_byte_rate": 100})
    )
    assert fetch.record_and_get_throttle_time_ms("ANONYMOUS", "c", 5000, T0) > 0
    fetch.unrecord("ANONYMOUS", "c", 5000, T0)
    assert fetch.record_and_get_throttle_time_ms("ANONYMOUS", "c", 1000, T0) == 0


def test_throttle_metrics_per_client() -> None:
    produce = manager(ClientQuotas({"producer_byte_rate": 100}))
    produce.record_and_get_throttle_time_ms("ANONYMOUS", "app", 3000, T0)
    produce.record_throttle("ANONYMOUS", "app", 20_000, T0)
    produce.record_throttle("ANONYMOUS", "app", 10_000, T0)
    (m,) = produce.metrics(T0)
    assert (m.quota_type, m.client_id, m.quota) == ("Produce", "app", 100)
    assert m.rate == pytest.approx(300.0)
    assert (m.throttle_count, m.throttle_time_ms_total, m.throttle_time_ms_avg) == (
        2,
        30_000,
        15_000,
    )


def test_sensors_of_silent_clients_expire_and_their_number_is_bounded() -> None:
    quotas = ClientQuotas({"producer_byte_rate": 100})
    produce = ClientQuotaManager("Produce", "producer_byte_rate", quotas, max_sensors=3)
    for i in range(10):
        produce.record_and_get_throttle_time_ms("ANONYMOUS", f"c{i}", 1, T0)
    assert [m.client_id for m in produce.metrics(T0)] == ["c7", "c8", "c9"]
    assert produce.metrics(T0 + INACTIVE_SENSOR_EXPIRATION_MS) == []


# ---- which entity governs a client -------------------------------------------------------


def test_kafkas_lookup_order() -> None:
    quotas = ClientQuotas({"producer_byte_rate": 80})
    key = "producer_byte_rate"
    ladder = [
        (entity(client_id=None), 70, QuotaKey("", "app")),
        (entity(client_id="app"), 60, QuotaKey("", "app")),
        (entity(user=None), 50, QuotaKey("alice", "")),
        (entity(user=None, client_id=None), 40, QuotaKey("alice", "app")),
        (entity(user=None, client_id="app"), 30, QuotaKey("alice", "app")),
        (entity(user="alice"), 20, QuotaKey("alice", "")),
        (entity(user="alice", client_id=None), 10, QuotaKey("alice", "app")),
        (entity(user="alice", client_id="app"), 5, QuotaKey("alice", "app")),
    ]
    # the broker's default comes last
    assert quotas.lookup(key, "alice", "app") == (QuotaKey("", "app"), 80)
    for ent, value, measured in ladder:
        quotas.set(ent, {key: value})
        assert quotas.lookup(key, "alice", "app") == (measured, value), ent
    # each key is looked up on its own
    assert quotas.lookup("consumer_byte_rate", "alice", "app") is None
    # another user falls through alice's entities to the defaults
    assert quotas.lookup(key, "bob", "app") == (QuotaKey("bob", "app"), 30)


def test_a_user_quota_is_shared_by_all_of_the_users_clients() -> None:
    quotas = ClientQuotas()
    quotas.set(entity(user="alice"), {"producer_byte_rate": 100})
    produce = manager(quotas)
    assert produce.record_and_get_throttle_time_ms("alice", "one", 1000, T0) == 0
    assert produce.record_and_get_throttle_time_ms("alice", "two", 1000, T0) == 10_000
    assert produce.record_and_get_throttle_time_ms("bob", "two", 10**9, T0) == 0


def test_a_changed_quota_applies_to_the_next_request() -> None:
    quotas = ClientQuotas()
    produce = manager(quotas)
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "app", 5000, T0) == 0
    quotas.set(entity(client_id="app"), {"producer_byte_rate": 100})
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "app", 5000, T0) > 0
    quotas.set(entity(client_id="app"), {"producer_byte_rate": 10_000})
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "app", 5000, T0) == 0
    quotas.set(entity(client_id="app"), {"producer_byte_rate": None})
    assert produce.record_and_get_throttle_time_ms("ANONYMOUS", "app", 10**9, T0) == 0


# ---- AlterClientQuotas ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ent", "op", "message"),
    [
        ((), QuotaOp("producer_byte_rate", 1), "Invalid empty client quota entity"),
        (
            (("user", "a"), ("user", "b")),
            QuotaOp("producer_byte_rate", 1),
            "duplicate entity entry user",
        ),
        (
            (("group", "g"),),
            QuotaOp("producer_byte_rate", 1),
            "Unhandled client quota entity type: group",
        ),
        ((("user", ""),), QuotaOp("producer_byte_rate", 1), "Empty user not supported"),
        ((("ip", "1.2.3.4"),), QuotaOp("connection_creation_rate", 1), "ip quotas"),
        (entity(user="a"), QuotaOp("producer_rate", 1), "Invalid configuration key producer_rate"),
        (entity(user="a"), QuotaOp("producer_byte_rate", 0), "must be greater than 0"),
        (
            entity(user="a"),
            QuotaOp("producer_byte_rate", 1.5),
            "producer_byte_rate must be an integer",
        ),
    ],
)
def test_bad_alterations_are_refused_with_kafkas_reason(
    ent: Entity, op: QuotaOp, message: str
) -> None:
    quotas = ClientQuotas()
    (result,) = quotas.alter([(ent, [op])])
    assert isinstance(result, QuotaAlterError)
    assert result.error is errors.InvalidRequestError
    assert message in result.message
    assert quotas.entities() == {}


def test_alter_entries_apply_one_by_one_and_validate_only_changes_nothing() -> None:
    quotas = ClientQuotas()
    good = (entity(client_id="app"), [QuotaOp("request_percentage", 12.5)])
    bad = (entity(user="a"), [QuotaOp("producer_byte_rate", 10), QuotaOp("nope", 1)])
    assert quotas.alter([good, bad], validate_only=True)[0] is None
    assert quotas.entities() == {}
    results = quotas.alter([good, bad])
    assert results[0] is None and results[1] is not None
    assert quotas.entities() == {entity(client_id="app"): {"request_percentage": 12.5}}
    # removing the last key removes the entity
    assert quotas.alter([(entity(client_id="app"), [QuotaOp("request_percentage", 0, True)])]) == [
        None
    ]
    assert quotas.entities() == {}


def test_set_raises_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="Invalid configuration key producer_bytes"):
        ClientQuotas().set(entity(user="a"), {"producer_bytes": 1})


def test_quotas_outlive_a_restart_with_a_log_dir(tmp_path: Path) -> None:
    first = ClientQuotas(log_dir=str(tmp_path))
    first.set(entity(user="alice", client_id=None), {"consumer_byte_rate": 2048})
    again = ClientQuotas(log_dir=str(tmp_path))
    assert again.entities() == {entity(user="alice", client_id=None): {"consumer_byte_rate": 2048}}
    assert again.lookup("consumer_byte_rate", "alice", "x") == (QuotaKey("alice", "x"), 2048)


def test_a_damaged_quotas_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "client_quotas.json").write_text('{"entities": [{"entity"')
    with pytest.raises(ConfigError, match="client_quotas.json.*remove the file"):
        ClientQuotas(log_dir=str(tmp_path))


# ---- DescribeClientQuotas filters ----------------------------------------------------------


def _described(
    quotas: ClientQuotas, strict: bool, *components: tuple[str, int, str | None]
) -> list[object]:
    found = quotas.describe(
        [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components], strict
    )
    return [ent for ent, _ in found]


def test_describe_filters_as_kafka_does() -> None:
    quotas = ClientQuotas()
    alice = entity(user="alice")
    alice_app = entity(user="alice", client_id="app")
    default_user = entity(user=None)
    app = entity(client_id="app")
    for ent in (alice, alice_app, default_user, app):
        quotas.set(ent, {"producer_byte_rate": 1})
    assert _described(quotas, False) == [app, alice_app, default_user, alice]
    assert _described(quotas, True) == []
    assert _described(quotas, False, ("user", MATCH_EXACT, "alice")) == [alice_app, alice]
    assert _described(quotas, True, ("user", MATCH_EXACT, "alice")) == [alice]
    assert _described(quotas, False, ("user", MATCH_DEFAULT, None)) == [default_user]
    assert _described(quotas, True, ("user", MATCH_SPECIFIED, None)) == [default_user, alice]
    assert _described(quotas, False, ("client-id", MATCH_SPECIFIED, None)) == [app, alice_app]


@pytest.mark.parametrize(
    ("components", "error", "message"),
    [
        ([("", MATCH_EXACT, "a")], errors.InvalidRequestError, "Invalid empty entity type"),
        ([("user", MATCH_EXACT, None)], errors.InvalidRequestError, "MATCH_TYPE_EXACT"),
        ([("user", MATCH_DEFAULT, "a")], errors.InvalidRequestError, "MATCH_TYPE_DEFAULT"),
        ([("user", 7, None)], errors.InvalidRequestError, "Unknown match type 7"),
        ([("user", 1, None), ("user", 2, None)], errors.InvalidRequestError, "more than once"),
        ([("group", MATCH_EXACT, "g")], errors.UnsupportedVersionError, "Unsupported entity type"),
        ([("ip", 1, None), ("user", 1, None)], errors.InvalidRequestError, "IP filter"),
    ],
)
def test_bad_describe_filters(
    components: list[tuple[str, int, str | None]],
    error: type[errors.BrokerResponseError],
    message: str,
) -> None:
    with pytest.raises(QuotaAlterError) as info:
        _described(ClientQuotas(), False, *components)
    assert info.value.error is error
    assert message in info.value.message


# ---- settings ------------------------------------------------------------------------------


def test_broker_quota_settings() -> None:
    config = BrokerConfig(quota_producer_byte_rate=1 << 20, quota_request_percentage=25.5)
    assert config.quota_defaults() == {"producer_byte_rate": 1 << 20, "request_percentage": 25.5}
    assert BrokerConfig().quota_defaults() == {}


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("quota_producer_byte_rate", 0),
        ("quota_consumer_byte_rate", 1.5),
        ("quota_request_percentage", -1.0),
        ("quota_window_num", 0),
    ],
)
def test_bad_quota_settings_name_the_setting(setting: str, value: object) -> None:
    name = setting.replace("_", ".")
    with pytest.raises(ConfigError, match=name):
        BrokerConfig(**{setting: value})  # type: ignore[arg-type]


# ---- the Processor's throttled connections -------------------------------------------------


def test_clients_from_kip_219_on_throttle_themselves() -> None:
    assert client_throttles(ApiKey.PRODUCE, 6)
    assert not client_throttles(ApiKey.PRODUCE, 5)
    assert client_throttles(ApiKey.FETCH, 8)
    assert not client_throttles(ApiKey.FETCH, 7)
    assert client_throttles(ApiKey.METADATA, 12)
    assert not client_throttles(ApiKey.LIST_TRANSACTIONS, 1)


def test_throttled_connections_end_in_order_and_hold_their_answers() -> None:
    throttled: ThrottledChannels[str] = ThrottledChannels()
    ms = 1_000_000
    throttled.throttle("a", 0, 30)
    throttled.hold("b", 0, 10, "answer-to-b")
    throttled.throttle("a", 5 * ms, 20)  # extended to 25 ms... not shortened
    assert throttled.is_throttled("a", 29 * ms) and throttled.is_throttled("b", 9 * ms)
    assert throttled.timeout_s(0, 0.3) == pytest.approx(0.010)
    assert throttled.pop_due(9 * ms) == []
    assert throttled.pop_due(10 * ms) == [("b", "answer-to-b")]
    assert not throttled.is_throttled("b", 10 * ms)
    assert throttled.pop_due(29 * ms) == []
    assert throttled.pop_due(30 * ms) == [("a", None)]
    assert len(throttled) == 0


def test_a_closed_connection_is_forgotten() -> None:
    throttled: ThrottledChannels[str] = ThrottledChannels()
    throttled.hold("a", 0, 10, "answer")
    assert throttled.forget("a") == "answer"
    assert throttled.pop_due(10**12) == []


def test_the_cli_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from kclient.broker.__main__ import build_parser, main

    args = build_parser().parse_args(
        [
            "--quota-producer-byte-rate",
            "1048576",
            "--quota-consumer-byte-rate",
            "2097152",
            "--quota-request-percentage",
            "50",
            "--quota-controller-mutation-rate",
            "10",
            "--quota-window-num",
            "5",
        ]
    )
    assert (args.quota_producer_byte_rate, args.quota_consumer_byte_rate) == (1 << 20, 2 << 20)
    assert (args.quota_request_percentage, args.quota_controller_mutation_rate) == (50.0, 10.0)
    assert args.quota_window_num == 5 and args.quota_window_size_seconds is None
    assert build_parser().parse_args([]).quota_producer_byte_rate is None
    assert main(["--quota-producer-byte-rate", "0"]) == 2
    assert "'quota.producer.byte.rate' must be a positive whole number" in capsys.readouterr().err
