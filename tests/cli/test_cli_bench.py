"""`dataset-rt bench`: a table of timed write and read passes on a temporary cache."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import invoke, invoke_json


def test_bench_prints_a_table_of_passes(tmp_path: Path) -> None:
    report = invoke_json("bench", "--samples", "500", "--payload-bytes", "256", "--dir", tmp_path)
    assert {k: report[k] for k in ("samples", "payload_bytes", "compression")} == {
        "samples": 500,
        "payload_bytes": 256,
        "compression": "none",
    }
    assert [p["pass"] for p in report["passes"]] == ["write", "read, ordered", "read, shuffled"]
    for row in report["passes"]:
        assert row["samples"] == 500 and row["seconds"] > 0 and row["samples_per_second"] > 0
    assert list(tmp_path.iterdir()) == []  # the temporary cache is gone
    text = invoke("bench", "--samples", "200", "--compression", "lz4", code=0).stdout
    assert "read, shuffled" in text and "samples/s" in text and "lz4" in text
    invoke("bench", "--samples", "0", code=2)
