"""murmur2 against Kafka's own test vectors, and the default partitioner's choices."""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.partitioner import DefaultPartitioner, murmur2, partition_for_key

# Kafka's UtilsTest.testMurmur2: the signed 32-bit values Java returns.
JAVA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]
# Partitions out of 1000, as Kafka's Java partitioner computes them (kafka-python checks the same).
JAVA_PARTITIONS_OF_1000 = [
    (b"", 681),
    (b"a", 524),
    (b"ab", 434),
    (b"abc", 107),
    (b"123456789", 566),
    (b"\x00 ", 742),
]


@pytest.mark.parametrize(("key", "expected"), JAVA_MURMUR2)
def test_murmur2_matches_java(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_PARTITIONS_OF_1000)
def test_partition_for_key_matches_java(key: bytes, expected: int) -> None:
    assert partition_for_key(key, 1000) == expected


@given(st.binary(max_size=64), st.integers(1, 500))
def test_partition_is_in_range_and_stable(key: bytes, count: int) -> None:
    p = partition_for_key(key, count)
    assert 0 <= p < count
    assert partition_for_key(bytes(key), count) == p


def test_keyed_messages_use_the_hash_whatever_the_partition_numbers() -> None:
    partitioner = DefaultPartitioner()
    partitions = [0, 1, 2, 3, 4]
    assert partitioner("t", b"abc", partitions) == partition_for_key(b"abc", 5)


def test_null_keys_stick_to_one_partition_until_its_batch_closes() -> None:
    partitioner = DefaultPartitioner(random.Random(1))
    partitions = [0, 1, 2]
    first = partitioner("t", None, partitions)
    assert all(partitioner("t", None, partitions) == first for _ in range(10))
    partitioner.batch_closed("t", first, partitions)
    second = partitioner("t", None, partitions)
    assert second == (first + 1) % 3
    # A closed batch on some other partition does not move the sticky choice.
    partitioner.batch_closed("t", (second + 1) % 3, partitions)
    assert partitioner("t", None, partitions) == second


def test_sticky_choice_is_per_topic_and_visits_every_partition() -> None:
    partitioner = DefaultPartitioner(random.Random(2))
    seen = set()
    for _ in range(4):
        p = partitioner("a", None, [0, 1, 2, 3])
        seen.add(p)
        partitioner.batch_closed("a", p, [0, 1, 2, 3])
    assert seen == {0, 1, 2, 3}
    assert partitioner("b", None, [0]) == 0


def test_the_docs_table_of_test_vectors_matches_the_code() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
    rows = re.findall(r'^\| `"(.*)"`[^|]*\| (-?\d+) \| (\d+) \|$', docs.read_text(), re.M)
    assert len(rows) == 11
    for text, hashed, partition in rows:
        key = ast.literal_eval(f'b"{text}"')
        assert (murmur2(key), partition_for_key(key, 1000)) == (int(hashed), int(partition))
