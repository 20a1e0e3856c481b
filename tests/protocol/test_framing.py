"""Framing: whole frames out of arbitrary chunks, and oversized lengths refused before buffering."""

from __future__ import annotations

import struct

import pytest

from protocol.errors import FrameTooLargeError, ProtocolError
from protocol.framing import FrameDecoder, encode_frame, frame_header


def drain(decoder: FrameDecoder, into: list[bytes] | None = None) -> list[bytes]:
    """Every whole frame available now (appended to ``into`` as they come, so a caller keeps
    the frames taken out before an error)."""
    frames = [] if into is None else into
    while (frame := decoder.next_frame()) is not None:
        frames.append(frame)
    return frames


PAYLOADS = [b"", b"a", b"hello world", bytes(range(256)) * 3]


def test_frame_is_a_big_endian_length_then_the_payload() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame_header(70_000) == struct.pack(">I", 70_000)


def test_whole_stream_in_one_chunk() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(b"".join(map(encode_frame, PAYLOADS)))
    assert drain(decoder) == PAYLOADS
    assert decoder.buffered == 0


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 64])
def test_stream_in_small_chunks(chunk: int) -> None:
    stream = b"".join(map(encode_frame, PAYLOADS))
    decoder = FrameDecoder()
    frames = []
    for i in range(0, len(stream), chunk):
        decoder.receive_data(memoryview(stream)[i : i + chunk])
        frames += drain(decoder)
    assert frames == PAYLOADS
    assert decoder.buffered == 0


def test_the_decoder_keeps_nothing_of_a_chunk_it_was_fed() -> None:
    """A reader may feed views of one receive buffer it reuses for every read."""
    stream = b"".join(map(encode_frame, PAYLOADS))
    buffer = bytearray(len(stream))
    decoder = FrameDecoder()
    frames: list[bytes] = []
    for start in range(0, len(stream), 7):
        piece = stream[start : start + 7]
        buffer[: len(piece)] = piece
        decoder.receive_data(memoryview(buffer)[: len(piece)])
        buffer[:] = bytes(len(buffer))  # the next read overwrites it
        drain(decoder, frames)
    assert frames == PAYLOADS


def test_partial_frame_waits_for_more() -> None:
    decoder = FrameDecoder()
    frame = encode_frame(b"payload")
    decoder.receive_data(frame[:-1])
    assert decoder.next_frame() is None
    assert decoder.buffered == len(frame) - 1
    decoder.receive_data(frame[-1:])
    assert decoder.next_frame() == b"payload"


def test_next_frame_bytes_is_known_once_the_prefix_has_arrived() -> None:
    decoder = FrameDecoder()
    first, second = encode_frame(b"payload"), encode_frame(b"x" * 300)
    decoder.receive_data(first[:3])
    assert decoder.next_frame_bytes is None
    decoder.receive_data(first[3:] + second[:5])
    assert decoder.next_frame_bytes == len(first)
    assert decoder.next_frame() == b"payload"
    assert decoder.next_frame_bytes == len(second) == 304
    decoder.receive_data(second[5:])
    assert decoder.next_frame() == b"x" * 300
    assert decoder.next_frame_bytes is None


def test_a_frame_of_exactly_the_limit_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    decoder.receive_data(encode_frame(b"x" * 10))
    assert decoder.next_frame() == b"x" * 10


def test_oversized_length_raises_on_its_fourth_byte() -> None:
    decoder = FrameDecoder(max_frame_bytes=100)
    header = frame_header(101)
    for byte in header[:3]:
        decoder.receive_data(bytes([byte]))
        assert decoder.next_frame() is None
    with pytest.raises(FrameTooLargeError) as info:
        decoder.receive_data(header[3:])
    assert (info.value.size, info.value.limit) == (101, 100)
    assert "101" in str(info.value) and "100" in str(info.value)
    assert decoder.buffered == 0


def test_oversized_frame_body_is_never_kept() -> None:
    decoder = FrameDecoder(max_frame_bytes=1_000)
    with pytest.raises(FrameTooLargeError):
        decoder.receive_data(frame_header(50_000) + b"\x00" * 20_000)
    assert decoder.buffered == 0


def test_frames_before_an_oversized_one_are_still_delivered() -> None:
    decoder = FrameDecoder(max_frame_bytes=16)
    decoder.receive_data(encode_frame(b"one") + encode_frame(b"two") + frame_header(17) + b"zz")
    assert decoder.buffered == len(encode_frame(b"one") + encode_frame(b"two"))  # "zz" dropped
    assert decoder.next_frame() == b"one"
    assert decoder.next_frame() == b"two"
    with pytest.raises(FrameTooLargeError):
        decoder.next_frame()
    assert decoder.buffered == 0


def test_decoder_is_spent_after_an_oversized_frame() -> None:
    decoder = FrameDecoder(max_frame_bytes=4)
    with pytest.raises(FrameTooLargeError):
        decoder.receive_data(frame_header(5))
    with pytest.raises(FrameTooLargeError):
        decoder.receive_data(encode_frame(b"ok"))
    with pytest.raises(FrameTooLargeError):
        decoder.next_frame()


def test_oversized_length_split_across_chunks_after_a_partial_frame() -> None:
    decoder = FrameDecoder(max_frame_bytes=8)
    stream = encode_frame(b"12345678") + frame_header(9)
    decoder.receive_data(stream[:6])
    assert decoder.next_frame() is None
    decoder.receive_data(stream[6:14])  # the first frame completes; 2 bytes of the bad prefix
    assert decoder.next_frame() == b"12345678"
    with pytest.raises(FrameTooLargeError):
        decoder.receive_data(stream[14:])


def test_long_streams_stay_correct_across_buffer_compaction() -> None:
    """The consumed prefix is dropped once large; positions kept for later frames must follow."""
    payloads = [bytes([i]) * (300_000 + i) for i in range(12)]
    stream = b"".join(map(encode_frame, payloads)) + frame_header(2_000_000)
    decoder = FrameDecoder(max_frame_bytes=1_000_000)
    frames: list[bytes] = []
    with pytest.raises(FrameTooLargeError):
        for i in range(0, len(stream), 65_537):
            decoder.receive_data(stream[i : i + 65_537])
            drain(decoder, frames)
    assert frames == payloads


def test_frame_too_large_is_a_protocol_error() -> None:
    assert issubclass(FrameTooLargeError, ProtocolError)


def test_whole_frame_starts_with_looks_only_at_a_whole_next_frame() -> None:
    """The idle lane picks the requests it answers by their first bytes, without taking them
    out: a partial frame, a frame shorter than the prefix or the frame after the next one
    never match."""
    decoder = FrameDecoder(max_frame_bytes=16)
    decoder.receive_data(encode_frame(b"ab") + encode_frame(b"abcd")[:5])
    assert not decoder.whole_frame_starts_with(b"abc")  # "ab" is shorter than the prefix
    assert decoder.whole_frame_starts_with(b"ab")
    assert decoder.next_frame() == b"ab"
    assert not decoder.whole_frame_starts_with(b"a")  # only its first byte has arrived
    decoder.receive_data(b"bcd" + encode_frame(b"x" * 17)[:4])
    assert decoder.whole_frame_starts_with(b"abc")
    assert decoder.next_frame() == b"abcd"
    assert not decoder.whole_frame_starts_with(b"")  # an oversized frame is never whole


def test_failing_says_next_frame_raises_once_the_frames_before_it_are_taken() -> None:
    decoder = FrameDecoder(max_frame_bytes=8)
    decoder.receive_data(encode_frame(b"ok") + frame_header(9))
    assert not decoder.failing
    assert decoder.next_frame() == b"ok"
    assert decoder.failing
    with pytest.raises(FrameTooLargeError):
        decoder.next_frame()


def test_frames_parsed_in_place_are_taken_out_with_skip_to() -> None:
    decoder = FrameDecoder(max_frame_bytes=16)
    decoder.receive_data(encode_frame(b"one") + encode_frame(b"two") + encode_frame(b"th"))
    buffer, start, stop = decoder.front()
    assert bytes(buffer[start:stop]) == encode_frame(b"one") + encode_frame(b"two") + b"\0\0\0\2th"
    decoder.skip_to(start + len(encode_frame(b"one")))
    assert decoder.next_frame() == b"two"
    decoder.skip_to(decoder.front()[2])  # the last one: the buffer is compacted
    assert decoder.buffered == 0 and decoder.front()[1:] == (0, 0)
    decoder.receive_data(encode_frame(b"four"))
    assert decoder.next_frame() == b"four"


def test_front_ends_before_an_oversized_frame_and_skip_to_stays_inside_it() -> None:
    decoder = FrameDecoder(max_frame_bytes=16)
    decoder.receive_data(encode_frame(b"one") + frame_header(17))
    _, start, stop = decoder.front()
    assert (start, stop) == (0, len(encode_frame(b"one")))
    for outside in (-1, stop + 1):
        with pytest.raises(ValueError, match="outside the frames buffered"):
            decoder.skip_to(outside)
    decoder.skip_to(stop)
    assert decoder.failing
    with pytest.raises(FrameTooLargeError):
        decoder.next_frame()
