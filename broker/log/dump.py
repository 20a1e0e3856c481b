"""``odradek log dump``: print what a segment, index or producer-state snapshot file holds,
like Kafka's DumpLogSegments.

    python -m broker.log.dump PATH... [--print-data] [--deep] [--json]

For a ``.log`` file, one line per entry: for a v0/v1 message or wrapper its offset, position,
size, CRC and whether it matches, magic, codec, timestamp type and value, key and value sizes;
for a record batch (magic 2) its base and last offsets, position, size, CRC-32C and whether it
matches, codec, timestamp type, base and max timestamps, record count, producer id, epoch and
base sequence, partition leader epoch. ``--print-data`` adds the key and value of plain
messages; ``--deep`` lists the inner messages of compressed wrappers and the records of every
batch (offset, timestamp, key and value sizes, headers; with ``--print-data`` keys and values
too). ``.index`` and ``.timeindex`` files list their entries and are checked against the
``.log`` beside them; ``.snapshot`` files list the producers they hold, each with its last
batches. Damage does not stop the dump: an entry with a bad CRC is shown as invalid, and where
the bytes stop making sense the dump says so and where that is. ``--json`` prints one JSON
object per line instead.

Exit status: 0 when every file is sound, 1 when damage was found, 2 when a file cannot be read.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from broker.log import layout, producer_state
from broker.log.index import OffsetIndex, TimeIndex
from protocol import record_batch
from protocol.compression import Codec
from protocol.entry_scan import entry_size_at, scan_entries
from protocol.errors import MessageFormatError
from protocol.messageset import (
    LOG_OVERHEAD,
    Entry,
    TimestampType,
    crc32,
    encode_message,
    open_wrapper,
    read_entries,
)

_CHUNK = 1 << 20
_TIMESTAMP_TYPE_NAMES = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


class _Printer:
    """Writes records either as ``name: value`` lines or as JSON lines."""

    def __init__(self, out: TextIO, as_json: bool) -> None:
        self.out = out
        self.as_json = as_json

    def record(self, fields: dict[str, Any], indent: str = "") -> None:
        if self.as_json:
            self.out.write(json.dumps(fields) + "\n")
            return
        shown = {k: v for k, v in fields.items() if k not in ("kind", "file", "inner")}
        self.out.write(indent + " ".join(f"{k}: {_human(v)}" for k, v in shown.items()) + "\n")
        for inner in fields.get("inner", ()):
            self.record(inner, indent + "  | ")

    def text(self, line: str) -> None:
        if not self.as_json:
            self.out.write(line + "\n")


def _human(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _data_fields(name: str, data: bytes | None, as_json: bool) -> dict[str, Any]:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        if as_json:
            return {f"{name}_base64": base64.b64encode(data).decode("ascii")}
        return {name: repr(data)}


def _message_fields(entry: Entry, crc_valid: bool, args: argparse.Namespace) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "offset": entry.offset,
        "position": entry.position,
        "size": LOG_OVERHEAD + entry.size,
        "crc": f"{entry.crc:#010x}",
        "valid": crc_valid,
        "magic": entry.magic,
        "codec": entry.codec.name.lower(),
        "timestamp_type": _TIMESTAMP_TYPE_NAMES[entry.timestamp_type] if entry.magic else None,
        "timestamp": entry.timestamp,
        "key_size": -1 if entry.key is None else len(entry.key),
        "value_size": -1 if entry.value is None else len(entry.value),
    }
    if args.print_data and entry.codec is Codec.NONE:  # a wrapper's value is compressed bytes
        fields.update(_data_fields("key", entry.key, args.json))
        fields.update(_data_fields("value", entry.value, args.json))
    return fields


def _inner_crc_valid(message: Entry) -> bool:
    body = encode_message(
        0,
        message.key,
        message.value,
        message.timestamp,
        attributes=message.attributes,
        magic=message.magic,
    )
    return int.from_bytes(body[12:16], "big") == message.crc


def _batch_fields(raw: bytes, position: int) -> dict[str, Any]:
    """A record batch's header as the dump shows it."""
    header = record_batch.read_batch_header(raw, base_position=position)
    assert header is not None  # the walk found it whole
    return {
        "base_offset": header.base_offset,
        "last_offset": header.last_offset,
        "position": position,
        "size": header.size,
        "crc": f"{header.crc:#010x}",
        "valid": record_batch.crc32c(raw[record_batch.ATTRIBUTES_AT :]) == header.crc,
        "magic": header.magic,
        "codec": header.codec.name.lower(),
        "timestamp_type": _TIMESTAMP_TYPE_NAMES[header.timestamp_type],
        "base_timestamp": header.base_timestamp,
        "max_timestamp": header.max_timestamp,
        "count": header.record_count,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "base_sequence": header.base_sequence,
        "partition_leader_epoch": header.partition_leader_epoch,
        "transactional": header.is_transactional,
        "control": header.is_control,
    }


def _record_fields(record: record_batch.BatchRecord, args: argparse.Namespace) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "kind": "record",
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key_size": -1 if record.key is None else len(record.key),
        "value_size": -1 if record.value is None else len(record.value),
    }
    headers = [{"key": name, **_data_fields("value", value, args.json)}
               for name, value in record.headers]
    if args.json:
        fields["headers"] = headers
    else:  # one word: name=value,...
        fields["headers"] = ",".join(
            f"{h['key']}={_human(h['value'])}" for h in headers) or "none"
    if args.print_data:
        fields.update(_data_fields("key", record.key, args.json))
        fields.update(_data_fields("value", record.value, args.json))
    return fields


def _dump_batch(
    raw: bytes, position: int, args: argparse.Namespace
) -> tuple[dict[str, Any], str | None]:
    """A batch's fields (its records with ``--deep``) and what is wrong with it, if anything."""
    fields = _batch_fields(raw, position)
    problem = None
    if not fields["valid"]:
        problem = f"CRC-32C mismatch in the batch at base offset {fields['base_offset']}"
    try:
        header = record_batch.read_batch_header(raw, base_position=position)
        assert header is not None
        records = record_batch.decode_records(raw, header)
    except MessageFormatError as exc:
        fields["error"] = str(exc)
        return fields, problem or str(exc)
    if args.deep:
        fields["inner"] = [_record_fields(r, args) for r in records]
    return fields, problem


class _Damage(NamedTuple):
    position: int
    problem: str


def _walk(fd: int, file_size: int) -> Iterator[tuple[bytes, int] | _Damage]:
    """Each whole, well-formed entry's bytes and position, then ``_Damage`` if the file does
    not end cleanly. CRCs are not checked here: the caller reports them."""
    pos = 0
    while pos < file_size:
        buf = os.pread(fd, min(_CHUNK, file_size - pos), pos)
        scan = scan_entries(buf, verify_crc=False)
        if not scan.positions and scan.error is None:
            need = entry_size_at(buf, 0)
            if need is None or need > file_size - pos:
                yield _Damage(
                    pos,
                    f"incomplete entry: {file_size - pos} bytes left"
                    + ("" if need is None else f", the entry claims {need}"),
                )
                return
            buf = os.pread(fd, need, pos)
            scan = scan_entries(buf, verify_crc=False)
        for position, size in zip(scan.positions, scan.sizes, strict=True):
            yield buf[position : position + size], pos + position
        pos += scan.end
        if scan.error is not None:
            yield _Damage(pos, scan.error)
            return


def dump_log(path: Path, args: argparse.Namespace, printer: _Printer) -> bool:
    """Dump a ``.log`` file; True when it has no damage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        file_size = os.fstat(fd).st_size
        entries = messages = 0
        damage: tuple[int, str] | None = None
        for item in _walk(fd, file_size):
            if isinstance(item, _Damage):
                damage = damage or item
                continue
            raw, position = item
            if raw[record_batch.MAGIC_AT] == record_batch.MAGIC:
                fields, problem = _dump_batch(raw, position, args)
                entries += 1
                messages += fields["count"]
                damage = damage or (None if problem is None else (position, problem))
                printer.record({"kind": "batch", "file": str(path), **fields})
                continue
            valid = crc32(raw[16:]) == struct.unpack_from(">I", raw, 12)[0]
            (entry,), _ = read_entries(raw, verify_crc=False, base_position=position)
            fields = _message_fields(entry, valid, args)
            entries += 1
            messages += 1
            if not valid and damage is None:
                damage = (position, f"CRC mismatch in the entry at offset {entry.offset}")
            if entry.codec is not Codec.NONE:
                try:
                    inner = open_wrapper(entry, verify_crc=False)
                except MessageFormatError as exc:
                    fields["error"] = str(exc)
                    damage = damage or (position, str(exc))
                else:
                    messages += len(inner) - 1
                    if args.deep:
                        fields["inner"] = [
                            {"kind": "inner", **_message_fields(m, _inner_crc_valid(m), args)}
                            for m in inner
                        ]
            printer.record({"kind": "entry", "file": str(path), **fields})
        summary: dict[str, Any] = {
            "kind": "summary",
            "file": str(path),
            "entries": entries,
            "messages": messages,
            "bytes": file_size,
            "damage_position": None if damage is None else damage[0],
            "damage": None if damage is None else damage[1],
        }
        if printer.as_json:
            printer.record(summary)
        else:
            printer.text(f"entries: {entries} messages: {messages} bytes: {file_size}")
            printer.text(
                "no damage"
                if damage is None
                else f"damage starts at position {damage[0]}: {damage[1]}"
            )
        return damage is None
    finally:
        os.close(fd)


def dump_snapshot(path: Path, printer: _Printer) -> bool:
    """Dump a producer-state ``.snapshot`` file: one line per producer, its last batches
    under it; False when the file is not a sound snapshot."""
    data = path.read_bytes()
    damage = None
    try:
        producers = producer_state.decode_snapshot(data, str(path))
    except producer_state.CorruptSnapshotError as exc:
        producers, damage = {}, str(exc)
    for row in producer_state.describe(producers):
        if printer.as_json:
            printer.record({"kind": "producer", "file": str(path), **row})
        else:
            batches = row.pop("batches")
            assert isinstance(batches, list)
            printer.record({**row, "inner": batches})
    if printer.as_json:
        printer.record({"kind": "summary", "file": str(path), "producers": len(producers),
                        "bytes": len(data), "damage": damage})
    else:
        printer.text(f"producers: {len(producers)} bytes: {len(data)}")
        printer.text("no damage" if damage is None else f"damage: {damage}")
    return damage is None


def dump_index(path: Path, base_offset: int, suffix: str, printer: _Printer) -> bool:
    """Dump an ``.index`` or ``.timeindex`` file, checking it against the ``.log`` beside it."""
    data = path.read_bytes()
    entry = OffsetIndex.ENTRY if suffix == layout.INDEX else TimeIndex.ENTRY
    log_path = path.with_name(f"{base_offset:020d}{layout.LOG}")
    log_data = log_path.read_bytes() if log_path.exists() else None
    whole = len(data) - len(data) % entry.size
    damage: tuple[int, str] | None = None
    if whole != len(data):
        damage = (whole, f"{len(data) - whole} trailing bytes are not a whole index entry")
    previous: tuple[int, int] | None = None
    count = 0
    for i, (first, second) in enumerate(entry.iter_unpack(data[:whole])):
        position = i * entry.size
        fields: dict[str, Any] = {"kind": "index_entry", "file": str(path)}
        if suffix == layout.INDEX:
            offset, log_position = base_offset + first, second
            fields.update(offset=offset, position=log_position)
            key = (offset, log_position)
            problem = _check_offset_entry(log_data, offset, log_position)
        else:
            offset = base_offset + second
            fields.update(timestamp=first, offset=offset)
            key = (first, offset)
            problem = None
        if previous is not None and not (key[0] > previous[0] and key[1] >= previous[1]):
            problem = problem or f"entry does not follow the previous one {previous}"
        if problem is not None:
            fields["error"] = problem
            if damage is None or position < damage[0]:
                damage = (position, problem)
        previous = key
        count += 1
        printer.record(fields)
    if printer.as_json:
        printer.record(
            {
                "kind": "summary",
                "file": str(path),
                "entries": count,
                "bytes": len(data),
                "damage_position": None if damage is None else damage[0],
                "damage": None if damage is None else damage[1],
            }
        )
    else:
        printer.text(f"entries: {count} bytes: {len(data)}")
        printer.text(
            "no damage" if damage is None else f"damage starts at position {damage[0]}: {damage[1]}"
        )
    return damage is None


def _check_offset_entry(log_data: bytes | None, offset: int, position: int) -> str | None:
    if log_data is None:
        return None
    if position + LOG_OVERHEAD > len(log_data):
        return f"position {position} is beyond the log's {len(log_data)} bytes"
    found = struct.unpack_from(">q", log_data, position)[0]
    if found != offset:
        return f"the log has offset {found} at position {position}, not {offset}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="odradek log dump",
        description="Print the entries of log segment (.log) and index (.index, .timeindex) "
        "files and the producers of producer-state snapshots (.snapshot), and where any damage "
        "starts.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    parser.add_argument("--print-data", action="store_true", help="print keys and values")
    parser.add_argument(
        "--deep", action="store_true",
        help="list the inner messages of compressed wrappers and the records of record batches",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args(argv)
    printer = _Printer(sys.stdout, args.json)
    status = 0
    for path in args.paths:
        parsed = layout.parse_segment_name(path.name)
        suffix = parsed[1] if parsed else path.suffix
        printer.text(f"Dumping {path}")
        try:
            if suffix == layout.LOG:
                sound = dump_log(path, args, printer)
            elif suffix in (layout.INDEX, layout.TIME_INDEX) and parsed is not None:
                sound = dump_index(path, parsed[0], suffix, printer)
            elif path.suffix == producer_state.SNAPSHOT_SUFFIX:
                sound = dump_snapshot(path, printer)
            else:
                print(
                    f"odradek log dump: {path}: not a .log, .index, .timeindex or .snapshot "
                    "file named by its base offset",
                    file=sys.stderr,
                )
                return 2
        except BrokenPipeError:  # e.g. piped into head: stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return status
        except OSError as exc:
            print(f"odradek log dump: {path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        if not sound:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
