"""Offsets JSON, the shape of the options and of the stream's checkpointed offsets."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client import TopicPartition
from pipeline.offsets import OffsetsFormatError, offsets_from_json, offsets_to_json

offsets_maps = st.dictionaries(
    st.builds(TopicPartition, st.text(min_size=1, max_size=5), st.integers(0, 100)),
    st.integers(0, 2**62),
)


@given(offsets_maps)
def test_round_trips_through_json_text(offsets: dict[TopicPartition, int]) -> None:
    text = json.dumps(offsets_to_json(offsets))
    assert offsets_from_json(text) == offsets
    assert offsets_from_json(json.loads(text)) == offsets


def test_json_form_is_ordered_and_matches_sparks_kafka_source() -> None:
    offsets = {TopicPartition("b", 10): 1, TopicPartition("a", 2): 7, TopicPartition("b", 9): 3}
    assert json.dumps(offsets_to_json(offsets)) == '{"a": {"2": 7}, "b": {"9": 3, "10": 1}}'


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "malformed JSON"),
        ("[]", "expected an object"),
        ('{"": {"0": 1}}', "topic name"),
        ('{"a": {}}', "non-empty object"),
        ('{"a": [1]}', "non-empty object"),
        ('{"a": {"-1": 1}}', "partition '-1' is not a number"),
        ('{"a": {"0": 1.5}}', "offset 1.5"),
        ('{"a": {"0": -1}}', "a-0: offset -1 is not an integer >= 0"),
    ],
)
def test_malformed_offsets_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(OffsetsFormatError, match=problem):
        offsets_from_json(text)


def test_markers_are_accepted_only_when_asked_for() -> None:
    assert offsets_from_json('{"a": {"0": -2, "1": -1}}', lowest=-2) == {
        TopicPartition("a", 0): -2,
        TopicPartition("a", 1): -1,
    }
