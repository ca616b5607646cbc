#!/usr/bin/env bash
# The wheels as a user gets them (issue 28, part 7). Uses the `python` first on PATH (with
# pip; the dev environment's is fine), and pip's index settings for the fresh venv.
#   1. builds the wheel of every target in build_library.WHEEL_TARGETS with
#      scripts/build_wheels.py (pip wheel, the ziglang package's Zig cross-compiling);
#   2. checks each with scripts/check_wheels.py: its tag, exactly one library and of its
#      own platform (ELF/Mach-O/PE header), no glibc symbol newer than 2.17 (Linux), the
#      package files, Requires-Dist as pyproject.toml declares;
#   3. on Linux x86_64 (glibc), once with the oldest Python the package supports (the
#      `python` on PATH, 3.11) and once with the newest (3.13: `python3.13` on PATH, else
#      pyenv's; missing under CI fails the run): installs the manylinux x86_64 wheel into
#      a fresh venv (its dependencies from its own Requires-Dist, through pip's usual
#      index), and from a
#      directory outside the source tree, with `python -I` (no PYTHONPATH, no cwd on
#      sys.path) and DATASET_RT_LIBRARY unset, runs `pip check`, the console scripts'
#      --help, scripts/wheel_smoke.py (which first checks that dataset_rt and its
#      library are the venv's) and `python -m dataset_rt.demo` (small).
#
#   bash scripts/test_wheels.sh [OUT_DIR]   (keeps the wheels in OUT_DIR; default: a
#                                            temporary directory, removed)
#   bash scripts/test_wheels.sh --no-build DIR   (steps 2 and 3 on the wheels in DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

current_step="setup"
work=$(mktemp -d "${TMPDIR:-/tmp}/dataset_rt-wheels.XXXXXX")
finish() {
    local status=$?
    rm -rf "$work"
    if ((status != 0)); then
        printf '\ntest_wheels.sh: FAILED (exit %s) in: %s, after %ss\n' \
            "$status" "$current_step" "$SECONDS" >&2
    fi
}
trap finish EXIT

timings=()
step_started=$SECONDS
step() {
    if [[ "$current_step" != setup ]]; then
        timings+=("$((SECONDS - step_started))s  $current_step")
    fi
    current_step="$*"
    step_started=$SECONDS
    printf '\n---- [%ss] %s ----\n' "$SECONDS" "$current_step"
}

build=true
if [[ "${1:-}" == --no-build ]]; then
    build=false
    shift
    [[ $# == 1 ]] || { echo "usage: $0 --no-build DIR" >&2; exit 2; }
fi
dist=${1:-$work/dist}
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)

if [[ $build == true ]]; then
    step "build the wheels (scripts/build_wheels.py $dist)"
    python scripts/build_wheels.py "$dist"
fi

step "check the wheels (scripts/check_wheels.py)"
python scripts/check_wheels.py "$dist"

if [[ "$(uname -s)" == Linux && "$(uname -m)" == x86_64 ]] &&
    python -c 'import platform, sys; sys.exit(platform.libc_ver()[0] != "glibc")'; then
    wheels=("$dist"/*-py3-none-manylinux_*_x86_64.whl) # check_wheels.py: exactly one
    wheel=${wheels[0]}
    run_dir=$work/run # outside the source tree: `import dataset_rt` cannot find python/
    mkdir "$run_dir"
    cp scripts/wheel_smoke.py "$run_dir/"
    # In the fresh venv, from $run_dir, isolated (-I), without the library override.
    in_venv() { (cd "$run_dir" && env -u PYTHONPATH -u DATASET_RT_LIBRARY "$@"); }

    # $1: the interpreter that makes the venv; $2: the venv's name.
    install_and_run() {
        local venv=$work/$2
        step "install $(basename "$wheel") into a fresh venv of $("$1" --version)"
        "$1" -m venv "$venv"
        in_venv "$venv/bin/python" -I -m pip install --quiet --no-input "$wheel"
        in_venv "$venv/bin/python" -I -m pip check
        echo "installed: $(in_venv "$venv/bin/python" -I -m pip list --format=freeze | tr '\n' ' ')"
        # Every console script the wheel declares (`dataset-rt`) starts.
        local scripts script
        scripts=$(in_venv "$venv/bin/python" -I -c '
from importlib.metadata import distribution
for entry in distribution("dataset-rt-zig").entry_points.select(group="console_scripts"):
    print(entry.name)')
        [[ -n "$scripts" ]] || { echo "error: the wheel declares no console script" >&2; return 1; }
        for script in $scripts; do
            echo "$script --help"
            in_venv "$venv/bin/$script" --help >/dev/null
        done

        # First, that dataset_rt and its library are the venv's, not the source tree's.
        step "the write/read smoke test (scripts/wheel_smoke.py) from the $2 venv"
        in_venv "$venv/bin/python" -I wheel_smoke.py --not-under "$root"

        step "python -m dataset_rt.demo from the $2 venv"
        in_venv "$venv/bin/python" -I -m dataset_rt.demo --samples 20000 --payload-bytes 512
    }

    # The newest Python the package supports: one that pyenv installed, else python3.13 on
    # PATH; the first that runs (pyenv's python3.13 shim on PATH fails unless 3.13 is active).
    newest_python=""
    for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13 \
        "$(command -v python3.13 || true)"; do
        if [[ -x "$candidate" ]] &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then
            newest_python=$candidate
            break
        fi
    done

    install_and_run python oldest-python
    if [[ -n "$newest_python" ]]; then
        install_and_run "$newest_python" newest-python
    elif [[ "${CI:-}" == "true" ]]; then
        echo "error: no Python 3.13 found (python3.13 on PATH or pyenv's) for the newest-Python check" >&2
        exit 1
    else
        echo "skipped: the wheel on Python 3.13 (no python3.13 on PATH or in pyenv)"
    fi
else
    echo "skipped: installing and running a wheel is set up for Linux x86_64 (glibc)"
fi

step "done"
printf '\ntest_wheels.sh: passed in %ss\n' "$SECONDS"
printf '  %s\n' "${timings[@]}"
