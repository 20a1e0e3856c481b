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


def _java_murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 transcribed with Java int semantics (signed 32-bit wrap-around,
    ``>>>`` as an unsigned shift), independently of client.partitioner's unsigned arithmetic."""

    def to_int(x: int) -> int:
        return (x + (1 << 31)) % (1 << 32) - (1 << 31)

    def ushr(x: int, n: int) -> int:
        return (x % (1 << 32)) >> n

    m, length = 0x5BD1E995, len(data)
    h = to_int(to_int(0x9747B28C) ^ length)
    for i in range(0, length - length % 4, 4):
        k = data[i] + (data[i + 1] << 8) + (data[i + 2] << 16) + (data[i + 3] << 24)
        k = to_int(to_int(k) * m)
        k ^= ushr(k, 24)
        k = to_int(to_int(k) * m)
        h = to_int(to_int(h * m) ^ k)
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = to_int(h * m)
    h = to_int(h ^ ushr(h, 13))
    h = to_int(h * m)
    return to_int(h ^ ushr(h, 15))


def test_the_protocol_spec_partitioner_vectors_are_kafkas_and_the_clients() -> None:
    """docs/protocol.md's table: Kafka's published murmur2 values (UtilsTest), recomputed here by
    a separate transcription of Utils.murmur2, and the client's partitions for each count."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
    text = docs.read_text()
    section = text[text.index("## Choosing a partition for a key"):]
    header = re.search(r"^\| key \| murmur2 \(signed\) \| & 0x7fffffff \|(.*)\|$", section, re.M)
    assert header is not None
    counts = [int(c) for c in re.findall(r"of (\d+)", header.group(1))]
    rows = re.findall(r'^\| `"(.*)"` \| (-?\d+) \| (\d+) \|((?: \d+ \|)+)$', section, re.M)
    assert {(key.encode(), int(hashed)) for key, hashed, *_ in rows} == set(JAVA_MURMUR2)
    assert len(counts) >= 3
    for key, hashed, positive, partitions in rows:
        data = key.encode()
        assert _java_murmur2(data) == murmur2(data) == int(hashed)
        assert int(positive) == int(hashed) & 0x7FFFFFFF
        assert [int(p) for p in partitions.strip(" |").split(" | ")] == [
            partition_for_key(data, n) for n in counts
        ] == [int(positive) % n for n in counts]


@given(st.binary(max_size=40))
def test_the_client_murmur2_equals_the_java_transcription(key: bytes) -> None:
    assert murmur2(key) == _java_murmur2(key)
