#!/usr/bin/env bash
# The full test suite, as CI runs it. Uses the `python` first on PATH, which must have
# dataset_rt installed with the dev extras (ziglang, pytest, ...).
#   1. the tidy check (scripts/tidy.py: ruff lint and format over all Python, mypy --strict
#      over the package, tests, scripts and benchmarks, `zig fmt --check`, the function, line
#      and file limits, unused declarations), the Zig unit tests, the Zig layer rules
#      (scripts/check_layers.py), the Python layer rules (scripts/check_python_layers.py)
#      and `mkdocs build --strict` of the documentation site
#   2. pytest against the installed ReleaseFast library, then examples/ddp_train.py --quick
#      and examples/digits/train.py --quick
#   3. pytest against a ReleaseSafe build: out-of-bounds and overflow panic there instead of
#      being silent undefined behaviour as in ReleaseFast. It runs in a venv of its own
#      (zig-out/floors-venv) holding the oldest versions of the runtime dependencies that
#      pyproject.toml allows (scripts/dependency_floors.py), so a floor that stops working
#      fails here (tests/torch_integration runs in phase 2 only; dataset_rt.torch uses none
#      of the floored packages); then the Rust and Node.js examples
#      of the C ABI (scripts/test_other_languages.sh) against that build, skipped with a
#      message when rustc, node or npm is missing, except under CI.
#      On Linux, phases 2, 3 and 5 also check that their library asks for no glibc symbol
#      newer than 2.17 (scripts/check_glibc_versions.py): the wheels are manylinux_2_17.
#   4. the wheels (scripts/test_wheels.sh): all five built with scripts/build_wheels.py,
#      which cross-compiles every target (a target that no longer compiles is caught), and
#      checked by scripts/check_wheels.py (tag, only their own library by its file header,
#      no glibc newer than 2.17, package files, Requires-Dist); on Linux x86_64 the
#      manylinux x86_64 wheel installed into a fresh venv (dependencies from its metadata)
#      and, from outside the source tree, its console scripts' --help,
#      scripts/wheel_smoke.py and python -m dataset_rt.demo. About 2 min with a warm Zig
#      cache, 10 min cold.
#   5. under qemu-user, on aarch64: the Zig unit tests (built for musl, static), then the
#      aarch64 wheel's library (glibc 2.17, ReleaseSafe) writing and reading back caches,
#      and two writers of one name, through the C test programs (Debian's
#      libc6-arm64-cross provides the loader and
#      libc), then the pytest files where the target can show (the binding, the stream's
#      check values, the format) with that library, run by an aarch64 CPython
#      (scripts/setup_aarch64_python.sh prepares it in .aarch64-python). The core's code on
#      another CPU: portable SHA-256, atomics, alignment, and the system calls as that
#      build makes them; the ctypes bindings against it. Skipped with a message when
#      qemu-aarch64 (or the aarch64 Python, for pytest) is missing, except under CI
#      (CI=true), where .ci/run installs them and a missing one fails the run.
#   6. under wine (scripts/test_windows.sh, run in the background beside phase 5, both
#      mostly on one CPU; its output is printed after phase 5's): the Zig unit tests built
#      for x86_64 Windows, then the Windows build
#      (ReleaseSafe DLL, driven by tests/c/abi_round_trip.c cross-compiled) writing caches
#      and reading them back, the Linux build reading (and hash-checking) those, and the
#      Windows build reading the caches the C test program wrote on Linux, then two
#      writers of one name at once (tests/c/writer_lock.c). The writer locks with
#      LockFileEx and renames and deletes through kernel32 where std's NT calls are
#      not implemented by wine 8 (zig/base/file_lock.zig, zig/base/directory_entries.zig).
#      Skipped like phase 5 when wine is missing (Debian: wine64).
#   7. ThreadSanitizer (scripts/test_tsan.sh): the Zig unit tests built with TSan, then the
#      pytest files that call the core from several threads, against a TSan build of the
#      library. Linux x86_64 only (the script's setup); elsewhere skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
unset DATASET_RT_LIBRARY  # phase 2 must load the installed library

current_phase="setup"
phase_started=$SECONDS
phase_times=()
# Starts phase "$*": its header shows the seconds since the script began, and the time the
# phase before took goes into the summary printed at the end.
phase() {
    if [[ "$current_phase" != setup ]]; then
        phase_times+=("$(printf '%6ss  %s' "$((SECONDS - phase_started))" "${current_phase%% (*}")")
    fi
    current_phase="$*"
    phase_started=$SECONDS
    printf '\n==== [%ss] %s ====\n' "$SECONDS" "$current_phase"
}
report_failure() {
    local status=$?
    if [[ -n "${windows_job:-}" ]]; then
        kill -- -"$windows_job" 2>/dev/null || true # phase 6's process group
    fi
    if ((status != 0)); then
        printf '\n==== FAILED (exit %s) in: %s ====\n' "$status" "$current_phase" >&2
    fi
}
trap report_failure EXIT

# A tool an emulated phase needs is missing: under CI, where .ci/run provides it, that
# fails the run; elsewhere the part that needs it is skipped. $1: what is missing, $2: how
# to get it.
missing() {
    if [[ "${CI:-}" == "true" ]]; then
        echo "error: $1 not found; .ci/run provides it ($2)" >&2
        exit 1
    fi
    echo "skipped: $1 not found ($2)"
}

# pytest over tests/, with any further arguments ("$@").
run_pytest() {
    local status=0
    python -m pytest tests -q "$@" || status=$?
    if ((status == 5)); then
        echo "error: pytest collected no tests (exit 5)" >&2
    fi
    return "$status"
}

phase "1/7 tidy (ruff, mypy, zig fmt, limits), Zig unit tests (zig build test), layer rules, the docs site"
python scripts/tidy.py
python -m ziglang build test --summary all
python scripts/check_layers.py
python scripts/check_python_layers.py
# The documentation site: broken links, anchors and docstrings fail the build.
NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --quiet --site-dir "$(mktemp -d)"

# The Linux wheels are manylinux_2_17: a library that asks for newer glibc symbols fails.
# Only on glibc hosts, where scripts/build_library.py targets glibc 2.17 (on musl it
# builds for the host).
check_glibc() {
    if [[ "$(uname -s)" == Linux ]] &&
        python -c 'import platform, sys; sys.exit(platform.libc_ver()[0] != "glibc")'; then
        python scripts/check_glibc_versions.py --max 2.17 "$@"
    fi
}

phase "2/7 pytest against the installed ReleaseFast library"
check_glibc "$(python -c 'from dataset_rt._binding import native; print(native.library_path)')"
run_pytest
# The training example, briefly: two gloo ranks with DataLoader workers, stopped and
# resumed, checked against an uninterrupted run.
if python -c 'import torch' 2>/dev/null; then
    python examples/ddp_train.py --quick
else
    missing "torch" "pip install torch==2.13.0"
fi
# The digits example: real images through FolderSource and the DataLoader adapter.
if python -c 'import torch, PIL, sklearn' 2>/dev/null; then
    python examples/digits/train.py --quick
else
    missing "torch, Pillow or scikit-learn" "pip install torch==2.13.0 pillow scikit-learn"
fi

phase "3/7 pytest against a ReleaseSafe library, with the dependency floors"
safe_library=$(python scripts/build_library.py --mode ReleaseSafe --no-strip --dest zig-out/release-safe)
echo "DATASET_RT_LIBRARY=$safe_library"
check_glibc "$safe_library"
# The oldest runtime dependencies pyproject.toml allows, the newest dev and test tools; the
# package itself from the source tree (PYTHONPATH), its library the ReleaseSafe build.
floors_venv=zig-out/floors-venv
floors_requirements=$(mktemp)
python scripts/dependency_floors.py > "$floors_requirements"
python -m venv --clear "$floors_venv"
"$floors_venv/bin/python" -m pip install --quiet -r "$floors_requirements"
rm -f "$floors_requirements"
echo "floors: $("$floors_venv/bin/python" -m pip list --format=freeze 2>/dev/null |
    grep -iE '^(polars|pyarrow|pydantic|typer|rich)==' | tr '\n' ' ')"
# All but tests/torch_integration: the DataLoader and Ray Train runs there (a quarter of the
# suite's time, in worker processes) drive the core through the same calls the other files
# make, and run in phase 2.
DATASET_RT_LIBRARY="$safe_library" PYTHONPATH="$PWD/python" PATH="$PWD/$floors_venv/bin:$PATH" \
    DATASET_RT_DEPENDENCY_FLOORS=1 run_pytest --ignore=tests/torch_integration
# The C ABI from Rust and Node.js (examples/rust, examples/node), against the same build.
bash scripts/test_other_languages.sh "$safe_library"

phase "4/7 the wheels: all five built and checked, the Linux x86_64 one installed in a fresh venv and run"
bash scripts/test_wheels.sh

source scripts/c_tests.sh

# Phases 5 and 6 emulate other targets, each mostly on one CPU: phase 6 (wine) runs in the
# background beside phase 5 (qemu), in a process group of its own, into a log that phase 6
# prints.
wine_program=$(command -v wine64 || command -v wine || true)
if [[ -z "$wine_program" && -x /usr/lib/wine/wine64 ]]; then
    wine_program=/usr/lib/wine/wine64  # where Debian's wine64 package puts it
fi
windows_job=""
if [[ -n "$wine_program" ]]; then
    windows_log=$(mktemp)
    setsid bash scripts/test_windows.sh "$wine_program" "$safe_library" >"$windows_log" 2>&1 &
    windows_job=$!
else
    missing wine "Debian: apt-get install wine64"
fi

phase "5/7 Zig unit tests, the C tests (round trip, two writers) and pytest on aarch64, under qemu-user"
aarch64_libc=/usr/aarch64-linux-gnu
if command -v qemu-aarch64 >/dev/null && [[ -e "$aarch64_libc/lib/ld-linux-aarch64.so.1" ]]; then
    python -m ziglang build test -Dtarget=aarch64-linux-musl -fqemu --summary all
    aarch64_dir=$(mktemp -d)
    python -m ziglang build -Doptimize=ReleaseSafe -Dtarget=aarch64-linux-gnu.2.17 --prefix "$aarch64_dir/build"
    check_glibc "$aarch64_dir/build/lib/libdataset_rt.so"
    for program in "${c_test_programs[@]}"; do
        python -m ziglang cc -target aarch64-linux-gnu.2.17 "${c_test_flags[@]}" "tests/c/$program.c" \
            "$aarch64_dir/build/lib/libdataset_rt.so" -Wl,-rpath,"$aarch64_dir/build/lib" \
            -o "$aarch64_dir/$program"
    done
    qemu-aarch64 -L "$aarch64_libc" "$aarch64_dir/abi_round_trip" "$aarch64_dir/caches"
    qemu-aarch64 -L "$aarch64_libc" "$aarch64_dir/writer_lock" "$aarch64_dir/lock_caches"
    qemu-aarch64 -L "$aarch64_libc" "$aarch64_dir/remote_fetch" "$aarch64_dir/remote_caches"
    # Absolute: tests start it, and hand PYTHONPATH on, from other working directories.
    aarch64_python=$(realpath -m "${DATASET_RT_AARCH64_PYTHON:-.aarch64-python}")
    if [[ -x "$aarch64_python/bin/python3" ]]; then
        # The pytest files where the target can show through the Python layer: the
        # binding (ctypes structures, callbacks, errno and library loading on aarch64),
        # the stream's check values (the same samples in the same order as on x86_64),
        # the byte format both ways and the record checksums. The other files drive the
        # same core through the same binding and run natively in phases 2 and 3; emulated,
        # the whole suite costs about 30 minutes. Deselected from tests/binding: the C test
        # (it compiles with the ziglang package, which this Python lacks; the round trip
        # ran above), and the fork test whose child starts threads (qemu-user 7.2 itself
        # aborts there: "qemu_plugin_vcpu_init_hook: assertion failed"; the other fork
        # test runs).
        DATASET_RT_LIBRARY="$aarch64_dir/build/lib/libdataset_rt.so" \
            PYTHONPATH="$PWD/python:$aarch64_python/site" \
            "$aarch64_python/bin/python3" -m pytest -q -p no:cacheprovider \
            tests/binding \
            tests/core/test_reader_determinism.py tests/core/test_sampler_reference.py \
            tests/core/test_permutation.py tests/core/test_mix_reference.py \
            tests/core/test_mix.py tests/core/test_round_trip.py \
            tests/core/test_record_checksums.py tests/core/test_random_access.py \
            tests/core/test_metadata_table.py tests/interop/test_cache_files.py \
            --deselect tests/binding/test_c_abi.py \
            --deselect tests/binding/test_fork.py::test_a_forked_child_gets_a_clear_error_and_can_start_its_own_runtime
    else
        missing "the aarch64 Python for pytest, $aarch64_python/bin/python3" \
            "as root: bash scripts/setup_aarch64_python.sh"
    fi
    rm -rf "$aarch64_dir"
else
    missing "qemu-aarch64 or $aarch64_libc" "Debian: apt-get install qemu-user libc6-arm64-cross"
fi

phase "6/7 Zig unit tests on Windows, the Windows build writing and reading caches, and two writers, under wine"
if [[ -n "$windows_job" ]]; then
    echo "(run beside phase 5: scripts/test_windows.sh, its output)"
    windows_status=0
    wait "$windows_job" || windows_status=$?
    windows_job=""
    cat "$windows_log"
    rm -f "$windows_log"
    if ((windows_status != 0)); then
        echo "error: scripts/test_windows.sh failed (exit $windows_status)" >&2
        exit "$windows_status"
    fi
fi

phase "7/7 ThreadSanitizer: the Zig unit tests and the threaded pytest files"
if [[ "$(uname -s)" == Linux && "$(uname -m)" == x86_64 ]]; then
    bash scripts/test_tsan.sh
else
    echo "skipped: scripts/test_tsan.sh is set up for Linux x86_64"
fi

phase "all phases passed"
printf '%s\n' "${phase_times[@]}"
