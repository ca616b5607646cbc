"""`python -m dataset_rt.demo`, the README's main job: it writes a cache, reads it
back and must fail loudly when what it reads back is not what it wrote."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from dataset_rt import VerifyReport, demo, verify
from dataset_rt._core.dataset import CachedDataset


def test_the_demo_writes_reads_back_and_verifies_a_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = demo.main(["--samples", "700", "--payload-bytes", "100", "--dir", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "read back and verified 700 samples" in out
    assert "verify (every SHA-256, every record's CRC-32C and metadata) found no problem" in out


def test_the_demo_fails_when_verify_finds_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def verify_after_damage(
        path: Path, *, num_workers: int | None = None, show_progress: bool = True
    ) -> VerifyReport:
        index = path / "index.bin"
        index.write_bytes(index.read_bytes()[:-1] + b"\xff")
        return verify(path, num_workers=num_workers, show_progress=show_progress)

    monkeypatch.setattr(demo, "verify", verify_after_damage)
    code = demo.main(["--samples", "50", "--payload-bytes", "10", "--dir", str(tmp_path)])
    assert code == 1
    assert "verify found" in capsys.readouterr().err


def test_the_demo_fails_when_the_reader_repeats_a_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each repeat equals what was written for its own id: only the order shows it.
    real_iter = CachedDataset.__iter__

    def first_sample_again_and_again(self: CachedDataset) -> Iterator[object]:
        return itertools.repeat(next(real_iter(self)), len(self))

    monkeypatch.setattr(CachedDataset, "__iter__", first_sample_again_and_again)
    assert demo.run(300, 64, "lz4", tmp_path, 2) == 1
    assert "read sample 0/0 at position 1, expected 0/1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "arguments",
    [
        ["--samples", "0"],
        ["--samples", "-3"],
        ["--payload-bytes", "-5"],
        ["--workers", "0"],
        ["--workers", "300"],
    ],
)
def test_the_demo_refuses_arguments_out_of_range(arguments: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        demo.main(arguments)
    assert exited.value.code == 2
