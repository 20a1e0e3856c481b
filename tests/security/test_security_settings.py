"""Security settings: listeners, what each needs, and a password that never shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.security.listeners import SecurityProtocol
from broker.settings import SettingsError, load_settings, settings_markdown


def test_listeners_as_a_toml_array_with_the_advertised_addresses(tmp_path: Path):
    config = tmp_path / "odradek.toml"
    config.write_text('listeners = ["PLAINTEXT://127.0.0.1:9092", "SASL_SSL://0.0.0.0:9093"]\n'
                      'advertised_listeners = ["SASL_SSL://broker1.example:19093"]\n'
                      'ssl_certfile = "c.pem"\nssl_keyfile = "k.pem"\n')
    settings = load_settings(config_file=config, env={})
    assert [(e.protocol, e.port) for e in settings.endpoints] == [
        (SecurityProtocol.PLAINTEXT, 9092), (SecurityProtocol.SASL_SSL, 9093)]
    assert settings.advertised_endpoint("SASL_SSL", 9093) == ("broker1.example", 19093)
    assert settings.advertised_endpoint("PLAINTEXT", 9092) == ("127.0.0.1", 9092)
    assert settings.inter_broker_endpoint.name == "PLAINTEXT"  # the first, by default


def test_no_listeners_is_the_one_plaintext_listener_on_host_and_port():
    settings = load_settings(env={}, overrides={"port": "9999"})
    assert [str(e) for e in settings.endpoints] == ["PLAINTEXT://127.0.0.1:9999"]


@pytest.mark.parametrize("overrides, named", [
    ({"listeners": "HTTP://127.0.0.1:80"}, "listener name must be one of"),
    ({"listeners": "SSL://127.0.0.1"}, "is not PROTOCOL://HOST:PORT"),
    ({"listeners": "SSL://a:1,SSL://b:2"}, "a second SSL listener"),
    ({"listeners": "SSL://127.0.0.1:0"}, "listener SSL needs ssl_certfile and ssl_keyfile"),
    ({"listeners": "PLAINTEXT://127.0.0.1:0", "inter_broker_listener_name": "SSL"},
     "inter_broker_listener_name SSL is not among the listeners"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "zookeeper_connect": "127.0.0.1:2181"},
     "needs inter_broker_sasl_username and inter_broker_sasl_password"),
    ({"sasl_enabled_mechanisms": "GSSAPI"}, "must name mechanisms among"),
    ({"ssl_client_auth": "maybe"}, "is not one of none, requested, required"),
])
def test_a_security_setting_that_cannot_work_is_refused_by_name(overrides: dict[str, str],
                                                                named: str):
    with pytest.raises(SettingsError, match=named):
        load_settings(env={}, overrides=overrides)


def test_the_inter_broker_password_shows_nowhere():
    settings = load_settings(env={"ODRADEK_INTER_BROKER_SASL_PASSWORD": "Zq9-hunter2"})
    assert settings.inter_broker_sasl_password is not None
    assert settings.inter_broker_sasl_password.reveal() == "Zq9-hunter2"
    assert "Zq9-hunter2" not in repr(settings) + str(settings)
    assert "Zq9-hunter2" not in settings_markdown()
