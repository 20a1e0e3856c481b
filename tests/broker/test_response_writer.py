"""The connection's writer sends the responses ready at the same moment in one go, in order,
with the very bytes one send per response would give, and never waits for more to coalesce."""

from __future__ import annotations

import socket
from collections.abc import Sequence

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.frames import Piece, send_pieces
from broker.log import ReadResult
from broker.log.segment import SegmentFile
from broker.response_writer import PENDING_RESPONSE_BYTES, ResponseTimeoutError, ResponseWriter


class Recorder:
    """A send that records each call's bytes; ``gate`` (when set) holds every call open."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []
        self.gate: trio.Event | None = None

    async def __call__(self, pieces: Sequence[Piece]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.calls.append(b"".join(p.bytes() if isinstance(p, ReadResult) else p for p in pieces))
        await trio.lowlevel.checkpoint()


def test_responses_queued_together_leave_in_one_send() -> None:
    recorder = Recorder()

    async def main() -> None:
        writer = ResponseWriter(recorder, timeout=10)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            await trio.testing.wait_all_tasks_blocked()
            for i in range(5):  # no checkpoint between: the writer cannot run
                await writer.put([b"head%d" % i, b"body%d" % i])
            writer.close()

    trio.run(main)
    assert recorder.calls == [b"".join(b"head%dbody%d" % (i, i) for i in range(5))]


def test_a_held_request_does_not_hold_the_responses_before_it() -> None:
    """The reader blocks on a held request (here an event never set while we look): what it
    queued before leaves at once, not when the held request is answered."""
    recorder = Recorder()
    seen_while_held: list[list[bytes]] = []

    async def main() -> None:
        writer = ResponseWriter(recorder, timeout=10)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            await writer.put([b"heartbeat answer"])
            with trio.move_on_after(5):
                while not recorder.calls:
                    await trio.sleep(0)  # the reader waiting on its held request
            seen_while_held.append(list(recorder.calls))
            await writer.put([b"join answer"])  # the held request answered at last
            writer.close()

    trio.run(main)
    assert seen_while_held == [[b"heartbeat answer"]]
    assert recorder.calls == [b"heartbeat answer", b"join answer"]


def test_put_waits_while_too_much_is_unsent() -> None:
    recorder = Recorder()
    recorder.gate = trio.Event()
    big = b"x" * (PENDING_RESPONSE_BYTES + 1)
    order: list[str] = []

    async def main() -> None:
        writer = ResponseWriter(recorder, timeout=10)
        gate = recorder.gate
        assert gate is not None

        async def open_gate() -> None:
            await trio.testing.wait_all_tasks_blocked()
            order.append("sent")
            gate.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            nursery.start_soon(open_gate)
            await writer.put([big])
            order.append("put returned")
            writer.close()

    trio.run(main)
    assert order == ["sent", "put returned"]


def test_a_peer_that_does_not_read_fails_the_writer_and_the_next_put() -> None:
    recorder = Recorder()
    recorder.gate = trio.Event()  # never set: the peer takes nothing
    failed: list[str] = []

    async def main() -> None:
        writer = ResponseWriter(recorder, timeout=0.05, on_failure=lambda: failed.append("x"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            await writer.put([b"answer"])
            with trio.fail_after(10):
                while writer.failure is None:
                    await trio.sleep(0.01)
            with pytest.raises(ResponseTimeoutError, match="connections_max_idle_ms=50"):
                await writer.put([b"next"])

    trio.run(main)
    assert failed == ["x"]


# ----------------------------------------------------------------- send_pieces, coalesced

Frame = list[bytes | tuple[int, int]]  # packed bytes, or (position, length) in the file
FILE_BYTES = bytes(range(256)) * 64

frames = st.lists(
    st.lists(
        st.one_of(
            st.binary(max_size=3000),
            st.integers(0, len(FILE_BYTES) - 1).flatmap(
                lambda pos: st.tuples(st.just(pos), st.integers(1, len(FILE_BYTES) - pos))
            ),
        ),
        min_size=1, max_size=6,
    ),
    min_size=1, max_size=30,
)


def _pieces(frame: Frame, file: SegmentFile) -> list[Piece]:
    return [p if isinstance(p, bytes) else ReadResult(file, p[0], p[1], 0) for p in frame]


def _received(sends: list[list[Piece]]) -> bytes:
    """The bytes a peer receives when the frames go out in ``sends`` (one send_pieces each)."""
    left, right = socket.socketpair()
    right.setblocking(False)
    got = bytearray()

    async def main() -> None:
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(left))

        async def reader() -> None:
            while True:
                await trio.lowlevel.wait_readable(right)
                data = right.recv(1 << 16)
                if not data:
                    return
                got.extend(data)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            for pieces in sends:
                await send_pieces(stream, pieces)
            await stream.aclose()

    try:
        trio.run(main)
    finally:
        right.close()
    return bytes(got)


@settings(max_examples=40, deadline=None)
@given(frames)
def test_coalesced_frames_reach_the_peer_as_the_same_bytes(
    tmp_path_factory: pytest.TempPathFactory, batch: list[Frame],
) -> None:
    path = tmp_path_factory.mktemp("slices") / "segment.log"
    path.write_bytes(FILE_BYTES)
    file = SegmentFile(path, 0)
    one_by_one = _received([_pieces(f, file) for f in batch])
    together = _received([[p for f in batch for p in _pieces(f, file)]])
    expected = b"".join(
        p if isinstance(p, bytes) else FILE_BYTES[p[0] : p[0] + p[1]] for f in batch for p in f
    )
    assert together == one_by_one == expected


# -------------------------------------------------------------- flush_now, the idle lane's

def test_flush_now_writes_the_queue_at_once_and_leaves_what_the_socket_did_not_take() -> None:
    left, right = socket.socketpair()
    left.setblocking(False)
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    try:
        writer = ResponseWriter(Recorder(), timeout=10)
        assert writer.flush_now(left.fileno())  # nothing queued: nothing left
        writer.put_nowait([b"first ", b"second"])
        assert writer.flush_now(left.fileno())
        assert right.recv(100) == b"first second"
        big = bytes(range(256)) * 4096  # more than the socket's buffer takes
        writer.put_nowait([big, b"after"])
        assert not writer.flush_now(left.fileno())  # the rest waits for the writer's run
        right.setblocking(False)
        got = bytearray()
        while True:
            try:
                got += right.recv(1 << 20)
            except BlockingIOError:
                break
        assert 0 < len(got) < len(big) and big.startswith(got)
        left_over = writer._queue  # what run would send next, in order
        assert b"".join(left_over) == big[len(got):] + b"after"
    finally:
        left.close()
        right.close()
