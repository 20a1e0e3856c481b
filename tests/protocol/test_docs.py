"""docs/protocol.md is generated from the code; a stale copy fails here."""

from __future__ import annotations

import re
from pathlib import Path

from coordinator.group_state import GroupState
from protocol.apis import REGISTRY
from protocol.compression import Codec, decompress
from protocol.errors import ErrorCode
from protocol.messageset import Message, decode_messages
from tooling.docs.protocol import DOC_PATH, main, render

REPO_DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_committed_spec_is_up_to_date() -> None:
    assert DOC_PATH == REPO_DOC
    committed = REPO_DOC.read_text(encoding="utf-8") if REPO_DOC.exists() else ""
    assert committed == render(), (
        "docs/protocol.md is out of date: run `python -m tooling.docs.protocol` and commit the "
        "result"
    )


def test_check_flag_reports_a_stale_file(tmp_path: Path) -> None:
    target = tmp_path / "protocol.md"
    assert main(["--check", "--output", str(target)]) == 1  # missing
    target.write_text("stale\n", encoding="utf-8")
    assert main(["--check", "--output", str(target)]) == 1
    assert main(["--output", str(target)]) == 0
    assert main(["--check", "--output", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == render()


def test_every_api_field_and_error_code_is_documented() -> None:
    text = render()
    for api in REGISTRY.values():
        assert f"### {api.name}\n\nAPI key {api.key.value}," in text
        for struct in (api.request, api.response):
            for field in struct.fields:
                assert f"| `{field.name}` | `{field.type.describe()}` |" in text
    for code in ErrorCode:
        assert f"| {int(code)} | {code.name} | {code.info.seed_name} |" in text


def _dumps(text: str) -> list[bytes]:
    """The bytes of each hex dump block in ``text``."""
    return [
        bytes.fromhex("".join(re.sub(r"^[0-9a-f]{4}  ", "", line) for line in dump.splitlines()))
        for dump in re.findall(r"```\n((?:[0-9a-f]{4}  .*\n)+)```", text)
    ]


def test_worked_hex_example_decodes_to_what_the_text_says() -> None:
    text = render()
    section = text[text.index("### Worked example (v1)"):text.index("### Worked example (v0)")]
    (raw,) = _dumps(section)
    assert decode_messages(raw) == ([Message(41, 1_700_000_000_000, 0, b"k1", b"hello")], len(raw))


def test_describe_groups_lists_every_group_state() -> None:
    text = render()
    section = text[text.index("### DescribeGroups"):text.index("### ListGroups")]
    listed = re.findall(r"^\| `(\w+)` \| \w+ \|", section, re.M)
    assert listed == [state.value for state in GroupState]


def test_each_protocol_rule_of_the_api_sections_is_stated() -> None:
    """The rules a client in another language needs, each in its API's section."""
    text = render()

    def section(name: str) -> str:
        start = text.index(f"### {name}\n")
        return text[start : text.index("\n### ", start + 1)]

    assert "UNSUPPORTED_VERSION (35) and the full `apis` list" in section("ApiVersions")
    assert "KIP-74" in section("Fetch") and "`max_bytes` of 0 reads nothing" in section("Fetch")
    join = section("JoinGroup")
    for words in ("rebalance_timeout_ms", "group_initial_rebalance_delay_ms",
                  "connection of their own", "heartbeat_interval_ms"):
        assert words in join
    assert "UNKNOWN_MEMBER_ID for every partition" in section("OffsetCommit")
    assert "may be null (as in Kafka)" in text
    produce = section("Produce")
    for words in ("fields of the top-level entries are ignored", "v1 and v0 entries are both "
                  "accepted", "CORRUPT_MESSAGE (2) when it is empty", "INVALID_TIMESTAMP (32)"):
        assert words in produce


def test_the_compression_examples_decompress_as_the_text_says() -> None:
    text = render()
    snappy = text[text.index("### snappy: the xerial framing"):text.index("### lz4:")]
    lz4 = text[text.index("### lz4:"):text.index("## Finding a group's coordinator")]
    (framed,) = _dumps(snappy)
    assert framed.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert decompress(Codec.SNAPPY, framed) == b"hello hello hello"
    v1, v0 = _dumps(lz4)
    assert v1[4:7] == b"\x60\x40\x82" and v0[4:7] == b"\x60\x40\x1a"  # FLG, BD, HC
    assert decompress(Codec.LZ4, v1, magic=1) == decompress(Codec.LZ4, v0, magic=0) == b"hello"
