"""ZooKeeper's /config/users/<name> holds a user's SCRAM credentials and their quotas side by
side (Kafka's form): writing one must keep the other."""

from __future__ import annotations

import json

from protocol.scram import ScramCredential, decode_user, encode_user


def test_writing_credentials_keeps_the_users_quotas() -> None:
    quotas = json.dumps({"version": 1, "config": {"producer_byte_rate": "1048576"}}).encode()
    credential = ScramCredential.derive("SCRAM-SHA-256", "s3cret")
    node = encode_user({"SCRAM-SHA-256": credential}, quotas)
    assert json.loads(node)["config"]["producer_byte_rate"] == "1048576"
    assert decode_user(node) == {"SCRAM-SHA-256": credential}
    emptied = encode_user({}, node)
    assert json.loads(emptied)["config"] == {"producer_byte_rate": "1048576"}
    assert decode_user(emptied) == {}


def test_a_replaced_mechanism_leaves_no_stale_entry() -> None:
    old = ScramCredential.derive("SCRAM-SHA-512", "one")
    new = ScramCredential.derive("SCRAM-SHA-256", "two")
    node = encode_user({"SCRAM-SHA-256": new}, encode_user({"SCRAM-SHA-512": old}))
    assert decode_user(node) == {"SCRAM-SHA-256": new}
