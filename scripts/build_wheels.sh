#!/usr/bin/env bash
# Builds the wheel of every platform from this one host (README, "Platforms"): the Zig of
# the ziglang package cross-compiles the core for each target, and setup.py tags each wheel
# py3-none-<its platform>. Each wheel is then checked to hold exactly its own library.
#
#   bash scripts/build_wheels.sh [OUT_DIR]      (default: dist/)
#
# Uses `python` from PATH (the project venv first, as the justfile does).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)"

# Zig target -> the one library file its wheel must hold.
declare -A library_of=(
    [x86_64-linux-gnu.2.17]=libdataset_rt.so
    [aarch64-linux-gnu.2.17]=libdataset_rt.so
    [x86_64-macos.11.0]=libdataset_rt.dylib
    [aarch64-macos.11.0]=libdataset_rt.dylib
    [x86_64-windows]=dataset_rt.dll
)
for target in x86_64-linux-gnu.2.17 aarch64-linux-gnu.2.17 x86_64-macos.11.0 aarch64-macos.11.0 x86_64-windows; do
    echo "==== wheel for $target ====" >&2
    # setuptools reuses build/ between runs: another target's library would end up inside.
    rm -rf build
    before=$(mktemp)
    ls "$out" > "$before"
    DATASET_RT_ZIG_TARGET="$target" python -m pip wheel --no-deps --quiet -w "$out" .
    wheel=$(ls "$out" | grep -vxF -f "$before" | grep '\.whl$' || true)
    rm -f "$before"
    if [[ -z "$wheel" ]]; then
        # Rebuilt with the same name as an earlier wheel in OUT_DIR: find it by its tag.
        wheel=$(ls -t "$out" | grep '\.whl$' | head -n 1)
    fi
    python - "$out/$wheel" "${library_of[$target]}" <<'PY'
import sys, zipfile
wheel, expected = sys.argv[1], sys.argv[2]
libraries = [n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("dataset_rt/_lib/")]
if libraries != [f"dataset_rt/_lib/{expected}"]:
    sys.exit(f"{wheel}: holds {libraries}, expected only dataset_rt/_lib/{expected}")
print(f"{wheel}: dataset_rt/_lib/{expected}", file=sys.stderr)
PY
done
rm -rf build
echo "wheels in $out:" >&2
ls -1 "$out"/*.whl
