"""The documentation's code runs as written.

Every fenced Python block of README.md and docs/*.md runs: each page's blocks in
order, in one namespace, in a scratch working directory, as a reader pasting them
into one session would. The shell blocks of those pages (bash, sh, shell, console)
that call the `dataset-rt` command run too, in their place among the page's Python
blocks and in the same directory (docs/cli.md's are run by tests/cli/test_cli_docs.py).

A block that is deliberately not run says so where a reader sees it, with a reason:
an info string ```` ```python title="not run: <reason>" ```` or a first line
``# not run: <reason>``. Any other block that fails fails the test. Blocks inside
admonitions and tabs are indented; their indentation is removed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import dataset_rt
from conftest import QUIET, pythonpath_before_inherited
from dataset_rt import CacheInput, CacheWriteSuccess, DatasetRuntime, ReaderConfig

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", *sorted(f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md"))]
# docs/cli.md's shell blocks are the command's reference, run by tests/cli/test_cli_docs.py.
SHELL_RUN_ELSEWHERE = {"docs/cli.md"}

# Optional packages a page's Python blocks may import (the test environment has them;
# a run without one, as pytest under qemu, skips the pages that need it).
_OPTIONAL_IMPORTS = {
    "torch": re.compile(r"^\s*(?:from|import)\s+(?:torch|dataset_rt\.torch)\b", re.MULTILINE),
    "datasets": re.compile(r"^\s*(?:from|import)\s+datasets\b", re.MULTILINE),
    "PIL": re.compile(r"^\s*(?:from|import)\s+PIL\b", re.MULTILINE),
}
PYTHON = {"python", "py", "python3"}
SHELL = {"bash", "sh", "shell", "console"}
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_NOT_RUN_TITLE = re.compile(r'title="not run: [^"]*\S[^"]*"')
_NOT_RUN_LINE = re.compile(r"^#\s*not run:\s*\S")
# `dataset-rt` where the shell takes it as a command: at the start of a line (after a
# console prompt), or after `;`, `&&`, `||`, `|`, `(` or `$(`.
_COMMAND = re.compile(r"(?:^|[;&|(]\s*|^\$\s+)dataset-rt(?=\s|$)", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """One fenced code block: its language, info string, code (indentation removed)
    and the line of the page its code starts on."""

    language: str
    info: str
    code: str
    line: int

    @property
    def not_run_reason(self) -> str | None:
        """Why the block is not run, if it is marked so; else None."""
        if _NOT_RUN_TITLE.search(self.info):
            return self.info
        first = self.code.lstrip("\n").split("\n", 1)[0]
        return first if _NOT_RUN_LINE.match(first) else None

    @property
    def calls_the_command(self) -> bool:
        return self.language in SHELL and bool(_COMMAND.search(self.code))


def fenced_blocks(markdown: str) -> list[Block]:
    """The fenced blocks of a Markdown page, indented ones (admonitions, tabs,
    lists) included, in page order."""
    lines = markdown.split("\n")
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        body = lines[index + 1 : end]
        for number, text in enumerate(body, index + 2):
            if text.strip() and not text.startswith(indent):
                raise AssertionError(f"line {number}: less indented than its fence")
        info = opening["info"].strip()
        language = info.split(maxsplit=1)[0].lower() if info else ""
        code = textwrap.dedent("\n".join(text[len(indent) :] for text in body))
        blocks.append(Block(language, info, code + "\n", index + 2))
        index = end + 1
    return blocks


def page_blocks(page: str) -> list[Block]:
    return fenced_blocks((ROOT / page).read_text(encoding="utf-8"))


def _command_bin(directory: Path) -> dict[str, str]:
    """An environment whose `dataset-rt` is this package's command, run by this
    interpreter (the package under test, not whatever is installed)."""
    directory.mkdir()
    command = directory / "dataset-rt"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m dataset_rt "$@"\n')
    command.chmod(0o755)
    environment = dict(os.environ)
    environment["PATH"] = f"{directory}{os.pathsep}{environment.get('PATH', '')}"
    environment["PYTHONPATH"] = pythonpath_before_inherited(
        Path(dataset_rt.__file__).resolve().parent.parent
    )
    return environment


def _shell_script(block: Block) -> str:
    if block.language == "console":  # commands are the lines after a `$ ` prompt
        lines = [line[2:] for line in block.code.split("\n") if line.startswith("$ ")]
        return "\n".join(lines) + "\n"
    return block.code


def runs_here(page: str, block: Block) -> bool:
    """Whether this test runs the block: Python, or a shell block calling the command."""
    if block.not_run_reason is not None:
        return False
    return block.language in PYTHON or (block.calls_the_command and page not in SHELL_RUN_ELSEWHERE)


def run_page(page: str, workdir: Path) -> list[Block]:
    """Runs a page's blocks in order in `workdir`; returns the blocks it ran."""
    namespace: dict[str, object] = {"__name__": "__docs__"}
    environment = _command_bin(workdir / ".docs-bin")
    ran = [block for block in page_blocks(page) if runs_here(page, block)]
    for block in ran:
        where = f"{page}:{block.line}"
        if block.language in PYTHON:
            # Padded with newlines so that tracebacks give the page's line numbers.
            code = compile("\n" * (block.line - 1) + block.code, str(ROOT / page), "exec")
            exec(code, namespace)  # the blocks' own asserts are checks too
        elif block.calls_the_command and page not in SHELL_RUN_ELSEWHERE:
            script = "set -eu\n" + _shell_script(block)
            done = subprocess.run(
                ["bash", "-c", script],
                cwd=workdir,
                env=environment,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, (
                f"{where}: the shell block exited {done.returncode}\n"
                f"{block.code}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
    return ran


@pytest.mark.parametrize("page", PAGES)
def test_every_python_block_and_command_of_a_page_runs_in_order(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = [block for block in page_blocks(page) if runs_here(page, block)]
    if not blocks:
        pytest.skip(f"{page} has no Python block and no dataset-rt shell block")
    code = "".join(block.code for block in blocks if block.language in PYTHON)
    for module, imported in _OPTIONAL_IMPORTS.items():
        if imported.search(code):
            pytest.importorskip(module, reason=f"{page}'s examples import {module}")
    monkeypatch.chdir(tmp_path)
    run_page(page, tmp_path)


def test_the_tutorial_is_run_step_by_step_up_to_the_shell() -> None:
    page = "docs/getting-started.md"
    ran = [block for block in page_blocks(page) if runs_here(page, block)]
    assert len(ran) >= 9, f"expected the tutorial's steps, found {len(ran)} blocks that run"
    assert ran[-1].calls_the_command  # the last step: the cache checked from the shell


def test_the_replacement_figure_training_md_quotes_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/training.md: one epoch of 300 samples with seed 0 visits 181 distinct ones."""
    text = " ".join((ROOT / "docs/training.md").read_text(encoding="utf-8").split())
    assert "a cache of 300 samples and seed 0, 181 distinct samples" in text
    monkeypatch.chdir(tmp_path)

    class Three:
        name = "three-hundred"

        def __iter__(self) -> Iterator[CacheInput]:
            for i in range(300):
                yield CacheInput(data=b"%d" % i, metadata={"i": i})

    with DatasetRuntime(num_workers=2) as runtime:
        [result] = runtime.write_cache(Three(), "caches", writer_config=QUIET)
        assert isinstance(result, CacheWriteSuccess), result
        dataset = runtime.cached_dataset([result.path], reader_config=ReaderConfig(seed=0))
        epoch = [sample.sample_id for sample in dataset]
        assert len(epoch) == 300 and len(set(epoch)) == 181


def test_python_blocks_that_are_not_run_are_marked_with_a_reason() -> None:
    python = [
        (page, block) for page in PAGES for block in page_blocks(page) if block.language in PYTHON
    ]
    marked = [
        f"{page}:{block.line}: {block.not_run_reason}"
        for page, block in python
        if block.not_run_reason is not None
    ]
    # Rare by design: a block that cannot run here (a cluster, a bucket, a download). The
    # pages on clusters and object storage need a few, so the bound is a share, not a count.
    assert len(marked) <= len(python) // 5, f"{len(marked)} of {len(python)}:\n" + "\n".join(marked)


def test_commands_are_in_shell_blocks_so_that_they_run() -> None:
    """A `dataset-rt` command in a block without a shell language would not run."""
    unlabelled = [
        f"{page}:{block.line}"
        for page in PAGES
        if page not in SHELL_RUN_ELSEWHERE
        for block in page_blocks(page)
        if block.language not in SHELL and _COMMAND.search(block.code)
    ]
    assert unlabelled == [], f"label these blocks ```bash: {unlabelled}"


def test_the_block_reader_finds_indented_blocks_and_not_run_marks() -> None:
    page = textwrap.dedent(
        """\
        Text.

        !!! note
            Inside an admonition:

            ```python
            x = 1
            if x:
                y = 2
            ```

        ```python title="not run: needs a GPU cluster"
        raise SystemExit
        ```

        ````bash
        # a comment
        echo ok && dataset-rt info caches/a
        ````

        ```python
        # not run: downloads a dataset
        raise SystemExit
        ```

        ```sh
        pip install dataset-rt
        ```
        """
    )
    blocks = fenced_blocks(page)
    assert [(block.language, block.line) for block in blocks] == [
        ("python", 7),
        ("python", 13),
        ("bash", 17),
        ("python", 22),
        ("sh", 27),
    ]
    assert blocks[0].code == "x = 1\nif x:\n    y = 2\n"
    assert [block.not_run_reason is not None for block in blocks] == [
        False,
        True,
        False,
        True,
        False,
    ]
    assert [block.calls_the_command for block in blocks] == [False, False, True, False, False]


def test_a_failing_block_fails_the_page_with_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```python\nx = 1\n```\n\n```python\nassert x == 2\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError) as raised:
        run_page("page.md", tmp_path)
    frames = [entry for entry in raised.traceback if Path(str(entry.path)) == page]
    assert [entry.lineno + 1 for entry in frames] == [8], raised.traceback


def test_a_failing_command_fails_the_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.md"
    page.write_text("```bash\ndataset-rt info no-such-cache\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(AssertionError, match=r"page.md:2: the shell block exited [1-9]"):
        run_page("page.md", tmp_path)
