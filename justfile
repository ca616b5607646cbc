# Developer commands (`just --list`). Recipes run `python` from PATH, with the project venv
# .venv/ first when it exists (make it as .ci/run does: python3 -m venv .venv &&
# .venv/bin/pip install -e '.[dev,test]').

venv_bin := justfile_directory() / ".venv" / "bin"
export PATH := if path_exists(venv_bin) == "true" { venv_bin + ":" + env("PATH") } else { env("PATH") }
python_paths := "python tests benchmarks scripts examples fuzz setup.py"

# Use the git hooks of scripts/git-hooks (commit-msg: subjects of at most 72 characters) in this clone and all its worktrees
setup:
    git config core.hooksPath scripts/git-hooks

# Rebuild the library (ReleaseFast) into python/dataset_rt/_lib/
build:
    python scripts/build_library.py

# Build a ReleaseSafe library (safety checks, stack traces); prints the path for DATASET_RT_LIBRARY
build-safe:
    python scripts/build_library.py --mode ReleaseSafe --no-strip --dest zig-out/release-safe

# Zig unit tests, then pytest against the ReleaseFast and the ReleaseSafe library (as CI)
test:
    bash scripts/test.sh

# ThreadSanitizer: the Zig unit tests, then the threaded pytest files (or the pytest arguments given) against a TSan build (as CI)
tsan *args:
    bash scripts/test_tsan.sh {{ args }}

# The tidy check (scripts/tidy.py): ruff, mypy strict, zig fmt, function, line and file limits, unused names
tidy *args:
    python scripts/tidy.py {{ args }}

# The tidy check, then the Zig and Python layer rules
lint: tidy
    python scripts/check_layers.py
    python scripts/check_python_layers.py

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

# Fuzz the cache parsers through the C ABI for 10 minutes (atheris, ReleaseSafe); findings in fuzz/findings/
fuzz *args:
    python -c 'import atheris' 2>/dev/null || python -m pip install atheris
    mkdir -p fuzz/corpus fuzz/findings
    DATASET_RT_LIBRARY="$(python scripts/build_library.py --mode ReleaseSafe --no-strip --dest zig-out/release-safe)" \
        python fuzz/cache_files.py fuzz/corpus -max_total_time=600 -timeout=60 -max_len=2048 -len_control=0 \
        -artifact_prefix=fuzz/findings/ --keep-going --findings=fuzz/findings {{ args }}

# Serve the documentation site at http://127.0.0.1:8000 (mkdocs-material; `mkdocs build --strict` is CI's check)
docs *args:
    python -m mkdocs serve {{ args }}

# Run the benchmarks
bench *args:
    python benchmarks/run.py {{ args }}

# Run the end-to-end demo
demo *args:
    python -m dataset_rt.demo {{ args }}
