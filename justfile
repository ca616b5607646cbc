# Developer commands (`just --list`). Recipes run `python` from PATH, with the project venv
# .venv/ first when it exists (make it as .ci/run does: python3 -m venv .venv &&
# .venv/bin/pip install -e '.[dev]').

venv_bin := justfile_directory() / ".venv" / "bin"
export PATH := if path_exists(venv_bin) == "true" { venv_bin + ":" + env("PATH") } else { env("PATH") }
python_paths := "python tests benchmarks scripts examples setup.py"

# Rebuild the library (ReleaseFast) into python/dataset_rt/_lib/
build:
    python scripts/build_library.py

# Build a ReleaseSafe library (safety checks, stack traces); prints the path for DATASET_RT_LIBRARY
build-safe:
    python scripts/build_library.py --mode ReleaseSafe --no-strip --dest zig-out/release-safe

# Zig unit tests, then pytest against the ReleaseFast and the ReleaseSafe library (as CI)
test:
    bash scripts/test.sh

# Formatting and lint checks for Zig and Python
lint:
    python -m ziglang fmt --check build.zig zig/
    python scripts/check_layers.py
    python -m mypy --strict python/dataset_rt
    python -m ruff check {{ python_paths }}
    python -m ruff format --check {{ python_paths }}

# Lint, then the full test suite
check: lint test

# Format Zig and Python sources in place
fmt:
    python -m ziglang fmt build.zig zig/
    python -m ruff check --fix {{ python_paths }}
    python -m ruff format {{ python_paths }}

# Build the wheel of every platform into dist/ (or the directory given), each checked to hold its own library
wheels *out:
    python scripts/build_wheels.py {{ out }}

# Run the benchmarks
bench *args:
    python benchmarks/run.py {{ args }}

# Run the end-to-end demo
demo *args:
    python -m dataset_rt.demo {{ args }}
