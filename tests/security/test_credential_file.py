"""A damaged credential store fails logins -- never lets one through -- and says which file or
node is damaged in the broker's log, rather than looking like a wrong password."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from client.network import NetworkClient
from client.security import SecurityConfig
from protocol.apis import ApiKey
from protocol.errors import SaslAuthenticationFailedError
from tests.broker_process import BrokerProcess
from tests.security.support import PASSWORD, add_user


def test_a_damaged_credential_file_fails_logins_and_is_named_in_the_log(
        make_broker: Callable[..., BrokerProcess]):
    broker = make_broker(settings={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"})
    add_user(broker.bootstrap, "alice")
    (broker.data_dir / "scram-credentials.json").write_text('{"version": 1, "users": ')
    security = SecurityConfig(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                              sasl_plain_username="alice", sasl_plain_password=PASSWORD)
    network = NetworkClient(f"127.0.0.1:{broker.listener_ports['SASL_PLAINTEXT']}",
                            request_timeout_ms=10_000, security=security)
    try:
        with pytest.raises(SaslAuthenticationFailedError):
            network.send(-1, ApiKey.API_VERSIONS, {}).result(10)
    finally:
        network.close()
    broker.wait_for_log("sasl.credentials_unreadable")
    assert "scram-credentials.json" in broker.log_text()
    assert PASSWORD not in broker.log_text()
