from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

_T = TypeVar("_T", bound=tuple[Any, ...])

def encode_records(
    records: Iterable[tuple[bytes | None, bytes | None, int]],
    *,
    base_offset: int = 0,
    attributes: int = 0,
) -> bytes: ...
def scan_v1(
    data: bytes | bytearray, pos: int, verify_crc: bool, last: int | None, found: Any
) -> tuple[int, int | None]: ...
def decode_plain(
    data: bytes,
    verify_crc: bool,
    cls: type[_T],
    prefix: tuple[Any, ...],
    suffix: tuple[Any, ...],
) -> tuple[list[_T], int]: ...
def parse_records_v2(
    data: bytes,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    ts_override: int | None,
    cls: type[_T],
    prefix: tuple[Any, ...],
    ts_type: int | None,
) -> list[_T] | None: ...
def encode_records_v2(
    records: Iterable[Sequence[Any]], base_timestamp: int
) -> tuple[bytes, int, int] | None: ...
def set_encode_fallback(fn: Callable[..., bytes]) -> None: ...
