#!/usr/bin/env bash
# The Windows checks under wine, as CI runs them (scripts/test.sh, phase 6, beside phase 5):
#   1. the Zig unit tests built for x86_64 Windows;
#   2. the Windows build (ReleaseSafe DLL) driven by the C test programs (tests/c/<name>.c,
#      cross-compiled): writing caches and reading them back, the Linux build reading (and
#      hash-checking) those, the Windows build reading the caches the program wrote on
#      Linux, two writers of one name at once (tests/c/writer_lock.c) and a remote cache
#      through a fetch hook (tests/c/remote_fetch.c).
# Uses the `python` first on PATH (with the ziglang package).
#     bash scripts/test_windows.sh WINE LINUX_LIBRARY
# WINE: the wine program (Debian's wine64 package: /usr/lib/wine/wine64); LINUX_LIBRARY:
# the Linux build the round trip's other side runs against.
set -euo pipefail
cd "$(dirname "$0")/.."
wine_program=$1
linux_library=$(realpath "$2")
started=$SECONDS
step() { printf -- '---- [%ss] %s ----\n' "$((SECONDS - started))" "$*"; }

source scripts/c_tests.sh
windows_dir=$(mktemp -d)
trap 'rm -rf "$windows_dir"' EXIT
export WINEPREFIX="$windows_dir/wine" WINEDEBUG=-all
# `zig build -fwine` runs `wine`, which Debian's wine64 package does not provide.
mkdir "$windows_dir/bin"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$wine_program" >"$windows_dir/bin/wine"
chmod +x "$windows_dir/bin/wine"

step "the Zig unit tests for x86_64-windows"
# Through a filter that leaves out std's stack traces of the NOT_IMPLEMENTED that wine 8
# answers to renames and deletes, errors the code handles (~1,800 traces, 90,000 lines);
# any other trace, and each failing test's report, is printed.
PATH="$windows_dir/bin:$PATH" python -m ziglang build test -Dtarget=x86_64-windows -fwine \
    --summary all 2>&1 | python scripts/handled_wine_traces.py

step "the Windows build and the C test programs"
python -m ziglang build -Doptimize=ReleaseSafe -Dtarget=x86_64-windows --prefix "$windows_dir/build"
cp "$windows_dir/build/bin/dataset_rt.dll" "$windows_dir/"
for program in "${c_test_programs[@]}"; do
    python -m ziglang cc -target x86_64-windows-gnu "${c_test_flags[@]}" "tests/c/$program.c" \
        -L "$windows_dir/build/lib" -ldataset_rt -o "$windows_dir/$program.exe"
done
python -m ziglang cc "${c_test_flags[@]}" tests/c/abi_round_trip.c "$linux_library" \
    -Wl,-rpath,"$(dirname "$linux_library")" -o "$windows_dir/abi_round_trip"

step "caches written on Linux read on Windows, and the other way round"
"$windows_dir/abi_round_trip" "$windows_dir/caches" # writes and reads back on Linux
(cd "$windows_dir" && "$wine_program" abi_round_trip.exe caches read)
(cd "$windows_dir" && "$wine_program" abi_round_trip.exe windows_caches) # writes and reads back
"$windows_dir/abi_round_trip" "$windows_dir/windows_caches" read

step "two writers of one name (LockFileEx), and a failed write's cleanup"
(cd "$windows_dir" && "$wine_program" writer_lock.exe lock_caches)

step "a remote cache through a fetch hook: temporary names, checks, renames into place"
(cd "$windows_dir" && "$wine_program" remote_fetch.exe remote_caches)

# wine's server outlives the program by a few seconds; let it save and exit first.
wine_server=$(command -v wineserver || echo "$(dirname "$(readlink -f "$wine_program")")/wineserver64")
if [[ -x "$wine_server" ]]; then
    "$wine_server" -w
fi
step "done"
