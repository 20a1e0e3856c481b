"""Error codes: one enum, an info row and exactly one exception class per code."""

from __future__ import annotations

import pytest

from protocol import errors
from protocol.errors import BrokerError, ErrorCode, UnknownServerError, error_class, error_for


def all_subclasses(cls: type[BrokerError]) -> list[type[BrokerError]]:
    found: list[type[BrokerError]] = []
    for sub in cls.__subclasses__():
        found += [sub, *all_subclasses(sub)]
    return found


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.name)
def test_every_code_has_an_info_row(code: ErrorCode) -> None:
    info = code.info
    assert info.name == code.name
    assert isinstance(info.retriable, bool)
    assert info.meaning.endswith(".")  # a one-line sentence for the spec
    assert code.retriable is info.retriable


def test_exactly_one_exception_class_per_code() -> None:
    classes = all_subclasses(BrokerError)
    codes = [cls.code for cls in classes]
    assert sorted(codes) == sorted(set(ErrorCode) - {ErrorCode.NONE})
    for cls in classes:
        assert getattr(errors, cls.__name__) is cls  # public, importable by name


@pytest.mark.parametrize(
    "code", [c for c in ErrorCode if c is not ErrorCode.NONE], ids=lambda c: c.name
)
def test_error_for_maps_each_code_to_its_class(code: ErrorCode) -> None:
    exc = error_for(int(code))
    assert type(exc) is error_class(code)
    assert exc.code is code
    assert str(exc) == code.info.meaning
    assert exc.retriable is code.info.retriable
    assert str(error_for(int(code), "detail")) == "detail"


@pytest.mark.parametrize("number", [0, 9, 999, -2])
def test_unknown_codes_map_to_unknown_server_error(number: int) -> None:
    exc = error_for(number, "what the broker said")
    assert type(exc) is UnknownServerError
    assert str(number) in str(exc) and "what the broker said" in str(exc)


# DESIGN.md "Wire protocol": Kafka's numbers where the meaning is the same.
KAFKA_NUMBERS = {
    "OFFSET_OUT_OF_RANGE": 1, "CORRUPT_MESSAGE": 2, "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "NOT_LEADER_FOR_PARTITION": 6, "REQUEST_TIMED_OUT": 7, "MESSAGE_TOO_LARGE": 10,
    "OFFSET_METADATA_TOO_LARGE": 12, "COORDINATOR_LOAD_IN_PROGRESS": 14,
    "COORDINATOR_NOT_AVAILABLE": 15, "NOT_COORDINATOR": 16, "INVALID_TOPIC": 17,
    "NOT_ENOUGH_REPLICAS": 19, "ILLEGAL_GENERATION": 22, "INCONSISTENT_GROUP_PROTOCOL": 23,
    "INVALID_GROUP_ID": 24, "UNKNOWN_MEMBER_ID": 25, "INVALID_SESSION_TIMEOUT": 26,
    "REBALANCE_IN_PROGRESS": 27, "INVALID_TIMESTAMP": 32, "INVALID_RECORD": 87,
    "OFFSET_NOT_AVAILABLE": 78, "CLUSTER_AUTHORIZATION_FAILED": 31,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 45, "DUPLICATE_SEQUENCE_NUMBER": 46,
    "INVALID_PRODUCER_EPOCH": 47, "UNKNOWN_PRODUCER_ID": 59, "UNSUPPORTED_COMPRESSION_TYPE": 76,
}


def test_numbers_follow_kafka() -> None:
    assert {name: int(ErrorCode[name]) for name in KAFKA_NUMBERS} == KAFKA_NUMBERS


# Kafka's retriable flags (org.apache.kafka.common.protocol.Errors: RetriableException or not)
# for the codes we share: clients retry exactly what a Kafka client would retry.
KAFKA_RETRIABLE = {
    "UNKNOWN_SERVER_ERROR": False, "OFFSET_OUT_OF_RANGE": False, "CORRUPT_MESSAGE": True,
    "UNKNOWN_TOPIC_OR_PARTITION": True, "INVALID_FETCH_SIZE": False,
    "LEADER_NOT_AVAILABLE": True, "NOT_LEADER_FOR_PARTITION": True, "REQUEST_TIMED_OUT": True,
    "MESSAGE_TOO_LARGE": False, "OFFSET_METADATA_TOO_LARGE": False,
    "COORDINATOR_LOAD_IN_PROGRESS": True, "COORDINATOR_NOT_AVAILABLE": True,
    "NOT_COORDINATOR": True, "INVALID_TOPIC": False, "RECORD_LIST_TOO_LARGE": False,
    "NOT_ENOUGH_REPLICAS": True, "INVALID_REQUIRED_ACKS": False, "ILLEGAL_GENERATION": False,
    "INCONSISTENT_GROUP_PROTOCOL": False, "INVALID_GROUP_ID": False, "UNKNOWN_MEMBER_ID": False,
    "INVALID_SESSION_TIMEOUT": False, "REBALANCE_IN_PROGRESS": False,
    "INVALID_COMMIT_OFFSET_SIZE": False, "INVALID_TIMESTAMP": False, "UNSUPPORTED_VERSION": False,
    "TOPIC_ALREADY_EXISTS": False, "INVALID_PARTITIONS": False,
    "INVALID_REPLICATION_FACTOR": False, "INVALID_CONFIG": False, "INVALID_REQUEST": False,
    "NON_EMPTY_GROUP": False, "GROUP_ID_NOT_FOUND": False, "INVALID_RECORD": False,
    "OFFSET_NOT_AVAILABLE": True, "OUT_OF_ORDER_SEQUENCE_NUMBER": False,
    "DUPLICATE_SEQUENCE_NUMBER": False, "INVALID_PRODUCER_EPOCH": False,
    "UNKNOWN_PRODUCER_ID": False, "UNSUPPORTED_COMPRESSION_TYPE": False,
}


def test_retriable_flags_follow_kafka() -> None:
    assert {name: ErrorCode[name].retriable for name in KAFKA_RETRIABLE} == KAFKA_RETRIABLE


# The seed's names that DESIGN.md asks the spec to show next to ours.
SEED_NAMES = {
    "CoordinatorStartupNotComplete": "COORDINATOR_LOAD_IN_PROGRESS",
    "OffsetsLoadInProgress": "COORDINATOR_LOAD_IN_PROGRESS",
    "NotCoordinatorForGroup": "NOT_COORDINATOR",
    "UnknownConsumer": "UNKNOWN_MEMBER_ID",
    "SessionTimeoutTooHigh": "INVALID_SESSION_TIMEOUT",
    "InconsistentPartitioningStrategy": "INCONSISTENT_GROUP_PROTOCOL",
    "UnknownPartitioningStrategy": "UNKNOWN_ASSIGNMENT_STRATEGY",
    "IllegalGeneration": "ILLEGAL_GENERATION",
}


@pytest.mark.parametrize("seed_name", list(SEED_NAMES))
def test_seed_names_are_recorded(seed_name: str) -> None:
    assert seed_name in ErrorCode[SEED_NAMES[seed_name]].info.seed_name
