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
    meter.record(int(quota * SAMPLE_SECONDS), 0.0)  # exactly the quota over a young window
    assert meter.throttle_ms(quota, 0.0) == 0
    meter.record(int(quota * SAMPLE_SECONDS), 0.0)  # twice the quota
    # (rate - quota) / quota * window: then the rate over the longer window is the quota
    assert meter.throttle_ms(quota, 0.0) == SAMPLE_SECONDS * 1000
    assert meter.throttle_ms(quota, 2 * SAMPLE_SECONDS) == 0
    assert meter.rate(2 * SAMPLE_SECONDS) == quota


def test_old_samples_leave_the_window() -> None:
    meter = RateMeter()
    meter.record(10**6, 0.0)
    later = WINDOW_SAMPLES * SAMPLE_SECONDS + 0.5
    meter.record(1, later)
    assert meter.rate(later) == 1.0  # the one byte over a one-sample window


def test_a_client_sending_as_fast_as_allowed_averages_its_quota() -> None:
    """Simulated: each request waits out its throttle time before the next, as a muted
    connection does; every ten seconds of a minute average the quota (no sawtooth)."""
    quotas = ClientQuotas()
    quotas.replace({canonical({USER: "alice"}): {PRODUCER_BYTE_RATE: 200_000}})
    now, sent = 0.0, []
    while now < 60:
        throttle = quotas.record(PRODUCER_BYTE_RATE, "User:alice", "c", 16_000, now)
        sent.append((now, 16_000))
        now += 0.001 + throttle.throttle_ms / 1000
    for start in range(0, 50, 5):
        rate = sum(size for t, size in sent if start <= t < start + 10) / 10
        assert 200_000 * 0.9 < rate < 200_000 * 1.1, (start, rate)
