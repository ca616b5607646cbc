"""The tutorial's code runs as written: docs/getting-started.md's Python blocks,
in order, in one namespace (as a reader pasting them into one session would)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(page: str) -> list[str]:
    return _BLOCK.findall((DOCS / page).read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", ["getting-started.md"])
def test_a_tutorials_blocks_run_in_order(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = python_blocks(page)
    assert len(blocks) >= 5, f"{page}: expected the tutorial's steps, found {len(blocks)} blocks"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__tutorial__"}
    for number, block in enumerate(blocks, 1):
        code = compile(block, f"{page} block {number}", "exec")
        exec(code, namespace)  # the blocks' own asserts are the checks
    # The last step verified the cache and closed the runtime.
    assert namespace["report"].ok  # type: ignore[attr-defined]
