#!/usr/bin/env bash
# The C ABI from other languages: examples/rust/round_trip.rs (plain rustc, `extern "C"`
# declarations, no crates) and examples/node/round_trip.js (koffi from npm) each write a
# cache of six samples and read it back, ordered and shuffled, through the functions of
# zig/include/dataset_rt.h only, and check the payloads, the metadata and the errors.
#
#   bash scripts/test_other_languages.sh [LIBRARY]
#
# LIBRARY: the shared library to test (default: the installed package's,
# dataset_rt._binding.native.library_path, found with the `python` first on PATH). The Rust
# program is compiled into a temporary directory and linked against it; the Node program
# loads it. koffi is installed with `npm ci` into examples/node/node_modules, at the
# version examples/node/package-lock.json pins (npm needs the registry the first time).
# Needs rustc and a C linker (cc), node and npm: Debian's rustc, nodejs and npm packages.
# A missing tool skips its program with a message, except under CI (CI=true), where
# .ci/run installs them and a missing one fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

missing() {
    if [[ "${CI:-}" == "true" ]]; then
        echo "error: $1 not found; .ci/run provides it ($2)" >&2
        exit 1
    fi
    echo "skipped: $1 not found ($2)"
}

library=${1:-$(python -c 'from dataset_rt._binding import native; print(native.library_path)')}
if [[ ! -f "$library" ]]; then
    echo "error: no library at $library" >&2
    exit 1
fi
library=$(realpath "$library")
library_dir=$(dirname "$library")
echo "library: $library"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$SECONDS

# ---- Rust: one rustc call, linked against the library, which the rpath finds at run time.
rustc_program=${RUSTC:-$(command -v rustc || true)}
if [[ -z "$rustc_program" && -x "$HOME/.cargo/bin/rustc" ]]; then
    rustc_program="$HOME/.cargo/bin/rustc"  # where rustup puts it
fi
if [[ -z "$rustc_program" ]]; then
    missing rustc "Debian: apt-get install rustc; or https://rustup.rs"
elif [[ "$(basename "$library")" != libdataset_rt.* ]]; then
    # The program links by name (#[link(name = "dataset_rt")]).
    echo "error: the Rust example links libdataset_rt.*, not $(basename "$library")" >&2
    exit 1
else
    echo "$("$rustc_program" --version) ($rustc_program)"
    "$rustc_program" --edition 2021 -O examples/rust/round_trip.rs -o "$work/round_trip" \
        -L "native=$library_dir" -C "link-arg=-Wl,-rpath,$library_dir"
    "$work/round_trip" "$work/caches"
fi

# ---- Node: koffi loads the library given on the command line.
if ! command -v node >/dev/null; then
    missing node "Debian: apt-get install nodejs npm"
elif ! command -v npm >/dev/null; then
    missing npm "Debian: apt-get install npm"
else
    echo "node $(node --version), npm $(npm --version)"
    wanted=$(node -p 'require("./examples/node/package.json").dependencies.koffi')
    # Installed and loadable (the main package and its platform's binary package)?
    installed=$(cd examples/node &&
        node -p 'try { require("koffi"); require("./node_modules/koffi/package.json").version } catch (e) { "" }')
    if [[ "$installed" != "$wanted" ]]; then
        (cd examples/node && npm ci --no-audit --no-fund)
    fi
    node examples/node/round_trip.js "$work/caches" "$library"
fi

echo "other languages: done in $((SECONDS - started))s"
