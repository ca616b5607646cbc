"""Prints the README's two commands, one per line: the command lines of the first ```bash
block under the heading "## Two commands", without its comments and blank lines.

.ci/run runs exactly these, and tests/project/test_readme_commands.py checks their shape, so the
README's promise and what CI runs cannot drift apart.

    python3 scripts/readme_commands.py README.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HEADING = "## Two commands"
_BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)


def readme_commands(readme: str) -> list[str]:
    """The command lines of the first bash block after the "Two commands" heading."""
    start = readme.find(HEADING)
    if start < 0:
        raise ValueError(f"README has no heading starting {HEADING!r}")
    block = _BASH_BLOCK.search(readme, start)
    if block is None:
        raise ValueError(f"README has no ```bash block after {HEADING!r}")
    lines = (line.strip() for line in block.group(1).splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python3 scripts/readme_commands.py README.md", file=sys.stderr)
        return 2
    for command in readme_commands(Path(argv[1]).read_text(encoding="utf-8")):
        print(command)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
