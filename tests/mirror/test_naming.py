"""Which topics a mirror copies and what they are called on the target (sans-IO)."""

from __future__ import annotations

import pytest

from client.errors import ConfigError
from tooling.mirror.naming import Renaming, TopicSelection

TOPICS = ["orders", "orders-eu", "payments", "__consumer_offsets", "east.orders"]


def test_a_pattern_matches_whole_names_and_never_internal_topics() -> None:
    assert TopicSelection.of("orders.*", []).select(TOPICS) == ["orders", "orders-eu"]
    assert TopicSelection.of(".*", []).select(TOPICS) == sorted(
        t for t in TOPICS if not t.startswith("__"))
    assert TopicSelection.of("rders", []).select(TOPICS) == []  # whole names only


def test_named_topics_are_those_that_exist() -> None:
    assert TopicSelection.of(None, ["payments", "missing"]).select(TOPICS) == ["payments"]


@pytest.mark.parametrize(("pattern", "names", "message"), [
    (None, [], "--topics PATTERN or --topic"),
    ("x", ["y"], "--topics PATTERN or --topic"),
    ("(", [], "not a regular expression"),
])
def test_a_selection_must_be_one_or_the_other(pattern, names, message) -> None:
    with pytest.raises(ConfigError, match=message):
        TopicSelection.of(pattern, names)


def test_renaming_joins_sources_without_collisions() -> None:
    east = Renaming("{source}.{topic}", "east")
    west = Renaming("{source}.{topic}", "west")
    assert east.target_topic("orders") == "east.orders"
    assert west.target_topic("orders") == "west.orders"
    assert Renaming().target_topic("orders") == "orders"


@pytest.mark.parametrize(("template", "alias", "message"), [
    ("{source}", "east", "must contain {topic}"),
    ("{source}.{topic}", None, "give --source-alias"),
    ("{cluster}.{topic}", "east", "names cluster"),
])
def test_a_template_that_cannot_work_is_refused_before_anything_runs(
        template, alias, message) -> None:
    with pytest.raises(ConfigError, match=message):
        Renaming(template, alias)


def test_a_template_making_an_illegal_name_names_the_topic() -> None:
    with pytest.raises(ConfigError, match=r"'orders'.*not a legal topic name"):
        Renaming("{source}/{topic}", "east").target_topic("orders")
