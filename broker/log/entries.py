"""Checking stored entries without decoding them: the scan behind append, recovery and indexes.

The codec (protocol.messageset) decodes entries into keys and values for consumers. The log only
needs to know that each entry is whole and well formed and where it sits, so this scan reads the
headers and lengths in place, checks the CRC over the bytes it covers and copies nothing it
keeps. It never raises for bad bytes: it stops and says why, because recovery truncates where a
producer's request is rejected.

The result is a set of columns (positions, offsets, sizes, ...), not one object per entry, and
runs of same-shaped entries -- plain v1 messages with equal key and value lengths, which sit at a
fixed stride -- are checked column-wise by C calls (``iter_unpack``, ``tuple.count``, ``map``):
per-message Python work is what makes a Python log slow.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache
from itertools import islice
from operator import itemgetter, lt
from typing import NamedTuple

from protocol.compression import Codec
from protocol.messageset import CODEC_MASK, LOG_OVERHEAD, MIN_SIZE, crc32

_HEAD_V1 = struct.Struct(">qiIBBqi")  # offset, size, crc, magic, attributes, timestamp, klen
_OFFSET_SIZE = struct.Struct(">qi")
_CRC_MAGIC_ATTR = struct.Struct(">IBB")
_INT32 = struct.Struct(">i")
_MAX_CODEC = max(Codec)
_RUN_FIRST = 8
_RUN_MAX = 1024


class Scan(NamedTuple):
    """Entries found by ``scan_entries``, one column per header field."""

    positions: Sequence[int]  # of each entry's first byte, in the scanned buffer
    offsets: Sequence[int]  # for a compressed wrapper, the offset of its last inner message
    sizes: Sequence[int]  # bytes of the whole entry, LOG_OVERHEAD included
    magics: Sequence[int]
    attributes: Sequence[int]
    timestamps: Sequence[int]  # -1 for magic 0
    key_lengths: Sequence[int]  # -1 for a null key
    end: int  # position just past the last whole, valid entry
    error: str | None  # why the entry at ``end`` is invalid; None when it is only incomplete
    bad_crc: bool  # the entry at ``end`` is whole and well sized but fails its CRC


@lru_cache(maxsize=256)
def _run_layout(key_length: int, value_length: int) -> tuple[struct.Struct, struct.Struct]:
    """Structs over one entry of this shape: its header fields (key and value skipped), and
    the bytes its CRC covers."""
    fields = struct.Struct(f">qiIBBqi{max(key_length, 0)}xi{max(value_length, 0)}x")
    return fields, struct.Struct(f">16x{fields.size - 16}s")


def scan_entries(
    data: bytes | bytearray | memoryview,
    *,
    start: int = 0,
    verify_crc: bool = True,
    after_offset: int | None = None,
) -> Scan:
    """The whole, valid entries of ``data`` from ``start`` on.

    Stops at the end of ``data``, at an incomplete trailing entry (``error`` None, ``end`` short
    of ``len(data)``) or at the first invalid one (``error`` says why). With ``after_offset``,
    offsets must also increase strictly from it on, as they do in a stored segment.
    """
    view = memoryview(data)
    n = len(data)
    positions: list[int] = []
    offsets: list[int] = []
    sizes: list[int] = []
    magics: list[int] = []
    attributes_col: list[int] = []
    timestamps: list[int] = []
    key_lengths: list[int] = []
    head_v1 = _HEAD_V1.unpack_from
    offset_size = _OFFSET_SIZE.unpack_from
    crc_magic_attr = _CRC_MAGIC_ATTR.unpack_from
    int32 = _INT32.unpack_from
    min_v0, min_v1 = MIN_SIZE[0], MIN_SIZE[1]
    last = after_offset
    pos = start
    error = None
    bad_crc = False
    run_chunk = _RUN_FIRST
    while pos + LOG_OVERHEAD <= n:
        offset, size = offset_size(data, pos)
        if size < min_v0:
            error = f"entry size {size} is below the minimum {min_v0}"
            break
        end = pos + LOG_OVERHEAD + size
        if end > n:
            break
        crc, magic, attributes = crc_magic_attr(data, pos + 12)
        if verify_crc and crc32(view[pos + 16 : end]) != crc:
            computed = crc32(view[pos + 16 : end])
            error = f"CRC mismatch: stored {crc:#010x}, computed {computed:#010x}"
            bad_crc = True
            break
        if magic == 1:
            if size < min_v1:
                error = f"v1 entry size {size} is below the minimum {min_v1}"
                break
            timestamp, klen = head_v1(data, pos)[5:]
            p = pos + 30
        elif magic == 0:
            timestamp = -1
            (klen,) = int32(data, pos + 18)
            p = pos + 22
        else:
            error = f"unknown magic {magic}"
            break
        if attributes & CODEC_MASK > _MAX_CODEC:
            error = f"unknown compression codec {attributes & CODEC_MASK}"
            break
        if klen > 0:
            p += klen
        if klen < -1 or p + 4 > end:
            error = f"key length {klen} does not fit the entry"
            break
        (vlen,) = int32(data, p)
        if (vlen != -1 or p + 4 != end) and (vlen < 0 or p + 4 + vlen != end):
            error = f"value length {vlen} does not fit the entry"
            break
        if last is not None:
            if offset <= last:
                error = f"offset {offset} does not follow offset {last}"
                break
            last = offset
        positions.append(pos)
        offsets.append(offset)
        sizes.append(end - pos)
        magics.append(magic)
        attributes_col.append(attributes)
        timestamps.append(timestamp)
        key_lengths.append(klen)
        pos = end
        # Same-shaped entries follow? Check a stretch of them column-wise.
        while (
            magic == 1
            and not attributes & CODEC_MASK
            and pos + LOG_OVERHEAD <= n
            and offset_size(data, pos)[1] == size
        ):
            count = min(run_chunk, (n - pos) // (LOG_OVERHEAD + size))
            if count < 2:
                break
            fields, covered = _run_layout(klen, vlen)
            run = view[pos : pos + count * fields.size]
            columns = tuple(zip(*fields.iter_unpack(run), strict=True))
            r_offsets, r_sizes, r_crcs, r_magics, r_attributes, r_timestamps, r_klens, r_vlens = (
                columns
            )
            good = count
            if (
                r_sizes.count(size) != count
                or r_magics.count(1) != count
                or r_attributes.count(attributes) != count
                or r_klens.count(klen) != count
                or r_vlens.count(vlen) != count
            ):
                good = next(
                    i
                    for i in range(count)
                    if (r_sizes[i], r_magics[i], r_attributes[i], r_klens[i], r_vlens[i])
                    != (size, 1, attributes, klen, vlen)
                )
            if verify_crc:
                computed_crcs = tuple(map(crc32, map(itemgetter(0), covered.iter_unpack(run))))
                if computed_crcs != r_crcs:
                    good = min(good, next(i for i in range(count) if computed_crcs[i] != r_crcs[i]))
            if last is not None:
                increasing = list(map(lt, (last, *r_offsets), r_offsets))
                if not all(increasing):
                    good = min(good, increasing.index(False))
                if good:
                    last = r_offsets[good - 1]
            if good:
                stride = fields.size
                positions.extend(range(pos, pos + good * stride, stride))
                offsets.extend(islice(r_offsets, good))
                sizes.extend(r_sizes[:good])
                magics.extend(r_magics[:good])
                attributes_col.extend(r_attributes[:good])
                timestamps.extend(islice(r_timestamps, good))
                key_lengths.extend(r_klens[:good])
                pos += good * stride
            if good < count:
                run_chunk = _RUN_FIRST
                break  # the one-at-a-time path names what is wrong with the next entry
            run_chunk = min(run_chunk * 2, _RUN_MAX)
    return Scan(
        positions,
        offsets,
        sizes,
        magics,
        attributes_col,
        timestamps,
        key_lengths,
        pos,
        error,
        bad_crc,
    )


def entry_size_at(data: bytes | bytearray | memoryview, position: int) -> int | None:
    """The whole size of the entry starting at ``position`` if its header is there."""
    if position + LOG_OVERHEAD > len(data):
        return None
    size: int = _OFFSET_SIZE.unpack_from(data, position)[1]
    return LOG_OVERHEAD + size
