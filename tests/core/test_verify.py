"""`dataset_rt.verify`: a scrub of a whole cache that reports every problem."""

from __future__ import annotations

import io
import random
import sys
import threading
import time
from pathlib import Path
from typing import Literal

import cache_reference
import pytest

import conftest
import dataset_rt
from conftest import ListSource, without_record_checksums, written_paths
from dataset_rt import DatasetRuntime, ShardCompression, WriterConfig
from dataset_rt._core import verify as _verify

SAMPLES = [
    (random.Random(i).randbytes(300 + i), {"i": i, "label": f"l{i % 5}"}) for i in range(400)
]


Algo = Literal["none", "lz4"]


def write(runtime: DatasetRuntime, base: Path, algo: Algo = "none") -> Path:
    config = WriterConfig(
        show_progress=False,
        max_shard_bytes=20_000,
        shard_compression=ShardCompression(algo=algo, ratio=1.0),
    )
    [path] = written_paths(
        runtime.write_cache(ListSource("c", SAMPLES), base, writer_config=config)
    )
    assert len(list((path / "shards").iterdir())) >= 6
    return path


def record(cache: Path, sample_id: int) -> tuple[str, int, int]:
    """(shard file relative to the cache, record offset, record length)."""
    shard, offset, record_len = conftest.record(cache, sample_id)
    return shard.relative_to(cache).as_posix(), offset, record_len


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x04
    path.write_bytes(bytes(data))


def scrub(cache: Path) -> dataset_rt.VerifyReport:
    return dataset_rt.verify(cache, num_workers=2, show_progress=False)


@pytest.mark.parametrize("algo", ["none", "lz4"])
def test_a_sound_cache_verifies_clean(runtime: DatasetRuntime, tmp_path: Path, algo: Algo) -> None:
    cache = write(runtime, tmp_path, algo)
    report = scrub(cache)
    assert report.ok and report.problems == [] and report.problems_total == 0, report
    # And one written by dataset-rt 0.2.4 (no record checksums) too.
    without_record_checksums(cache)
    assert scrub(cache).ok


@pytest.mark.parametrize("algo", ["none", "lz4"])
def test_every_damaged_record_and_file_is_reported(
    runtime: DatasetRuntime, tmp_path: Path, algo: Algo
) -> None:
    cache = write(runtime, tmp_path, algo)
    damaged = [10, 11, 200]  # two records of one shard, one of another
    for sample_id in damaged:
        file, offset, record_len = record(cache, sample_id)
        flip(cache / file, offset + record_len - 1)  # the record's last byte
    files = {record(cache, s)[0] for s in damaged}
    # A wrong checksum entry is reported for its record too.
    flip(cache / "records.crc32c", 4 * 300)
    damaged.append(300)
    files.add("records.crc32c")
    report = scrub(cache)
    assert not report.ok
    sha = {p.file for p in report.problems if "SHA-256 does not match" in p.message}
    assert sha == files, report.problems
    by_sample = {p.sample_id: p for p in report.problems if p.sample_id is not None}
    assert sorted(by_sample) == damaged, report.problems
    for sample_id in damaged:
        file, offset, _ = record(cache, sample_id)
        problem = by_sample[sample_id]
        assert (problem.file, problem.offset) == (file, offset), problem
        assert "record checksum mismatch" in problem.message, problem
    assert report.problems_total == len(report.problems) == len(files) + len(damaged)


def test_without_record_checksums_the_record_checks_still_find_damage(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path, "lz4")
    without_record_checksums(cache)
    file, offset, _ = record(cache, 42)
    data = bytearray((cache / file).read_bytes())
    data[offset + data[offset : offset + 300].find(b'"i":42') + 5] = ord("3")  # embedded JSON
    (cache / file).write_bytes(bytes(data))
    file_lz4, offset_lz4, _ = record(cache, 120)
    stored = (cache / file_lz4).read_bytes()
    lz4_length = cache_reference.stored_offset(stored, offset_lz4)
    data = bytearray(stored)
    cache_reference.set_lz4_size(data, lz4_length, cache_reference.lz4_size(stored, lz4_length) + 1)
    (cache / file_lz4).write_bytes(bytes(data))
    report = scrub(cache)
    by_sample = {p.sample_id: p.message for p in report.problems if p.sample_id is not None}
    assert set(by_sample) == {42, 120}, report.problems
    assert "does not match metadata.arrow" in by_sample[42], by_sample
    assert "lz4" in by_sample[120].lower(), by_sample


def test_missing_and_damaged_files_are_each_reported_and_records_are_skipped(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path)
    (cache / "shards" / "000002.bin").unlink()
    shard = cache / "shards" / "000004.bin"
    shard.write_bytes(shard.read_bytes() + b"x")
    flip(cache / "metadata.arrow", 100)
    report = scrub(cache)
    files = [p.file for p in report.problems]
    assert "shards/000002.bin" in files and "metadata.arrow" in files, report.problems
    assert any(
        p.file == "shards/000004.bin" and "bytes, the manifest says" in p.message
        for p in report.problems
    ), report.problems
    assert any(p.message.startswith("records not checked") for p in report.problems)


def test_an_unreadable_manifest_is_the_one_problem(runtime: DatasetRuntime, tmp_path: Path) -> None:
    cache = write(runtime, tmp_path)
    (cache / "manifest.json").write_text("{")
    report = scrub(cache)
    assert [p.file for p in report.problems] == ["manifest.json"], report.problems
    missing = scrub(tmp_path / "nowhere")
    assert not missing.ok and "cannot" in missing.problems[0].message


def test_num_workers_is_checked(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="num_workers must be an int"):
        dataset_rt.verify(tmp_path, num_workers=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_workers must be greater than zero"):
        dataset_rt.verify(tmp_path, num_workers=0)


class TerminalStream(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "log"])
def test_progress_shows_the_share_read_and_the_rate(
    monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    class HalfWay:
        def progress(self) -> tuple[int, int]:
            return 1_000_000, 2_000_000

    stderr = TerminalStream() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    # Into a log a line is written every _LOG_REFRESH_SECONDS: one refresh here.
    monkeypatch.setattr(_verify, "_LOG_REFRESH_SECONDS", _verify._REFRESH_SECONDS)
    done = threading.Event()
    calls: list[tuple[int, int]] = []
    reporter = threading.Thread(
        target=_verify._report_progress,
        args=(HalfWay(), Path("c"), done, True, lambda *counts: calls.append(counts)),
    )
    reporter.start()
    time.sleep(0.7)  # one refresh
    done.set()
    reporter.join()
    err = stderr.getvalue()
    assert "dataset_rt: verifying c: 50% of 2.0 MB" in err and err.endswith("\n"), err
    assert ("\r" in err and "\x1b[K" in err) == terminal, repr(err)
    assert ("\r" in err or "\x1b" in err) == terminal, repr(err)
    # The callback: once per refresh, and once more at the end.
    assert calls == [(1_000_000, 2_000_000)] * 2, calls


def test_on_progress_ends_with_every_byte_checked(tmp_path: Path) -> None:
    path = write(DatasetRuntime(num_workers=2), tmp_path)
    calls: list[tuple[int, int]] = []
    report = dataset_rt.verify(path, show_progress=False, on_progress=lambda *c: calls.append(c))
    assert report.ok
    checked, total = calls[-1]
    payloads = sum(len(data) for data, _ in SAMPLES)
    assert total > payloads and checked == total, calls
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:], strict=False)), calls
