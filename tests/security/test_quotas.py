"""Client quotas, sans-IO: Kafka's precedence of entities, and the throttle time that brings a
client's byte rate back to its quota."""

from __future__ import annotations

from broker.security.quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    SAMPLE_SECONDS,
    USER,
    WINDOW_SAMPLES,
    ClientQuotas,
    RateMeter,
    canonical,
)


def test_precedence_picks_the_most_specific_entity_per_quota() -> None:
    quotas = ClientQuotas()
    quotas.replace({
        canonical({USER: "alice", CLIENT_ID: "app"}): {PRODUCER_BYTE_RATE: 1},
        canonical({USER: "alice", CLIENT_ID: None}): {PRODUCER_BYTE_RATE: 2},
        canonical({USER: "alice"}): {PRODUCER_BYTE_RATE: 3, CONSUMER_BYTE_RATE: 30},
        canonical({USER: None, CLIENT_ID: "app"}): {PRODUCER_BYTE_RATE: 4},
        canonical({USER: None}): {PRODUCER_BYTE_RATE: 6},
        canonical({CLIENT_ID: "tool"}): {PRODUCER_BYTE_RATE: 7},
        canonical({CLIENT_ID: None}): {PRODUCER_BYTE_RATE: 8},
    })

    def produce(principal: str, client_id: str) -> int | None:
        found = quotas.quota_for(PRODUCER_BYTE_RATE, principal, client_id)
        return None if found is None else found[1]

    assert produce("User:alice", "app") == 1
    assert produce("User:alice", "other") == 2
    assert produce("User:bob", "app") == 4
    assert produce("User:bob", "other") == 6
    # each quota key is looked up on its own
    assert quotas.quota_for(CONSUMER_BYTE_RATE, "User:alice", "app") == (
        canonical({USER: "alice"}), 30)
    quotas.replace({canonical({CLIENT_ID: "tool"}): {PRODUCER_BYTE_RATE: 7},
                    canonical({CLIENT_ID: None}): {PRODUCER_BYTE_RATE: 8}})
    assert produce("User:ANONYMOUS", "tool") == 7
    assert produce("User:ANONYMOUS", "x") == 8


def test_no_quota_never_throttles() -> None:
    quotas = ClientQuotas()
    throttle = quotas.record(PRODUCER_BYTE_RATE, "User:alice", "app", 10**9, 0.0)
    assert throttle.throttle_ms == 0 and throttle.entity is None


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    meter = RateMeter()
    quota = 1000.0
    window = (WINDOW_SAMPLES - 1) * SAMPLE_SECONDS
    meter.record(int(quota * window), 0.0)  # exactly the quota over a young window
    assert meter.throttle_ms(quota, 0.0) == 0
    meter.record(int(quota * window), 0.0)  # twice the quota
    delay = meter.throttle_ms(quota, 0.0) / 1000
    assert abs(delay - window) < 0.01  # (rate - quota) / quota * window


def test_a_client_sending_as_fast_as_allowed_averages_its_quota() -> None:
    """Simulated: each request waits out its throttle time before the next, as a muted
    connection does; over a minute the rate is the quota."""
    quotas = ClientQuotas()
    quotas.replace({canonical({USER: "alice"}): {PRODUCER_BYTE_RATE: 10_000}})
    now, sent = 0.0, 0
    while now < 60:
        throttle = quotas.record(PRODUCER_BYTE_RATE, "User:alice", "c", 4_000, now)
        sent += 4_000
        now += 0.001 + throttle.throttle_ms / 1000
    rate = sent / now
    assert 10_000 * 0.9 < rate < 10_000 * 1.25
