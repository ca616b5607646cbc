"""Checks the import directions of the Zig core (docs/architecture.md, "Layers").

Every Zig file lives in one layer folder under zig/, or is one of the files on
top (`TOP`). A file may import files of its own layer and of
lower layers, never of a higher one; `read` and `write` are peers that never
import each other. Prints each violation and exits 1 if there is any.

    python scripts/check_layers.py [ZIG_DIR]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# Lowest first; layers that share a rank are peers and may not import each other.
LAYERS: dict[str, int] = {
    "base": 0,  # operating system, files, threads, diagnostics
    "codec": 1,  # LZ4, SHA-256, FlatBuffers
    "format": 2,  # the bytes on disk: records, index, manifest, metadata JSON, Arrow IPC
    "stream": 3,  # positions to rows: sampler, permutation, shares, states, active table
    "read": 4,  # caches, read pipeline, datasets
    "write": 4,  # the cache writer
    "table": 5,  # the metadata table as users edit it (Arrow in and out)
}
# On top: the exported functions and their extern types, the build root, and the
# end-to-end tests that drive the core through every layer.
TOP = {
    "c_api.zig",
    "c_api_writer.zig",
    "c_api_dataset.zig",
    "c_api_table.zig",
    "c_api_iterator.zig",
    "c_api_codec.zig",
    "c_api_mix.zig",
    "c_api_integrity.zig",
    "c_api_formats.zig",
    "c_api_open_files.zig",
    "c_api_remote.zig",
    "c_api_partitions.zig",
    "c_status.zig",
    "c_types.zig",
    "root.zig",
    "pipeline_test.zig",
}
IMPORT = re.compile(r'@import\("([^"]+\.zig)"\)')


def layer_of(path: Path, zig_dir: Path) -> str | None:
    """The layer of a file under zig_dir, or None for the files on top."""
    relative = path.relative_to(zig_dir)
    if len(relative.parts) == 1:
        return None
    return relative.parts[0]


def violations(zig_dir: Path) -> list[str]:
    found: list[str] = []
    for path in sorted(zig_dir.rglob("*.zig")):
        relative = path.relative_to(zig_dir)
        layer = layer_of(path, zig_dir)
        if layer is None:
            if relative.name not in TOP:
                found.append(f"{relative}: only {sorted(TOP)} sit on top; put it in a layer")
            continue
        if layer not in LAYERS or len(relative.parts) != 2:
            found.append(f"{relative}: not in one of the layer folders {sorted(LAYERS)}")
            continue
        for line_number, line in enumerate(path.read_text().splitlines(), 1):
            for target in IMPORT.findall(line):
                resolved = (path.parent / target).resolve()
                try:
                    target_relative = resolved.relative_to(zig_dir.resolve())
                except ValueError:
                    found.append(f"{relative}:{line_number}: imports {target}, outside zig/")
                    continue
                if len(target_relative.parts) == 1:
                    found.append(f"{relative}:{line_number}: imports {target_relative} (on top)")
                    continue
                target_layer = target_relative.parts[0]
                if target_layer == layer:
                    continue
                if target_layer not in LAYERS or LAYERS[target_layer] >= LAYERS[layer]:
                    found.append(
                        f"{relative}:{line_number}: layer '{layer}' imports {target_relative}"
                        f" of layer '{target_layer}', which is not below it"
                    )
    return found


def main() -> int:
    zig_dir = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "zig"
    )
    problems = violations(zig_dir)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} import(s) against the layer rules (docs/architecture.md)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
