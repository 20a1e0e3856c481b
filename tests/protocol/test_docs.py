"""docs/protocol.md is generated from the code; a stale copy fails here."""

from __future__ import annotations

import re
from pathlib import Path

from protocol.apis import REGISTRY
from protocol.docs import DOC_PATH, main, render
from protocol.errors import ErrorCode
from protocol.messageset import Message, decode_messages

REPO_DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_committed_spec_is_up_to_date() -> None:
    assert DOC_PATH == REPO_DOC
    committed = REPO_DOC.read_text(encoding="utf-8") if REPO_DOC.exists() else ""
    assert committed == render(), (
        "docs/protocol.md is out of date: run `python -m protocol.docs` and commit the result"
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


def test_worked_hex_example_decodes_to_what_the_text_says() -> None:
    text = render()
    section = text[text.index("### Worked example (v1)"):text.index("### Worked example (v0)")]
    dump = section[section.index("```\n") + 4 : section.rindex("```")]
    raw = bytes.fromhex("".join(re.sub(r"^[0-9a-f]{4}  ", "", line) for line in dump.splitlines()))
    assert decode_messages(raw) == ([Message(41, 1_700_000_000_000, 0, b"k1", b"hello")], len(raw))
