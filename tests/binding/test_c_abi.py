"""The C ABI works from C alone: programs compiled against only dataset_rt.h and
the shared library write caches and read every record back (also with deferred
payloads), contend for one cache name from two threads, and time the read
pipeline (the benchmark tool, checked here so that it keeps building)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import QUIET, ListSource, compile_c, simple_samples
from dataset_rt import CacheWriteSuccess, DatasetRuntime
from dataset_rt._binding import native as _native

HERE = Path(__file__).resolve().parent.parent  # tests/
HEADER_DIR = HERE.parent / "zig" / "include"


def compile_against_library(source: Path, program: Path) -> None:
    """Compiles a C program against dataset_rt.h and the library under test alone."""
    library = _native.library_path.resolve()
    compile_c(
        source,
        program,
        "-Wextra",
        "-I",
        str(HEADER_DIR),
        str(library),
        f"-Wl,-rpath,{library.parent}",
    )


def test_c_program_writes_and_reads_back_a_cache(tmp_path: Path) -> None:
    program = tmp_path / "abi_round_trip"
    compile_against_library(HERE / "c" / "abi_round_trip.c", program)
    result = subprocess.run(
        [str(program), str(tmp_path / "caches")], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"C round trip failed:\n{result.stdout}\n{result.stderr}"
    assert "read back 1000 samples of c_source, 0 payloads deferred" in result.stdout
    assert "described c_source from its manifest" in result.stdout
    # Sizes are i * 37 % 3000: 648 of the 1000 payloads have at least 1000 bytes.
    assert "read back 1000 samples of c_raw, 648 payloads deferred" in result.stdout
    assert "read 648 payloads of c_raw in place" in result.stdout
    assert "read back 1000 samples of c_columns" in result.stdout
    assert "read back 1000 samples of c_columns_joined" in result.stdout
    # The deprecated names of a share (drt_shard, drt_shard_count,
    # drt_iterator_create_shard) still link and give what the new names give.
    assert "the deprecated share names give what the new names give" in result.stdout
    assert "read two mixed epochs of c_source and c_raw" in result.stdout
    assert (tmp_path / "caches" / "c_source" / "manifest.json").exists()
    # Metadata pushed by column, with the payloads apart or in one buffer, gives
    # the very bytes the JSON push gives.
    for name in ("index.bin", "metadata.arrow", "shards/000000.bin", "shards/000001.bin"):
        raw = (tmp_path / "caches" / "c_raw" / name).read_bytes()
        assert raw == (tmp_path / "caches" / "c_columns" / name).read_bytes(), name
        assert raw == (tmp_path / "caches" / "c_columns_joined" / name).read_bytes(), name
    # `read` reads what is there without writing (scripts/test.sh runs the Windows
    # build that way on these caches).
    reread = subprocess.run(
        [str(program), str(tmp_path / "caches"), "read"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert reread.returncode == 0, f"C re-read failed:\n{reread.stdout}\n{reread.stderr}"
    assert "published" not in reread.stdout
    assert reread.stdout.count("read back 1000 samples of ") == 4


def test_the_pipeline_pace_benchmark_reads_every_planned_sample(
    tmp_path: Path, runtime: DatasetRuntime
) -> None:
    """benchmarks/pipeline_pace.c (docs/benchmarks.md) builds against the header and
    library alone and passes over a cache, ordered and shuffled."""
    program = tmp_path / "pipeline_pace"
    compile_against_library(HERE.parent / "benchmarks" / "pipeline_pace.c", program)
    [result] = runtime.write_cache(
        ListSource("paced", simple_samples(300)), tmp_path, writer_config=QUIET
    )
    assert isinstance(result, CacheWriteSuccess), result
    for shuffle, passes, extra in (("0", "2", []), ("1", "3", ["5", "16"])):
        run = subprocess.run(
            [str(program), str(result.path), shuffle, passes, *extra],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr
        lines = run.stdout.splitlines()
        assert len(lines) == int(passes), run.stdout
        assert all(line.endswith("(300 samples)") for line in lines), run.stdout
    missing = subprocess.run(
        [str(program), str(tmp_path / "absent"), "1", "1"], capture_output=True, text=True
    )
    assert missing.returncode == 1
    assert "absent" in missing.stderr


def test_a_c_fetch_hook_reads_a_remote_cache(tmp_path: Path) -> None:
    """tests/c/remote_fetch.c: a cache opened under a URL through a fetch function
    that copies from a folder reads back every sample; each shard is fetched once,
    a second open reuses the local folder, and a failing fetch fails the read."""
    program = tmp_path / "remote_fetch"
    compile_against_library(HERE / "c" / "remote_fetch.c", program)
    base = tmp_path / "caches"
    result = subprocess.run([str(program), str(base)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"remote fetch test failed:\n{result.stdout}\n{result.stderr}"
    assert "read back 300 samples of https://storage.example/caches/c_remote" in result.stdout
    assert "a second open reused the local folder" in result.stdout
    assert "a remote scrub found no problem" in result.stdout
    assert "an open with revalidate off made no request" in result.stdout
    assert "an open of a pinned version made no request" in result.stdout
    assert "fails the read with its message" in result.stdout
    [folder] = [path for path in (base / "local").iterdir() if path.is_dir()]
    assert len(folder.name) == 33 and folder.name[16] == "-", folder.name
    # Beside it, only the lock file of the URL's manifest fetch and the file naming
    # the folder; beside each shard, its own lock file.
    others = sorted(path.name for path in (base / "local").iterdir() if not path.is_dir())
    url_hex = folder.name[:16]
    assert others == [f"{url_hex}-manifest.json.lock", f"{url_hex}.latest"]
    assert (base / "local" / f"{url_hex}.latest").read_text() == folder.name
    written = sorted(path.name for path in (base / "c_remote" / "shards").iterdir())
    assert sorted(path.name for path in (folder / "shards").iterdir()) == sorted(
        name for shard in written for name in (shard, f"{shard}.lock")
    )
    for name in written:
        fetched = (folder / "shards" / name).read_bytes()
        assert fetched == (base / "c_remote" / "shards" / name).read_bytes(), name


def test_a_second_writer_of_a_name_waits_for_the_first(tmp_path: Path) -> None:
    """tests/c/writer_lock.c: while one writer holds a name, a second one (another
    thread) waits; it is then refused once the first has published, or writes its
    own cache when the first gave up, and neither leaves anything in tmp/."""
    program = tmp_path / "writer_lock"
    compile_against_library(HERE / "c" / "writer_lock.c", program)
    base = tmp_path / "caches"
    result = subprocess.run([str(program), str(base)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"writer lock test failed:\n{result.stdout}\n{result.stderr}"
    published = _native.ERR_ALREADY_EXISTS
    assert f"locked_published: the second writer waited, then ended with status {published}" in (
        result.stdout
    )
    assert "locked_abandoned: the second writer waited, then ended with status 0" in result.stdout
    assert sorted(entry.name for entry in base.iterdir()) == [
        "locked_abandoned",
        "locked_published",
    ]
