"""`dataset-rt get`: one raw payload to stdout or a file, its refusals, and no binary
written to a terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli_helpers import PACKAGE_ROOT, SAMPLES, invoke, invoke_json, write
from conftest import flip_last_byte_of_record, pythonpath_before_inherited
from dataset_rt import DatasetRuntime


def test_get_writes_one_raw_payload_to_stdout_or_a_file(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path / "base")
    data, metadata = SAMPLES[3]
    assert invoke("get", cache, "3", code=0).stdout_bytes == data
    out = tmp_path / "payload.bin"
    out.write_bytes(b"old")
    assert invoke("get", cache, "3", "--out", out, code=0).stdout == ""
    assert out.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["payload.bin"]  # no staging
    assert invoke_json("get", cache, "3") == {
        "path": str(cache),
        "sample_id": 3,
        "metadata": metadata,
        "payload_bytes": len(data),
        "out": None,
    }
    assert invoke_json("get", cache, "4", "-o", out)["out"] == str(out)
    assert out.read_bytes() == SAMPLES[4][0]
    assert invoke("get", cache, "5", "--out", "-", code=0).stdout_bytes == SAMPLES[5][0]


def test_get_refusals(runtime: DatasetRuntime, tmp_path: Path) -> None:
    cache = write(runtime, tmp_path / "base")
    result = invoke("get", cache, "40", code=1)
    assert (
        result.stderr
        == f"dataset-rt: {cache} has 40 samples (ids 0 to 39); there is no sample 40\n"
    )
    invoke("get", cache, "-1", code=2)
    invoke("get", cache, "x", code=2)
    assert "does not exist" in invoke("get", cache, "0", "-o", tmp_path / "no" / "f", code=2).stderr
    flip_last_byte_of_record(cache, 2)
    assert "record checksum mismatch" in invoke("get", cache, "2", code=1).stderr


def test_binary_is_not_written_to_a_terminal(runtime: DatasetRuntime, tmp_path: Path) -> None:
    import pty

    cache = write(
        runtime, tmp_path / "base", samples=[(b"\x00\x01binary", {"i": 0}), (b"text\n", {"i": 1})]
    )
    environment = {**os.environ, "PYTHONPATH": pythonpath_before_inherited(PACKAGE_ROOT)}

    def on_a_terminal(*args: str) -> tuple[int, bytes, str]:
        controller, terminal = pty.openpty()
        completed = subprocess.run(
            [sys.executable, "-m", "dataset_rt", *args],
            stdout=terminal,
            stderr=subprocess.PIPE,
            env=environment,
            timeout=120,
        )
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        os.close(controller)
        return completed.returncode, shown, completed.stderr.decode()

    code, shown, stderr = on_a_terminal("get", str(cache), "0")
    assert (code, shown) == (1, b""), stderr
    assert "not writing them to a terminal" in stderr and "--out" in stderr
    code, shown, _ = on_a_terminal("get", str(cache), "0", "--out", "-")
    assert code == 0 and shown.startswith(b"\x00\x01binary")
    code, shown, _ = on_a_terminal("get", str(cache), "1")
    assert code == 0 and shown.replace(b"\r\n", b"\n") == b"text\n"
