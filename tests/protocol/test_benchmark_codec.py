"""The codec benchmark runs and prints one JSON line per case (its figures are not checked)."""

from __future__ import annotations

import json

import pytest

from benchmarks.codec import main


def test_quick_run_prints_a_json_line_per_case(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--quick"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    cases = {(line["case"], line["codec"]) for line in lines if line["bench"] == "codec"}
    assert cases == {(case, codec) for case in ("encode", "decode")
                     for codec in ("none", "gzip", "snappy", "lz4")} | {("decode_no_crc", "none")}
    v2 = {(line["case"], line["codec"]) for line in lines if line["bench"] == "record_batch"}
    assert v2 == {(case, codec) for case in ("encode", "decode")
                  for codec in ("none", "lz4", "zstd")}
    assert all(line["msgs_per_s"] > 0 and line["mb_per_s"] > 0
               for line in lines if line["bench"] in ("codec", "record_batch"))
    (crc,) = [line for line in lines if line["bench"] == "crc32"]
    assert {"crcmod_100B_mb_per_s", "zlib_100B_mb_per_s", "crcmod_1MiB_mb_per_s",
            "zlib_1MiB_mb_per_s", "crc32c_100B_mb_per_s", "crc32c_1MiB_mb_per_s"} <= crc.keys()
