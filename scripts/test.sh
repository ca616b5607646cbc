#!/usr/bin/env bash
# The full test suite, as CI runs it. Uses the `python` first on PATH, which must have
# dataset_rt installed with the dev extras (ziglang, pytest, ...).
#   1. Zig unit tests
#   2. pytest against the installed ReleaseFast library
#   3. pytest against a ReleaseSafe build: out-of-bounds and overflow panic there instead of
#      being silent undefined behaviour as in ReleaseFast.
#   4. the library cross-compiles for the other wheel targets (a target that no longer
#      compiles is caught; a cold Zig cache takes several minutes).
#   5. the Zig unit tests again, built for aarch64 Linux (musl, static) and run under
#      qemu-user: the core's code on another CPU (portable SHA-256, its atomics and
#      alignment). Skipped with a message when qemu-aarch64 is missing, except under CI
#      (CI=true), where .ci/run installs it and a missing emulator fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
unset DATASET_RT_LIBRARY  # phase 2 must load the installed library

current_phase="setup"
phase() {
    current_phase="$*"
    printf '\n==== %s ====\n' "$current_phase"
}
report_failure() {
    local status=$?
    if ((status != 0)); then
        printf '\n==== FAILED (exit %s) in: %s ====\n' "$status" "$current_phase" >&2
    fi
}
trap report_failure EXIT

run_pytest() {
    local status=0
    python -m pytest tests -q || status=$?
    if ((status == 5)); then
        echo "error: pytest collected no tests (exit 5)" >&2
    fi
    return "$status"
}

phase "1/5 Zig unit tests (zig build test)"
python -m ziglang build test --summary all

phase "2/5 pytest against the installed ReleaseFast library"
run_pytest

phase "3/5 pytest against a ReleaseSafe library"
safe_library=$(python scripts/build_library.py --mode ReleaseSafe --no-strip --dest zig-out/release-safe)
echo "DATASET_RT_LIBRARY=$safe_library"
DATASET_RT_LIBRARY="$safe_library" run_pytest

phase "4/5 cross-compiling for the other wheel targets"
cross_prefix=$(mktemp -d)
for target in aarch64-linux-gnu.2.17 aarch64-macos.11.0 x86_64-macos.11.0 x86_64-windows; do
    echo "zig build -Dtarget=$target"
    python -m ziglang build -Doptimize=ReleaseFast -Dtarget="$target" --prefix "$cross_prefix/$target"
done
rm -rf "$cross_prefix"

phase "5/5 Zig unit tests on aarch64 under qemu-user"
if command -v qemu-aarch64 >/dev/null; then
    python -m ziglang build test -Dtarget=aarch64-linux-musl -fqemu --summary all
elif [[ "${CI:-}" == "true" ]]; then
    echo "error: qemu-aarch64 not found; .ci/run installs it (apt-get install qemu-user)" >&2
    exit 1
else
    echo "skipped: qemu-aarch64 not found (Debian: apt-get install qemu-user)"
fi

phase "all phases passed"
