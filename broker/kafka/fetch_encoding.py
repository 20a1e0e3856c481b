"""Kafka's Fetch response (v0-v5), written with its record data as file slices.

The table encoder (protocol/kafka) writes a body into one buffer; a Fetch's records should go
from the page cache to the socket with sendfile instead (broker/frames.py), so this one
response is written by hand, around the slices. tests/broker/kafka holds it to the table
encoder: both give the same bytes for the same body.
"""

from __future__ import annotations

import struct
from typing import Any

from broker.frames import Piece
from broker.log import ReadResult
from protocol.framing import frame_header

_CORRELATION = struct.Struct(">i")
_COUNT = struct.Struct(">i")
_STRING_LENGTH = struct.Struct(">h")
#: partition_index, error_code, high_watermark
_PARTITION = struct.Struct(">ihq")
_OFFSET = struct.Struct(">q")
#: an aborted transaction (v4+): producer_id, first_offset
_ABORTED = struct.Struct(">qq")
_NULL_ARRAY = -1


def encode_fetch_response(
    version: int, correlation_id: int, body: dict[str, Any]
) -> list[Piece]:
    """The whole frame: packed bytes, and each large enough ``ReadResult`` left in place."""
    pieces: list[Piece] = []
    out = bytearray(_CORRELATION.pack(correlation_id))
    if version >= 1:
        out += _COUNT.pack(body["throttle_time_ms"])
    topics = body["responses"]
    out += _COUNT.pack(len(topics))
    for topic in topics:
        name = topic["topic"].encode()
        out += _STRING_LENGTH.pack(len(name))
        out += name
        partitions = topic["partitions"]
        out += _COUNT.pack(len(partitions))
        for p in partitions:
            records = p["records"]
            out += _PARTITION.pack(p["partition_index"], p["error_code"], p["high_watermark"])
            if version >= 4:
                out += _OFFSET.pack(p["last_stable_offset"])
                if version >= 5:
                    out += _OFFSET.pack(p["log_start_offset"])
                aborted = p["aborted_transactions"]
                out += _COUNT.pack(_NULL_ARRAY if aborted is None else len(aborted))
                for txn in aborted or ():
                    out += _ABORTED.pack(txn["producer_id"], txn["first_offset"])
            out += _COUNT.pack(len(records) if not isinstance(records, ReadResult)
                               else records.length)
            if isinstance(records, ReadResult):
                if records.length:
                    pieces.append(bytes(out))
                    pieces.append(records)
                    out = bytearray()
            else:
                out += records
    pieces.append(bytes(out))
    length = sum(p.length if isinstance(p, ReadResult) else len(p) for p in pieces)
    first = pieces[0]
    assert isinstance(first, bytes)  # the correlation id always comes first
    pieces[0] = frame_header(length) + first
    return pieces
