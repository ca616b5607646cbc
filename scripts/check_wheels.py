"""Checks that each built wheel holds what its platform tag promises, and only that.

For every wheel (scripts/build_wheels.py calls `check_wheel` on each one it builds):
- the file name's and the WHEEL file's tag are py3-none-<the target's platform tag>, and
  the wheel is not pure (it installs to platlib);
- it holds exactly one native library, dataset_rt/_lib/<the target's library name>, and no
  other .so/.dylib/.dll/.pyd anywhere;
- that library's file header names the target's OS and CPU: ELF e_machine, Mach-O cpu
  type, PE machine; a shared library, not an executable; for macOS, the minimum macOS
  version of its build-version load command is no newer than the tag's;
- for Linux, it asks for no glibc symbol version newer than the tag's (2.17), as
  scripts/check_glibc_versions.py reads it;
- every file of the source tree's python/dataset_rt/ (but _lib/ and bytecode) is in the
  wheel, and nothing else is;
- the Requires-Dist of its METADATA (but extras') are pyproject.toml's dependencies.
Across the wheels: the package files (but the library) are the same, byte for byte.

    python scripts/check_wheels.py WHEEL_DIR   (exactly one wheel per target of
                                               build_library.WHEEL_TARGETS, nothing else)
"""

from __future__ import annotations

import struct
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

import build_library

PACKAGE = "dataset_rt"
SOURCE_PACKAGE_DIR = build_library.ROOT / "python" / PACKAGE
LIBRARY_SUFFIXES = (".so", ".dylib", ".dll", ".pyd")

# What a target's library header must say: (format, machine code, machine name).
ELF_MACHINES = {"x86_64": (62, "x86-64"), "aarch64": (183, "AArch64")}
MACHO_CPU_TYPES = {"x86_64": (0x01000007, "x86_64"), "aarch64": (0x0100000C, "arm64")}
PE_MACHINES = {"x86_64": (0x8664, "AMD64"), "aarch64": (0xAA64, "ARM64")}

ELF_TYPE_SHARED = 3
MACHO_MAGIC_64 = 0xFEEDFACF
MACHO_TYPE_DYLIB = 6
LC_VERSION_MIN_MACOSX = 0x24
LC_BUILD_VERSION = 0x32
PE_CHARACTERISTIC_DLL = 0x2000


def target_parts(target: str) -> tuple[str, str, tuple[int, ...] | None]:
    """("x86_64", "linux", (2, 17)) for "x86_64-linux-gnu.2.17"; the version may be None."""
    arch, _, rest = target.partition("-")
    os_and_abi, _, version = rest.partition(".")
    os_name = os_and_abi.split("-")[0]
    return arch, os_name, tuple(int(part) for part in version.split(".")) if version else None


def version_text(version: tuple[int, ...]) -> str:
    """ "11.0" for (11, 0, 0), "2.17" for (2, 17)."""
    while len(version) > 2 and version[-1] == 0:
        version = version[:-1]
    return ".".join(map(str, version))


def elf_problems(data: bytes, arch: str) -> tuple[str, list[str]]:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return "not ELF", ["not a 64-bit little-endian ELF file"]
    file_type, machine = struct.unpack_from("<HH", data, 0x10)
    expected, name = ELF_MACHINES[arch]
    problems = []
    if machine != expected:
        problems.append(f"ELF machine {machine}, expected {expected} ({name})")
    if file_type != ELF_TYPE_SHARED:
        problems.append(f"ELF type {file_type}, expected {ELF_TYPE_SHARED} (shared object)")
    return f"ELF {name if machine == expected else machine}", problems


def macho_minimum_version(data: bytes) -> tuple[int, ...] | None:
    """The minimum macOS version the load commands name (LC_BUILD_VERSION, else the old one)."""
    count, _size = struct.unpack_from("<II", data, 16)
    offset = 32  # mach_header_64
    for _ in range(count):
        command, command_size = struct.unpack_from("<II", data, offset)
        if command == LC_BUILD_VERSION:
            (encoded,) = struct.unpack_from("<I", data, offset + 12)  # after platform
        elif command == LC_VERSION_MIN_MACOSX:
            (encoded,) = struct.unpack_from("<I", data, offset + 8)
        else:
            offset += command_size
            continue
        return (encoded >> 16, (encoded >> 8) & 0xFF, encoded & 0xFF)  # xxxx.yy.zz
    return None


def macho_problems(
    data: bytes, arch: str, tag_version: tuple[int, ...] | None
) -> tuple[str, list[str]]:
    (magic,) = struct.unpack_from("<I", data, 0)
    if magic != MACHO_MAGIC_64:
        return "not Mach-O", [f"not a thin 64-bit little-endian Mach-O file (magic {magic:#x})"]
    cpu_type, _subtype, file_type = struct.unpack_from("<iII", data, 4)
    expected, name = MACHO_CPU_TYPES[arch]
    problems = []
    if cpu_type != expected:
        problems.append(f"Mach-O cpu type {cpu_type:#x}, expected {expected:#x} ({name})")
    if file_type != MACHO_TYPE_DYLIB:
        problems.append(f"Mach-O file type {file_type}, expected {MACHO_TYPE_DYLIB} (dylib)")
    minimum = macho_minimum_version(data)
    if minimum is None:
        problems.append("Mach-O file names no minimum macOS version")
    elif tag_version is not None and minimum > tag_version + (0,) * (3 - len(tag_version)):
        problems.append(
            f"needs macOS {version_text(minimum)}, newer than the tag's {version_text(tag_version)}"
        )
    described = f"Mach-O {name if cpu_type == expected else hex(cpu_type)}"
    return described + (f", macOS {version_text(minimum)}+" if minimum else ""), problems


def pe_problems(data: bytes, arch: str) -> tuple[str, list[str]]:
    if data[:2] != b"MZ":
        return "not PE", ["not a PE file (no MZ header)"]
    (header,) = struct.unpack_from("<I", data, 0x3C)
    if data[header : header + 4] != b"PE\0\0":
        return "not PE", ["not a PE file (no PE signature)"]
    machine, _sections, _time, _symbols, _count, _optional, flags = struct.unpack_from(
        "<HHIIIHH", data, header + 4
    )
    expected, name = PE_MACHINES[arch]
    problems = []
    if machine != expected:
        problems.append(f"PE machine {machine:#x}, expected {expected:#x} ({name})")
    if not flags & PE_CHARACTERISTIC_DLL:
        problems.append("PE file is not a DLL")
    return f"PE {name if machine == expected else hex(machine)}", problems


def glibc_problems(library: bytes, tag_version: tuple[int, ...]) -> tuple[str, list[str]]:
    """scripts/check_glibc_versions.py on the library: its one line, and it as a problem."""
    with tempfile.TemporaryDirectory(prefix="dataset_rt-check-wheel-") as directory:
        path = Path(directory, "library.so")
        path.write_bytes(library)
        result = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).with_name("check_glibc_versions.py")),
                "--max",
                version_text(tag_version),
                str(path),
            ],
            capture_output=True,
            text=True,
        )
    said = (result.stdout + result.stderr).strip().replace(f"{path}: ", "")
    if result.returncode != 0:
        return said, [f"glibc: {said}"]
    return said.replace("newest glibc version needed ", "needs "), []


def source_package_files() -> set[str]:
    """The wheel paths of python/dataset_rt/'s files, as the build saw them."""
    files = set()
    for path in SOURCE_PACKAGE_DIR.rglob("*"):
        relative = path.relative_to(SOURCE_PACKAGE_DIR)
        if not path.is_file() or relative.parts[0] == "_lib" or "__pycache__" in relative.parts:
            continue
        if path.suffix in (".pyc", ".pyo"):
            continue
        files.add(f"{PACKAGE}/{relative.as_posix()}")
    return files


def requirement_key(text: str) -> str:
    """A requirement in one spelling (packaging's, where it is installed)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:
        return text.replace(" ", "").lower()
    return str(Requirement(text)).lower()


def metadata_problems(archive: zipfile.ZipFile, dist_info: str) -> list[str]:
    metadata = HeaderParser().parsestr(archive.read(f"{dist_info}/METADATA").decode())
    required = {
        requirement_key(text)
        for text in metadata.get_all("Requires-Dist") or []
        if "extra" not in text.partition(";")[2]  # the dev extras' are not installed
    }
    pyproject = tomllib.loads((build_library.ROOT / "pyproject.toml").read_text())
    declared = {requirement_key(text) for text in pyproject["project"].get("dependencies", [])}
    if required != declared:
        return [f"METADATA requires {sorted(required)}, pyproject.toml declares {sorted(declared)}"]
    return []


def package_contents(wheel: Path) -> dict[str, tuple[int, int]]:
    """(CRC-32, size) of each file of the wheel but its library and .dist-info."""
    with zipfile.ZipFile(wheel) as archive:
        return {
            info.filename: (info.CRC, info.file_size)
            for info in archive.infolist()
            if info.filename.startswith(f"{PACKAGE}/")
            and not info.filename.startswith(f"{PACKAGE}/_lib/")
        }


def check_wheel(wheel: Path, target: str) -> tuple[str, list[str]]:
    """(a one-line summary, every problem found) for the wheel built for Zig target `target`."""
    arch, os_name, version = target_parts(target)
    tag = f"py3-none-{build_library.wheel_platform_tag(target)}"
    library_path = f"{PACKAGE}/_lib/{build_library.library_name(target)}"
    problems = []

    name_parts = wheel.name.removesuffix(".whl").split("-")
    if len(name_parts) != 5 or "-".join(name_parts[2:]) != tag:
        problems.append(f"file name tag {'-'.join(name_parts[2:])}, expected {tag}")

    with zipfile.ZipFile(wheel) as archive:
        names = [name for name in archive.namelist() if not name.endswith("/")]
        dist_infos = {name.split("/")[0] for name in names if ".dist-info/" in name}
        if len(dist_infos) != 1:
            return "", [f"expected one .dist-info directory, found {sorted(dist_infos)}"]
        [dist_info] = dist_infos
        wheel_file = HeaderParser().parsestr(archive.read(f"{dist_info}/WHEEL").decode())
        if wheel_file.get_all("Tag") != [tag]:
            problems.append(f"WHEEL tags {wheel_file.get_all('Tag')}, expected [{tag!r}]")
        if wheel_file.get("Root-Is-Purelib", "").strip().lower() != "false":
            problems.append("WHEEL says Root-Is-Purelib: true; the library needs platlib")
        problems += metadata_problems(archive, dist_info)

        libraries = sorted(
            name
            for name in names
            if name.startswith(f"{PACKAGE}/_lib/")
            or PurePosixPath(name).suffix in LIBRARY_SUFFIXES
            or ".so." in PurePosixPath(name).name
        )
        if libraries != [library_path]:
            problems.append(f"native libraries {libraries}, expected only [{library_path!r}]")
        library = archive.read(library_path) if library_path in names else None

        package_files = {name for name in names if not name.startswith(f"{dist_info}/")}
        package_files.discard(library_path)
        expected_files = source_package_files()
        if missing := sorted(expected_files - package_files):
            problems.append(f"missing from the wheel (package-data?): {missing}")
        if extra := sorted(package_files - expected_files - set(libraries)):
            problems.append(f"files the source package lacks: {extra}")

    described = "no library"
    if library is not None:
        if os_name == "linux":
            described, header_problems = elf_problems(library, arch)
            if not header_problems and version is not None:
                glibc, glibc_problem = glibc_problems(library, version)
                described += f", {glibc}"
                header_problems += glibc_problem
        elif os_name == "macos":
            described, header_problems = macho_problems(library, arch, version)
        elif os_name == "windows":
            described, header_problems = pe_problems(library, arch)
        else:
            header_problems = [f"no header check for the OS of {target}"]
        problems += [f"{library_path}: {problem}" for problem in header_problems]
        described = f"{PurePosixPath(library_path).name} ({described}, {len(library):,} bytes)"
    summary = f"{described}, {len(package_files)} package files"
    return summary, problems


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[-1].strip())
    directory = Path(sys.argv[1])
    wheels = sorted(directory.glob("*.whl"))
    failed = False
    claimed: set[Path] = set()
    for target in build_library.WHEEL_TARGETS:
        tag = build_library.wheel_platform_tag(target)
        matching = [wheel for wheel in wheels if wheel.name.endswith(f"-{tag}.whl")]
        claimed.update(matching)
        if len(matching) != 1:
            failed = True
            print(f"FAIL {target}: expected one *-{tag}.whl in {directory}, found {matching}")
            continue
        [wheel] = matching
        summary, problems = check_wheel(wheel, target)
        failed = failed or bool(problems)
        print(f"{'FAIL' if problems else 'ok  '} {wheel.name}: {summary}")
        for problem in problems:
            print(f"       {problem}")
    if others := sorted(wheel.name for wheel in set(wheels) - claimed):
        failed = True
        print(f"FAIL wheels for no target of build_library.WHEEL_TARGETS: {others}")
    contents = {wheel.name: package_contents(wheel) for wheel in sorted(claimed)}
    if len({tuple(sorted(files.items())) for files in contents.values()}) > 1:
        failed = True
        first_name, first = next(iter(contents.items()))
        print("FAIL the wheels' package files differ (the source changed during the build?):")
        for name, files in contents.items():
            differ = sorted(f for f in first.keys() | files.keys() if first.get(f) != files.get(f))
            if differ:
                print(f"       {name} and {first_name}: {differ}")
    elif contents:
        print(f"ok   the {len(contents)} wheels hold the same package files, byte for byte")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
