"""mkdocs hook for the documentation site (mkdocs.yml): the pages under docs/ also
link to files of the repository outside docs/ (`../zig/include/dataset_rt.h`), which
the site does not hold. Such a link becomes the file's repository path in code font,
and a link to a repository file that does not exist fails the build."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
_LINK = re.compile(r"\[([^\]]+)\]\((\.\./[^)#\s]+)\)")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    source = DOCS / page.file.src_path

    def replace(match: re.Match[str]) -> str:
        target = (source.parent / match.group(2)).resolve()
        if not target.exists():
            raise ValueError(f"{page.file.src_path}: link to a missing file: {match.group(2)}")
        text = match.group(1)
        path = target.relative_to(ROOT).as_posix()
        if text.strip("`") == path:
            return f"`{path}`"
        return f"{text} (`{path}`)"

    return _LINK.sub(replace, markdown)
