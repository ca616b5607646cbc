/*
 * The read pipeline's own pace: passes over one cache with a consumer in C
 * that only takes and releases each batch, so a pass measures the core's
 * workers and nothing of the Python binding. An optional busy wait per batch
 * stands in for a consumer's work (the binding spends about 90 us on a batch
 * of 64 small samples).
 *
 * usage: pipeline_pace CACHE_DIR SHUFFLE(0|1) PASSES [WAIT_US_PER_BATCH [PREFETCH_SIZE]]
 * prints per pass: seconds, samples/s, and the CPU seconds of the whole process.
 *
 * Build (see docs/benchmarks.md, "Reproducing a profile"):
 *   python -m ziglang cc -O2 -I zig/include benchmarks/pipeline_pace.c \
 *     -L LIBDIR -ldataset_rt -Wl,-rpath,LIBDIR -o pipeline_pace
 */
#define _POSIX_C_SOURCE 200809L
#include "dataset_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

static int fail(const char *what) {
    fprintf(stderr, "pipeline_pace: %s: %s\n", what, drt_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s CACHE_DIR SHUFFLE(0|1) PASSES [WAIT_US_PER_BATCH [PREFETCH_SIZE]]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    const uint64_t path_len = strlen(path);
    const int passes = atoi(argv[3]);
    const double wait = argc > 4 ? atof(argv[4]) * 1e-6 : 0.0;
    const drt_reader_options options = {
        .seed = 0,
        .prefetch_size = argc > 5 ? (uint32_t)atoi(argv[5]) : 64,
        .shuffle = (uint32_t)atoi(argv[2]) != 0,
        .validate_cache = 0,
    };
    drt_runtime *runtime = NULL;
    drt_dataset *dataset = NULL;
    if (drt_runtime_create(2, &runtime) != DRT_OK) return fail("runtime_create");
    if (drt_dataset_open(runtime, &path, &path_len, 1, &options, &dataset) != DRT_OK) {
        drt_runtime_destroy(runtime);
        return fail("dataset_open");
    }
    int status = 0;
    for (int pass = 0; pass < passes && status == 0; pass++) {
        const double started = seconds(CLOCK_MONOTONIC);
        const double cpu_started = seconds(CLOCK_PROCESS_CPUTIME_ID);
        drt_iterator *iterator = NULL;
        if (drt_iterator_create(dataset, &iterator) != DRT_OK) {
            status = fail("iterator_create");
            break;
        }
        uint64_t samples = 0;
        for (;;) {
            drt_batch *batch = NULL;
            if (drt_iterator_next(iterator, &batch) != DRT_OK) {
                status = fail("iterator_next");
                break;
            }
            if (batch == NULL) break;
            samples += batch->count;
            if (wait > 0) {
                const double waited = seconds(CLOCK_MONOTONIC);
                while (seconds(CLOCK_MONOTONIC) - waited < wait) {
                }
            }
            drt_batch_release(batch);
        }
        drt_iterator_destroy(iterator);
        const double elapsed = seconds(CLOCK_MONOTONIC) - started;
        printf("pass %d: %.3f s, %.0f samples/s, process CPU %.3f s (%llu samples)\n", pass + 1, elapsed,
               (double)samples / elapsed, seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu_started,
               (unsigned long long)samples);
    }
    drt_dataset_destroy(dataset);
    drt_runtime_destroy(runtime);
    return status;
}
