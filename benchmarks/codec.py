"""Message-set codec throughput: ``python -m benchmarks.codec [--quick]``.

Prints one JSON line per case: encode and decode of batches of 1,000 messages with 100-byte values
for each compression codec, decode without CRC checks (what the checks cost), the same messages as
one record batch (message format v2, ``"bench": "record_batch"``: none, lz4, zstd), what
down-converting a fetched range of such batches to v1 costs (``"bench": "down_conversion"``: none,
lz4), and the CRC32 implementations side by side with CRC-32C's (the figures behind the choices in
protocol/messageset.py and protocol/record_batch.py).

Each case runs for a fixed time in several rounds and reports the best round, so a busy machine
shows up as noise rather than as a slower codec. ``mb_per_s`` counts the bytes of the uncompressed
message set (what the codec reads or writes), in units of 10**6 bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import zlib
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import crcmod.predefined
import google_crc32c

from protocol.compression import BatchCodec, Codec
from protocol.down_conversion import down_convert
from protocol.messageset import decode_messages, encode_message_set, encode_records
from protocol.record_batch import decode_batches, encode_batch

BATCH = 1_000
VALUE_BYTES = 100


def sample_records(n: int = BATCH, size: int = VALUE_BYTES, seed: int = 7) -> list[
    tuple[bytes | None, bytes | None, int]
]:
    """Log-like values (a little repetitive, like real ones) so compression has something to do."""
    rng = random.Random(seed)
    words = [b"user", b"click", b"view", b"cart", b"id", b"ok", b"page", b"ms", b"=", b" "]
    records: list[tuple[bytes | None, bytes | None, int]] = []
    for i in range(n):
        parts = [b"%d " % (1_700_000_000_000 + i)]
        while sum(map(len, parts)) < size:
            parts.append(rng.choice(words) if rng.random() < 0.7 else b"%x" % rng.getrandbits(24))
        records.append((None, b"".join(parts)[:size], 1_700_000_000_000 + i))
    return records


def best_rate(op: Callable[[], object], seconds: float, rounds: int = 5) -> float:
    """Calls of ``op`` per second in the fastest of ``rounds`` rounds, about ``seconds`` in all."""
    per_round = seconds / rounds
    op()  # warm up
    start = time.perf_counter()
    op()
    once = max(time.perf_counter() - start, 1e-9)
    calls = max(1, int(per_round / once))
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            op()
        best = max(best, calls / (time.perf_counter() - start))
    return best


def emit(line: Mapping[str, Any]) -> None:
    """One JSON line of results, at once (the suite reads them as they come)."""
    print(json.dumps(line), flush=True)


def codec_cases(seconds: float) -> None:
    records = sample_records()
    plain_bytes = len(encode_records(records))
    for codec in Codec:
        encoded = encode_message_set(records, codec=codec)
        assert len(decode_messages(encoded)[0]) == BATCH
        cases: list[tuple[str, Callable[[], object]]] = [
            ("encode", partial(encode_message_set, records, codec=codec)),
            ("decode", partial(decode_messages, encoded)),
        ]
        if codec is Codec.NONE:
            cases.append(("decode_no_crc", partial(decode_messages, encoded, verify_crc=False)))
        for case, op in cases:
            batches = best_rate(op, seconds)
            emit({
                "bench": "codec",
                "case": case,
                "codec": codec.name.lower(),
                "batch": BATCH,
                "value_bytes": VALUE_BYTES,
                "set_bytes": len(encoded),
                "msgs_per_s": round(batches * BATCH),
                "mb_per_s": round(batches * plain_bytes / 1e6, 1),
            })


def _decode_batch(data: bytes) -> int:
    return sum(len(batch.records) for batch in decode_batches(data))


def record_batch_cases(seconds: float) -> None:
    """The messages of ``codec_cases`` as one v2 batch; ``mb_per_s`` counts the same bytes as
    there (the v1 message set's), so the lines compare directly."""
    records = sample_records()
    plain_bytes = len(encode_records(records))
    for codec in (BatchCodec.NONE, BatchCodec.LZ4, BatchCodec.ZSTD):
        encoded = encode_batch(records, codec=codec)
        assert _decode_batch(encoded) == BATCH
        for case, op in (
            ("encode", partial(encode_batch, records, codec=codec)),
            ("decode", partial(_decode_batch, encoded)),
        ):
            batches = best_rate(op, seconds)
            emit({
                "bench": "record_batch",
                "case": case,
                "codec": codec.name.lower(),
                "batch": BATCH,
                "value_bytes": VALUE_BYTES,
                "set_bytes": len(encoded),
                "msgs_per_s": round(batches * BATCH),
                "mb_per_s": round(batches * plain_bytes / 1e6, 1),
            })


FETCH_BATCHES = 8  # batches of ``BATCH`` messages in one fetched range


def down_conversion_cases(seconds: float) -> None:
    """A fetched range of ``FETCH_BATCHES`` v2 batches converted for a v1 reader (what the
    broker does for Fetch below v4). ``mb_per_s`` counts the v1 message set's uncompressed bytes
    as the other lines do; ``fetched_mb_per_s`` and ``us_per_fetched_mb`` the range's bytes as
    stored, i.e. what one fetched MB costs."""
    records = sample_records()
    plain_bytes = len(encode_records(records)) * FETCH_BATCHES
    for codec in (BatchCodec.NONE, BatchCodec.LZ4):
        fetched = b"".join(encode_batch(records, base_offset=i * BATCH, codec=codec)
                           for i in range(FETCH_BATCHES))
        op = partial(down_convert, fetched, to_magic=1, fetch_offset=0)
        assert op().converted == BATCH * FETCH_BATCHES
        ranges = best_rate(op, seconds)
        emit({
            "bench": "down_conversion",
            "case": "v2_to_v1",
            "codec": codec.name.lower(),
            "batch": BATCH,
            "batches": FETCH_BATCHES,
            "value_bytes": VALUE_BYTES,
            "set_bytes": len(fetched),
            "msgs_per_s": round(ranges * BATCH * FETCH_BATCHES),
            "mb_per_s": round(ranges * plain_bytes / 1e6, 1),
            "fetched_mb_per_s": round(ranges * len(fetched) / 1e6, 1),
            "us_per_fetched_mb": round(1e6 / (ranges * len(fetched) / 1e6)),
        })


def crc_case(seconds: float) -> None:
    crcmod_crc32 = crcmod.predefined.mkPredefinedCrcFun("crc-32")
    using_extension = bool(sys.modules["crcmod.crcmod"]._usingExtension)
    line: dict[str, Any] = {"bench": "crc32", "crcmod_c_extension": using_extension}
    for label, size in (("100B", 100), ("1MiB", 1 << 20)):
        buf = random.Random(size).randbytes(size)
        assert crcmod_crc32(buf) == zlib.crc32(buf)
        for name, fn in (("crcmod", crcmod_crc32), ("zlib", zlib.crc32),
                         ("crc32c", google_crc32c.value)):
            calls = best_rate(partial(fn, buf), seconds / 2)
            line[f"{name}_{label}_mb_per_s"] = round(calls * size / 1e6, 1)
            if size == 100:
                line[f"{name}_{label}_calls_per_s"] = round(calls)
    emit(line)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.codec", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short rounds, for a smoke test")
    args = parser.parse_args(argv)
    seconds = 0.25 if args.quick else 2.0
    codec_cases(seconds)
    record_batch_cases(seconds)
    down_conversion_cases(seconds)
    crc_case(seconds)


if __name__ == "__main__":
    main()
