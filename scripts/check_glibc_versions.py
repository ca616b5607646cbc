"""Fails when a Linux library asks for a glibc symbol version newer than the wheels promise.

The Linux wheels are tagged manylinux_2_17: the library must load with glibc 2.17. Zig
links against the glibc version named in its target (x86_64-linux-gnu.2.17), and this
check reads what the built file actually asks for: the `GLIBC_x.y` entries of its ELF
version needs (`.gnu.version_r`).

Usage: python scripts/check_glibc_versions.py [--max 2.17] LIBRARY...
"""

from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

SHT_GNU_VERNEED = 0x6FFFFFFE


def version_needs(path: Path) -> list[tuple[str, str]]:
    """(needed file, version name) for every version the ELF file asks for."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    (section_offset,) = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, section_offset + index * entry_size)
        for index in range(count)
    ]

    def string(section: tuple[int, ...], offset: int) -> str:
        start = section[4] + offset
        return data[start : data.index(b"\0", start)].decode("ascii")

    needs = []
    for section in sections:
        if section[1] != SHT_GNU_VERNEED:
            continue
        strings = sections[section[6]]  # sh_link: the string table
        entry = section[4]
        for _ in range(section[7]):  # sh_info: the number of entries
            _version, aux_count, file_name, aux, next_entry = struct.unpack_from(
                "<HHIII", data, entry
            )
            aux_entry = entry + aux
            for _ in range(aux_count):
                _hash, _flags, _other, name, next_aux = struct.unpack_from(
                    "<IHHII", data, aux_entry
                )
                needs.append((string(strings, file_name), string(strings, name)))
                aux_entry += next_aux
            entry += next_entry
    return needs


def glibc_version(name: str) -> tuple[int, ...] | None:
    """(2, 17) for "GLIBC_2.17"; None for other version names (GLIBC_PRIVATE, ...)."""
    prefix, _, number = name.partition("_")
    if prefix != "GLIBC" or not number.replace(".", "").isdigit():
        return None
    return tuple(int(part) for part in number.split("."))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", default="2.17", help="newest glibc version allowed")
    parser.add_argument("libraries", nargs="+", type=Path)
    arguments = parser.parse_args()
    newest_allowed = tuple(int(part) for part in arguments.max.split("."))
    failed = False
    for library in arguments.libraries:
        needs = version_needs(library)
        versions = [(glibc_version(name), file, name) for file, name in needs]
        too_new = sorted(
            name for version, _, name in versions if version and version > newest_allowed
        )
        private = sorted(
            name for version, _, name in versions if version is None and name.startswith("GLIBC_")
        )
        newest = max((version for version, _, _ in versions if version), default=None)
        if too_new or private:
            failed = True
            asked = ", ".join(too_new + private)
            print(f"{library}: asks for {asked}; allowed: GLIBC_{arguments.max} and older")
        elif newest is None:
            failed = True
            print(f"{library}: asks for no GLIBC version at all; is it a glibc build?")
        else:
            print(f"{library}: newest glibc version needed GLIBC_{'.'.join(map(str, newest))}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
