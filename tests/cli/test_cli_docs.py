"""Every `dataset-rt` command line of docs/cli.md runs, and exits as the page shows.

The page's ```console blocks are its examples. The first one is the setup the page
describes: the test makes `photos/` and `train.parquet`, runs that block's commands
once, and every other block then runs in a fresh copy of the result, its `$ ` lines
one after another in that folder (a line may be any shell command), with this
package's command as `dataset-rt`. A command must exit 0 unless the block shows
`$ echo $?` right after it, followed by the code it must exit with. Each line of
the shown output that is a message of the command (`dataset-rt: ...`, or a usage
error's `Error: ...`) must be a line the command writes to stderr.

A block that is deliberately not run says so on its first line, `# not run: <reason>`.
Blocks of other languages (the synopses are ```text, the JSON shapes ```json) must
not hold a `$ dataset-rt` line: an example cannot escape by its language.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from cli_helpers import PACKAGE_ROOT
from conftest import pythonpath_before_inherited

PAGE = PACKAGE_ROOT.parent / "docs" / "cli.md"
_FENCE = re.compile(r"^(`{3,})[ \t]*(\S*)[^\n]*$")
_MESSAGE = re.compile(r"^(dataset-rt: |Error: )")
_NOT_RUN = re.compile(r"^#\s*not run:\s*\S")


@dataclass
class Command:
    line: str
    shown: list[str] = field(default_factory=list)  # the output the page shows
    code: int = 0


@dataclass
class Block:
    language: str
    lines: list[str]
    number: int  # the page's line of the block's first line

    @property
    def not_run(self) -> bool:
        return bool(self.lines) and bool(_NOT_RUN.match(self.lines[0]))

    def commands(self) -> list[Command]:
        commands: list[Command] = []
        expect_code = False
        for line in self.lines:
            if line == "$ echo $?":
                assert commands, f"cli.md:{self.number}: echo $? before any command"
                expect_code = True
            elif line.startswith("$ "):
                commands.append(Command(line[2:]))
                expect_code = False
            elif expect_code:
                commands[-1].code = int(line)
                expect_code = False
            elif commands:
                commands[-1].shown.append(line)
        return commands


def page_blocks() -> list[Block]:
    lines = PAGE.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while not lines[end].startswith(opening[1]):
            end += 1
        blocks.append(Block(opening[2], lines[index + 1 : end], index + 2))
        index = end + 1
    return blocks


EXAMPLES = [block for block in page_blocks() if block.language == "console"]
SETUP, *BLOCKS = EXAMPLES


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def make_inputs(folder: Path) -> None:
    """photos/ (images in one folder per class) and train.parquet, as the page says."""
    images = {
        "cat/001.png": png(64, 48, (200, 120, 40)),
        "cat/002.png": png(64, 48, (190, 110, 50)),
        "cat/003.png": png(32, 32, (180, 100, 60)),
        "dog/001.png": png(64, 48, (60, 60, 60)),
        "dog/002.png": png(48, 64, (70, 70, 70)),
    }
    for relative, data in images.items():
        (folder / "photos" / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / "photos" / relative).write_bytes(data)
    rows = 6
    table = pa.table(
        {
            "image": [png(16, 16, (i * 40, 0, 0)) for i in range(rows)],
            "label": [i % 3 for i in range(rows)],
            "taken_at": pa.array(
                [1_700_000_000_000_000 + i for i in range(rows)], pa.timestamp("us")
            ),
        }
    )
    pq.write_table(table, folder / "train.parquet")


def environment(bin_directory: Path) -> dict[str, str]:
    """`dataset-rt` on PATH: this package's command, run by this interpreter."""
    bin_directory.mkdir()
    command = bin_directory / "dataset-rt"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m dataset_rt "$@"\n')
    command.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_directory}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": pythonpath_before_inherited(PACKAGE_ROOT),
    }


def run(block: Block, folder: Path, env: dict[str, str]) -> None:
    for command in block.commands():
        where = f"docs/cli.md:{block.number}: $ {command.line}"
        completed = subprocess.run(
            ["bash", "-c", command.line],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=300,
        )
        assert completed.returncode == command.code, (
            f"{where}: exit {completed.returncode}, the page shows {command.code}\n"
            f"stdout: {completed.stdout}\nstderr: {completed.stderr}"
        )
        written = completed.stderr.splitlines()
        for line in command.shown:
            if _MESSAGE.match(line):
                assert line in written, f"{where}: the page shows {line!r}; stderr: {written}"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The page's starting folder, made once: its inputs, then its setup block run."""
    root = tmp_path_factory.mktemp("cli-docs")
    env = environment(root / "bin")
    folder = root / "setup"
    folder.mkdir()
    make_inputs(folder)
    run(SETUP, folder, env)
    return folder, env


def test_the_setup_block_makes_the_caches_the_examples_use(
    prepared: tuple[Path, dict[str, str]],
) -> None:
    folder, _ = prepared
    assert [command.line.split()[:2] for command in SETUP.commands()] == [
        ["dataset-rt", "demo"],
        ["dataset-rt", "write"],
    ]
    for cache in ("demo", "photos"):
        assert (folder / "caches" / cache / "manifest.json").is_file()


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"line {b.number}")
def test_an_example_runs_as_shown(
    block: Block, prepared: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    if block.not_run:
        pytest.skip(block.lines[0])
    assert block.commands(), f"docs/cli.md:{block.number}: a console block without a command"
    source, env = prepared
    folder = tmp_path / "work"
    shutil.copytree(source, folder)
    run(block, folder, env)


def test_every_command_line_is_in_an_example_that_runs() -> None:
    assert len(BLOCKS) >= 10
    for block in page_blocks():
        if block.language != "console":
            assert not any(line.startswith("$ dataset-rt") for line in block.lines), (
                f"docs/cli.md:{block.number}: a ```{block.language or ' '} block calls "
                "dataset-rt; make it a ```console example"
            )
    not_run = [block.number for block in BLOCKS if block.not_run]
    assert len(not_run) <= 1, f"blocks not run: {not_run}"


def test_the_page_covers_every_command() -> None:
    run_lines = " ".join(c.line for block in EXAMPLES for c in block.commands())
    for command in ("ls", "info", "head", "get", "metadata", "verify", "demo", "bench"):
        assert f"dataset-rt {command} " in run_lines + " ", command
    for command in ("write folder", "write parquet"):
        assert f"dataset-rt {command} " in run_lines, command
    assert "$ echo $?" in PAGE.read_text(encoding="utf-8")  # an error example
