"""Fetch responses: sendfile of the stored bytes versus reading them and packing normally.

    python -m benchmarks.fetch_send [--quick]

Writes a log of 1 KiB messages, then answers fetches of several sizes over TCP loopback to a
receiver thread that only counts bytes, both ways the broker could:

- ``sendfile``: ``encode_with_file_slices`` + ``send_pieces`` (the broker's way, broker/frames.py);
- ``read_and_pack``: ``ReadResult.bytes()`` into the body, ``encode_response``, then the same
  ``send_pieces`` with that one piece.

Prints one JSON line per case with fetches/s and MB/s (10**6 bytes of records per second); each
case runs several rounds and reports the best. The receiver's cost is the same for both ways.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from broker.frames import encode_with_file_slices, send_pieces
from broker.log import LogConfig, PartitionLog, ReadResult
from protocol.messageset import encode_message_set
from protocol.wire import encode_response


def _body(records: Any) -> dict[str, Any]:
    return {"topics": [{"name": "t", "partitions": [{
        "partition": 0, "error_code": 0, "high_watermark": 0, "log_start_offset": 0,
        "records": records}]}]}


async def _send_by_sendfile(stream: trio.SocketStream, result: ReadResult) -> None:
    await send_pieces(stream, encode_with_file_slices(1, _body(result)))


async def _send_by_packing(stream: trio.SocketStream, result: ReadResult) -> None:
    await send_pieces(stream, [encode_response(1, _body(result.bytes()))])


WAYS: dict[str, Callable[[trio.SocketStream, ReadResult], Any]] = {
    "sendfile": _send_by_sendfile,
    "read_and_pack": _send_by_packing,
}


def _drain(sock: socket.socket, stop: threading.Event) -> None:
    buf = bytearray(1 << 20)
    while not stop.is_set():
        if not sock.recv_into(buf):
            return


async def _run(log: PartitionLog, fetch_bytes: int, way: str, seconds: float) -> dict[str, Any]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    peer = socket.create_connection(("127.0.0.1", port))
    stream = await listeners[0].accept()
    stop = threading.Event()
    receiver = threading.Thread(target=_drain, args=(peer, stop), daemon=True)
    receiver.start()
    send = WAYS[way]
    fetches = sent = 0
    end = log.log_end_offset
    offset = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        result = log.read(offset, fetch_bytes)
        await send(stream, result)
        fetches += 1
        sent += result.length
        offset = offset + max(1, result.length // 1036)  # ~entries per fetch; wraps below
        if offset >= end:
            offset = 0
    elapsed = time.perf_counter() - started
    stop.set()
    await stream.aclose()
    peer.close()
    receiver.join(5)
    for listener in listeners:
        await listener.aclose()
    return {
        "bench": "fetch_send",
        "way": way,
        "fetch_bytes": fetch_bytes,
        "fetches_per_s": round(fetches / elapsed),
        "mb_per_s": round(sent / elapsed / 1e6, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short rounds (a smoke test)")
    args = parser.parse_args(argv)
    seconds, rounds = (0.2, 1) if args.quick else (1.0, 3)
    with tempfile.TemporaryDirectory() as tmp:
        log = PartitionLog.open(Path(tmp) / "t-0", LogConfig())
        batch = encode_message_set([(None, b"v" * 1000, 0)] * 1000)  # ~1 MB per append
        for _ in range(64):
            log.append(batch)
        for fetch_bytes in (4096, 65536, 131072, 262144, 524288, 1 << 20):
            for way in WAYS:
                best = max(
                    (trio.run(_run, log, fetch_bytes, way, seconds) for _ in range(rounds)),
                    key=lambda r: r["mb_per_s"],
                )
                print(json.dumps(best), flush=True)
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
