"""Compressed magic 0 wrappers hold their inner messages' absolute offsets.

In magic 0 the inner messages of a compressed wrapper carry absolute offsets (Kafka's readers take
them as stored), so assigning offsets to such a set means rewriting every inner offset and
recompressing, as Kafka's broker does for magic 0 (LogValidator). Magic 1 wrappers need none of
this: their inner offsets are relative and the wrapper's own offset field places them.

Segments written before this rule held magic 0 wrappers as produced -- inner offsets as the
producer numbered them, the wrapper's offset the absolute one of the last -- and were read with
the magic 1 formula. ``upgrade_segments`` converts such a partition directory once, when the log
is opened: each of those wrappers is renumbered to the offsets the old rule read, the segments
holding one are rewritten (their indexes are dropped, to be rebuilt), and the marker file
``layout.V0_ABSOLUTE_OFFSETS`` records that the directory needs no further look.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import structlog

from broker.log import layout
from protocol.compression import compress
from protocol.entry_scan import entry_size_at, scan_entries
from protocol.errors import MessageFormatError
from protocol.messageset import CODEC_MASK, Entry, encode_message, inner_entries, read_entries

log = structlog.get_logger(__name__)

_CHUNK = 1 << 20


def renumber(wrapper: Entry, inner: Sequence[Entry], offsets: Sequence[int]) -> bytes:
    """A magic 0 ``wrapper`` holding ``inner`` again, recompressed with the same codec, each
    inner message given its offset from ``offsets`` and the wrapper the last."""
    payload = b"".join(
        encode_message(
            offset, m.key, m.value, m.timestamp, attributes=m.attributes, magic=m.magic
        )
        for m, offset in zip(inner, offsets, strict=True)
    )
    return encode_message(
        offsets[-1],
        wrapper.key,
        compress(wrapper.codec, payload, magic=0),
        attributes=wrapper.attributes,
        magic=0,
    )


def upgrade_segments(directory: Path) -> int:
    """Convert the directory's segments to absolute magic 0 inner offsets unless its marker says
    they are; returns how many wrappers were rewritten."""
    marker = directory / layout.V0_ABSOLUTE_OFFSETS
    if marker.exists():
        return 0
    converted = 0
    for path in sorted(directory.glob(f"*{layout.LOG}")):
        parsed = layout.parse_segment_name(path.name)
        if parsed is not None:
            converted += _upgrade_segment(directory, parsed[0])
    layout.write_atomically(marker, b"", durable=True)
    return converted


def _upgrade_segment(directory: Path, base_offset: int) -> int:
    path = layout.segment_path(directory, base_offset, layout.LOG)
    replacements = _legacy_wrappers(path)
    if not replacements:
        return 0
    tmp = layout.segment_path(directory, base_offset, layout.LOG, layout.TMP)
    source = os.open(path, os.O_RDONLY)
    target = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        copied = 0
        size = os.fstat(source).st_size
        for position, length, data in [*replacements, (size, 0, b"")]:
            while copied < position:
                chunk = os.pread(source, min(_CHUNK, position - copied), copied)
                os.write(target, chunk)
                copied += len(chunk)
            os.write(target, data)
            copied += length
        os.fsync(target)
    finally:
        os.close(source)
        os.close(target)
    # Positions after the first rewritten wrapper move: the indexes are rebuilt on open.
    for suffix in (layout.INDEX, layout.TIME_INDEX):
        layout.segment_path(directory, base_offset, suffix).unlink(missing_ok=True)
    os.replace(tmp, path)
    layout.fsync_dir(directory)
    log.info(
        "log.segment.v0_offsets_upgraded", segment=str(path), wrappers=len(replacements)
    )
    return len(replacements)


def _legacy_wrappers(path: Path) -> list[tuple[int, int, bytes]]:
    """``(position, size, new bytes)`` of each magic 0 wrapper in the segment whose last inner
    offset is not its own: renumbered to the offsets the old rule read. The scan stops where the
    file stops making sense (recovery deals with that); a wrapper that cannot be opened is left
    as it is."""
    out: list[tuple[int, int, bytes]] = []
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pos = 0
        while pos < size:
            buf = os.pread(fd, min(_CHUNK, size - pos), pos)
            scan = scan_entries(buf, verify_crc=False)
            if not scan.positions:
                need = entry_size_at(buf, 0)
                if scan.error is not None or need is None or need > size - pos:
                    break
                buf = os.pread(fd, need, pos)
                scan = scan_entries(buf, verify_crc=False)
                if not scan.positions:
                    break
            for at, length, magic, attributes in zip(
                scan.positions, scan.sizes, scan.magics, scan.attributes, strict=True
            ):
                if magic == 0 and attributes & CODEC_MASK:
                    renumbered = _renumbered_legacy(buf[at : at + length])
                    if renumbered is not None:
                        out.append((pos + at, length, renumbered))
            pos += scan.end
            if scan.error is not None:
                break
    finally:
        os.close(fd)
    return out


def _renumbered_legacy(raw: bytes) -> bytes | None:
    try:
        (wrapper,), _ = read_entries(raw)
        inner = inner_entries(wrapper)
    except MessageFormatError:
        return None
    shift = wrapper.offset - inner[-1].offset
    if not shift:
        return None  # already absolute: both rules read the same offsets
    return renumber(wrapper, inner, [m.offset + shift for m in inner])
