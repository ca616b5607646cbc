"""`dataset-rt demo`: writes, reads back and verifies a cache with its options."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import invoke


def test_demo_runs_with_its_options(tmp_path: Path) -> None:
    result = invoke(
        "demo", "--samples", "300", "--payload-bytes", "64", "--compression", "none",
        "--workers", "2", "--dir", tmp_path, code=0,
    )  # fmt: skip
    assert "writing 300 samples x 64 bytes (0.0 MB, none)" in result.stdout
    assert "read back and verified 300 samples" in result.stdout
    assert (tmp_path / "demo" / "manifest.json").exists()
    invoke("demo", "--samples", "0", code=2)
    invoke("demo", "--compression", "zstd", code=2)
