#!/usr/bin/env bash
# The ThreadSanitizer checks, as CI runs them (scripts/test.sh, phase 7; `just tsan`). Uses the
# `python` first on PATH, which must have dataset_rt installed with the dev extras. Set up for
# Linux x86_64.
#   1. `zig build test-tsan`: the Zig unit tests (thread pool, read pipeline, writer, deferred
#      reads, zig/pipeline_test.zig) built with ThreadSanitizer.
#   2. the pytest files whose tests call the core from several threads at once, against the
#      library built with ThreadSanitizer (`zig build tsan-library`). Its TSan runtime must be
#      loaded before anything else (dlopen alone fails: "cannot allocate memory in static TLS
#      block"), so CPython starts with it preloaded (LD_PRELOAD); the child interpreters the
#      tests start inherit that. Arguments replace the default pytest files:
#        bash scripts/test_tsan.sh tests/binding/test_reader_threads.py -k closing
# Reports go to files (pytest captures the output of passing tests and of their children) and
# any of them fails the run; tests/tsan.supp holds the suppressions, each with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# TSan symbolizes its reports with llvm-symbolizer, else addr2line (binutils), started with the
# environment of the process that reports: a wrapper drops LD_PRELOAD (under the TSan runtime
# the symbolizer fails: "Can't read from symbolizer"), and the warnings llvm-symbolizer 14
# prints about Zig's address range tables. TSan picks the protocol by the wrapper's name.
tsan_options="suppressions=$PWD/tests/tsan.supp"
symbolizer=$(command -v llvm-symbolizer || command -v addr2line || true)
if [[ -n "$symbolizer" ]]; then
    wrapper="$work/$(basename "$symbolizer")"
    printf '#!/bin/sh\nunset LD_PRELOAD\nexec "%s" "$@" 2>/dev/null\n' "$symbolizer" >"$wrapper"
    chmod +x "$wrapper"
    tsan_options+=" external_symbolizer_path=$wrapper"
else
    echo "warning: neither llvm-symbolizer nor addr2line is on PATH: reports show addresses only"
fi

echo "zig build test-tsan tsan-library"
TSAN_OPTIONS="$tsan_options" \
    python -m ziglang build test-tsan tsan-library --prefix "$work/build" --summary all
library="$work/build/tsan/libdataset_rt.so"

# The default tests: readers shared by threads, closed under a consumer and interrupted; the
# writer on the pool, two writers of one name, profiles written from threads; payloads the
# pool reads from Python's memory (borrowed) and writes into it (deferred reads), or checks in
# shards it maps and hands to Python (payload="memoryview"); a forked
# child dropping the handles of its parent's pool. Not run:
# - the fork test whose child starts a runtime: TSan does not support threads started in the
#   child of a multi-threaded fork ("starting new threads after multi-threaded fork is not
#   supported. Dying"); the other fork test runs;
# - files using pyarrow, torch or the Rust peer (tests/helpers/peer_driver.py): those libraries are not
#   instrumented, and TSan reports their own reference counts and thread handoffs as races;
# - two writer tests that close thousands of small shards one after another: by far the
#   slowest under TSan, for threads the other writer tests exercise too.
pytest_arguments=("$@")
if ((${#pytest_arguments[@]} == 0)); then
    pytest_arguments=(
        tests/binding/test_reader_threads.py tests/core/test_writer_runtime.py tests/binding/test_deferred_payloads.py
        tests/binding/test_payload_views.py
        tests/binding/test_fork.py::test_a_child_destroying_an_inherited_writer_keeps_the_parents_staging
        --deselect=tests/core/test_writer_runtime.py::test_one_worker_closing_more_shards_at_once_than_the_pool_queue_holds_finishes
        --deselect=tests/core/test_writer_runtime.py::test_many_small_shards_stay_within_a_small_open_file_limit
    )
fi

# detect_deadlocks=0: before each fork (every subprocess), polars' jemalloc takes all of its
# mutexes at once, more than TSan's lock-order checker holds (it fails a CHECK, then hangs);
# the core locks std.Io.Mutex (atomics and futexes), which that checker does not see anyway.
# _RJEM_MALLOC_CONF: polars' jemalloc starts its background thread past TSan's pthread_create
# interceptor, and that thread then crashes in TSan's allocator; without it, jemalloc purges
# from the threads that allocate.
mkdir "$work/reports"
status=0
LD_PRELOAD="$library" DATASET_RT_LIBRARY="$library" _RJEM_MALLOC_CONF=background_thread:false \
    TSAN_OPTIONS="$tsan_options detect_deadlocks=0 log_path=$work/reports/tsan" \
    python -m pytest -q -p no:cacheprovider "${pytest_arguments[@]}" || status=$?
if compgen -G "$work/reports/tsan.*" >/dev/null; then
    cat "$work"/reports/tsan.*
    echo "error: ThreadSanitizer reported the above (a file per process)" >&2
    exit 1
fi
exit "$status"
