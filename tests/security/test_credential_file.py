"""A damaged credential store fails logins -- never lets one through -- and says which file or
node is damaged in the broker's log, rather than looking like a wrong password; a change is on
disk, for its owner's eyes only, before it is acknowledged."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.security.credentials import FileCredentialStore
from client.network import NetworkClient
from client.security import SecurityConfig
from protocol.apis import ApiKey
from protocol.errors import SaslAuthenticationFailedError
from protocol.scram import CREDENTIALS_FILE, ScramCredential
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


async def test_a_credential_change_is_durable_and_readable_by_its_owner_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    synced: list[os.stat_result] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    credential = ScramCredential.derive("SCRAM-SHA-256", PASSWORD, iterations=4096)
    await FileCredentialStore(tmp_path).alter("alice", lambda current: {
        **current, "SCRAM-SHA-256": credential})
    path = tmp_path / CREDENTIALS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # the new file's content, then the directory's entry for its new name
    assert [(s.st_ino, stat.S_ISDIR(s.st_mode)) for s in synced] == [
        (path.stat().st_ino, False), (tmp_path.stat().st_ino, True)]
    assert (await FileCredentialStore(tmp_path).user("alice")) == {"SCRAM-SHA-256": credential}
