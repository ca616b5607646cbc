/*
 * Two writers of one cache name at once, through the C ABI alone: the second
 * waits for the first's lock while the first writes, and once the first has
 * published, the second is refused with DRT_ERR_ALREADY_EXISTS (SPEC 8,
 * concurrent writers to the same target). Then the same with a first writer
 * that gives up without publishing: the waiter takes the lock and publishes
 * its own cache. No lock file or staging directory is left behind.
 * drt_cache_writer_active says 1 for the name while the first writer holds its
 * lock, and 0 before, after, for another name and for a lock file nobody holds.
 * Usage: writer_lock <base_dir>. Exits 0 when every check holds.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "dataset_rt.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
typedef HANDLE thread_handle;
#else
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
typedef pthread_t thread_handle;
#endif

/* How long the first writer holds the lock while the second must be waiting. */
#define HOLD_MILLISECONDS 300

static void sleep_milliseconds(unsigned milliseconds) {
#ifdef _WIN32
    Sleep(milliseconds);
#else
    struct timespec wait = {.tv_sec = milliseconds / 1000, .tv_nsec = (long)(milliseconds % 1000) * 1000000L};
    nanosleep(&wait, NULL);
#endif
}

/* Both writers': one small uncompressed shard. */
static const drt_writer_options writer_options = {
    .max_shard_bytes = 1 << 20, .batches_in_flight_max = 2, .compression = DRT_COMPRESSION_NONE, .compression_ratio = 1.0};

/* The second writer, on a thread of its own. */
struct contender {
    drt_runtime *runtime;
    const char *base_dir;
    const char *name;
    int publish; /* push a sample and finish if the writer is created */
    int32_t status;
    char message[512];
    atomic_int done;
};

static int32_t write_one_sample(drt_writer *writer) {
    static const uint8_t payload[3] = {1, 2, 3};
    static const uint64_t len = sizeof payload;
    static const char metadata[] = "[{\"index\":1}]";
    int32_t status = drt_writer_push(writer, payload, len, &len, 1, (const uint8_t *)metadata, strlen(metadata));
    return status == DRT_OK ? drt_writer_finish(writer) : status;
}

static void contend(struct contender *contender) {
    drt_writer *writer = NULL;
    int32_t status = drt_writer_create(contender->runtime, contender->base_dir, strlen(contender->base_dir), contender->name,
                                       strlen(contender->name), &writer_options, &writer);
    if (status == DRT_OK && contender->publish) status = write_one_sample(writer);
    if (status != DRT_OK) snprintf(contender->message, sizeof contender->message, "%s", drt_last_error());
    if (writer != NULL) drt_writer_destroy(writer);
    contender->status = status;
    atomic_store(&contender->done, 1);
}

#ifdef _WIN32
static DWORD WINAPI contender_thread(LPVOID argument) {
    contend(argument);
    return 0;
}
static int start_thread(thread_handle *thread, struct contender *contender) {
    *thread = CreateThread(NULL, 0, contender_thread, contender, 0, NULL);
    return *thread != NULL ? 0 : 1;
}
static void join_thread(thread_handle thread) {
    WaitForSingleObject(thread, INFINITE);
    CloseHandle(thread);
}
#else
static void *contender_thread(void *argument) {
    contend(argument);
    return NULL;
}
static int start_thread(thread_handle *thread, struct contender *contender) {
    return pthread_create(thread, NULL, contender_thread, contender);
}
static void join_thread(thread_handle thread) { pthread_join(thread, NULL); }
#endif

/* Whether drt_cache_writer_active says `expected` for `name`; prints why not. */
static int expect_active(const char *base_dir, const char *name, uint32_t expected, const char *when) {
    uint32_t active = 2;
    int32_t status = drt_cache_writer_active(base_dir, strlen(base_dir), name, strlen(name), &active);
    if (status != DRT_OK) {
        fprintf(stderr, "%s: writer_active %s: status %d: %s\n", name, when, status, drt_last_error());
        return 1;
    }
    if (active != expected) {
        fprintf(stderr, "%s: writer_active %s is %u, expected %u\n", name, when, active, expected);
        return 1;
    }
    return 0;
}

/* Removes base_dir/tmp, which only works when it is empty: nothing is left
 * of the writes (staging directories, lock files). The next writer creates it
 * again. */
static int remove_empty_tmp(const char *base_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tmp", base_dir);
#ifdef _WIN32
    if (RemoveDirectoryA(path)) return 0;
#else
    if (rmdir(path) == 0) return 0;
#endif
    fprintf(stderr, "%s is not empty (or cannot be removed): a write left something behind\n", path);
    return 1;
}

/* The first writer of `name` holds the lock while a second one starts; it then
 * publishes (`publish`) or gives up, and the second must end with `expected`. */
static int contend_for(drt_runtime *runtime, const char *base_dir, const char *name, int publish, int32_t expected) {
    if (expect_active(base_dir, name, 0, "before the first writer")) return 1;
    drt_writer *first = NULL;
    if (drt_writer_create(runtime, base_dir, strlen(base_dir), name, strlen(name), &writer_options, &first) != DRT_OK) {
        fprintf(stderr, "%s: first writer_create: %s\n", name, drt_last_error());
        return 1;
    }
    struct contender second = {.runtime = runtime, .base_dir = base_dir, .name = name, .publish = !publish};
    atomic_init(&second.done, 0);
    thread_handle thread;
    if (start_thread(&thread, &second) != 0) {
        drt_writer_destroy(first);
        fprintf(stderr, "%s: cannot start a thread\n", name);
        return 1;
    }
    sleep_milliseconds(HOLD_MILLISECONDS);
    int failed = expect_active(base_dir, name, 1, "while the first writer holds the lock");
    if (expect_active(base_dir, "another_name", 0, "while another name is written")) failed = 1;
    if (atomic_load(&second.done)) {
        fprintf(stderr, "%s: the second writer did not wait for the first (status %d: %s)\n", name, second.status, second.message);
        failed = 1;
    }
    if (publish && write_one_sample(first) != DRT_OK) {
        fprintf(stderr, "%s: the first writer failed: %s\n", name, drt_last_error());
        failed = 1;
    }
    drt_writer_destroy(first); /* gives up the lock, and the write unless it was published */
    join_thread(thread);
    if (second.status != expected) {
        fprintf(stderr, "%s: the second writer ended with status %d (%s), expected %d\n", name, second.status, second.message,
                expected);
        failed = 1;
    }
    if (expect_active(base_dir, name, 0, "after both writers")) failed = 1;
    if (remove_empty_tmp(base_dir)) failed = 1;
    if (!failed) printf("%s: the second writer waited, then ended with status %d\n", name, second.status);
    return failed;
}

/* A lock file nobody holds (a killed writer's) is not active; a bad name is refused. */
static int check_writer_active_refusals(const char *base_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tmp/left_behind.lock", base_dir);
    char tmp_path[4096];
    snprintf(tmp_path, sizeof tmp_path, "%s/tmp", base_dir);
#ifdef _WIN32
    CreateDirectoryA(tmp_path, NULL);
#else
    mkdir(tmp_path, 0777);
#endif
    FILE *left = fopen(path, "wb");
    if (left == NULL) {
        fprintf(stderr, "cannot create %s\n", path);
        return 1;
    }
    fclose(left);
    int failed = expect_active(base_dir, "left_behind", 0, "with a lock file nobody holds");
    remove(path);
    uint32_t active = 2;
    int32_t status = drt_cache_writer_active(base_dir, strlen(base_dir), "a/b", 3, &active);
    if (status != DRT_ERR_INVALID_ARGUMENT || active != 2) {
        fprintf(stderr, "writer_active of 'a/b': status %d, active %u\n", status, active);
        failed = 1;
    }
    if (remove_empty_tmp(base_dir)) failed = 1;
    if (!failed) printf("writer_active: a lock file nobody holds is 0, a bad name is refused\n");
    return failed;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <base_dir>\n", argv[0]);
        return 2;
    }
    drt_runtime *runtime = NULL;
    if (drt_runtime_create(2, &runtime) != DRT_OK) {
        fprintf(stderr, "runtime_create: %s\n", drt_last_error());
        return 1;
    }
    int rc = contend_for(runtime, argv[1], "locked_published", 1, DRT_ERR_ALREADY_EXISTS);
    if (rc == 0) rc = contend_for(runtime, argv[1], "locked_abandoned", 0, DRT_OK);
    if (rc == 0) rc = check_writer_active_refusals(argv[1]);
    drt_runtime_destroy(runtime);
    return rc;
}
