"""The hand-written Fetch response is the table's: the same bytes for the same body, at every
version, with records as bytes or as file slices."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.frames import Piece
from broker.kafka.fetch_encoding import encode_fetch_response
from broker.log import ReadResult
from protocol.framing import encode_frame
from protocol.kafka.apis import FETCH
from protocol.kafka.header import decode_response, encode_response


class _File:
    """A segment file's two calls a ReadResult makes."""

    def __init__(self, path: Path, data: bytes) -> None:
        path.write_bytes(data)
        self._f = path.open("rb")

    def fileno(self) -> int:
        return self._f.fileno()

    def pread(self, length: int, position: int) -> bytes:
        self._f.seek(position)
        return self._f.read(length)


def _flatten(pieces: list[Piece]) -> bytes:
    return b"".join(p.bytes() if isinstance(p, ReadResult) else p for p in pieces)


#: v4+'s aborted transactions: null (read_uncommitted), none, some
ABORTED: list[list[dict[str, int]] | None] = [
    None, [], [{"producer_id": 7, "first_offset": 3}, {"producer_id": 9, "first_offset": 12}]]


def _body(records: list[object]) -> dict[str, object]:
    return {
        "throttle_time_ms": 7,
        "responses": [
            {"topic": "events", "partitions": [
                {"partition_index": i, "error_code": 0 if i else 1, "high_watermark": 10 * i,
                 "last_stable_offset": 10 * i - 1, "log_start_offset": i,
                 "aborted_transactions": ABORTED[i % len(ABORTED)],
                 "records": r} for i, r in enumerate(records)]},
            {"topic": "ünïcode", "partitions": []},
        ],
    }


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_bytes_records_encode_as_the_table_does(version: int) -> None:
    body = _body([b"", b"abc", b"x" * 1000])
    expected = encode_frame(encode_response(FETCH, version, 42, body))
    assert _flatten(encode_fetch_response(version, 42, body)) == expected


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_file_slices_stay_slices_and_read_back(version: int, tmp_path: Path) -> None:
    data = bytes(range(256)) * 8
    segment = _File(tmp_path / "segment", data)
    slices = [ReadResult(segment, 100, 700, 5), ReadResult(None, 0, 0, 9)]  # type: ignore[arg-type]
    pieces = encode_fetch_response(version, 3, _body(slices))
    assert slices[0] in pieces and slices[1] not in pieces  # an empty one is written inline
    frame = _flatten(pieces)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation_id, decoded = decode_response(FETCH, version, memoryview(frame)[4:])
    assert correlation_id == 3
    records = [bytes(p["records"]) for p in decoded["responses"][0]["partitions"]]
    assert records == [data[100:800], b""]
