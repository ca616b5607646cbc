/*
 * A remote cache read through a fetch hook, with the C ABI alone: the program
 * writes a cache of several shards with the writer, then opens it under a URL
 * through a fetch function that copies files from that cache's folder (standing
 * for object storage), reads every sample back and checks it, and checks the
 * hook's counts: the small files fetched at open, each shard once on first read.
 * A second open reuses the local folder (only manifest.json is fetched again); a
 * URL without a hook is refused; a failing fetch function fails the read with its
 * message; a scrub through the hook (drt_verify_create_remote) finds no problem;
 * with revalidate off (drt_remote_set_revalidate), an open makes no request; nor
 * does one with it on of a version pinned (drt_remote_pin_version).
 * Usage: remote_fetch <base_dir>. Exits 0 when every check holds.
 */
#include "dataset_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLES 300
#define CACHE_NAME "c_remote"
#define URL "https://storage.example/caches/" CACHE_NAME

/* The fetch function's context: the folder it copies from, and whether it fails. */
struct source {
    char dir[4096];
    int fail_shards;
};

static uint64_t payload_len(uint64_t i) { return 1 + (i * 37) % 700; }
static uint8_t payload_byte(uint64_t i, uint64_t k) { return (uint8_t)(i * 7 + k); }

static int32_t copy_fetch(void *context, const char *url, uint64_t url_len, const char *name, uint64_t name_len,
                          const char *dest_path, uint64_t dest_path_len, char *message, uint64_t message_cap) {
    struct source *source = context;
    (void)dest_path_len;
    if (url_len != strlen(URL) || memcmp(url, URL, url_len) != 0) {
        snprintf(message, message_cap, "unexpected URL %s", url);
        return DRT_FETCH_FAILED;
    }
    if (source->fail_shards && name_len > 7 && memcmp(name, "shards/", 7) == 0) {
        snprintf(message, message_cap, "the test refuses %s", name);
        return DRT_FETCH_FAILED;
    }
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", source->dir, name);
    FILE *in = fopen(path, "rb");
    if (in == NULL) return DRT_FETCH_NOT_FOUND;
    FILE *out = fopen(dest_path, "wb");
    if (out == NULL) {
        fclose(in);
        snprintf(message, message_cap, "cannot create %s", dest_path);
        return DRT_FETCH_FAILED;
    }
    char buffer[65536];
    size_t read;
    int failed = 0;
    while ((read = fread(buffer, 1, sizeof buffer, in)) > 0) {
        if (fwrite(buffer, 1, read, out) != read) failed = 1;
    }
    if (ferror(in)) failed = 1;
    fclose(in);
    if (fclose(out) != 0) failed = 1;
    if (failed) {
        snprintf(message, message_cap, "cannot copy %s", name);
        return DRT_FETCH_FAILED;
    }
    return DRT_FETCH_OK;
}

static int write_cache(drt_runtime *runtime, const char *base_dir) {
    const drt_writer_options options = {
        .max_shard_bytes = 16384, .batches_in_flight_max = 4, .compression = DRT_COMPRESSION_NONE, .compression_ratio = 1.0};
    drt_writer *writer = NULL;
    if (drt_writer_create(runtime, base_dir, strlen(base_dir), CACHE_NAME, strlen(CACHE_NAME), &options, &writer) != DRT_OK) {
        fprintf(stderr, "writer_create: %s\n", drt_last_error());
        return 1;
    }
    static uint8_t payload[1024];
    int32_t status = DRT_OK;
    for (uint64_t i = 0; i < SAMPLES && status == DRT_OK; i++) {
        uint64_t len = payload_len(i);
        for (uint64_t k = 0; k < len; k++) payload[k] = payload_byte(i, k);
        char metadata[64];
        int metadata_len = snprintf(metadata, sizeof metadata, "[{\"index\":%llu}]", (unsigned long long)i);
        status = drt_writer_push(writer, payload, len, &len, 1, (const uint8_t *)metadata, (uint64_t)metadata_len);
    }
    if (status == DRT_OK) status = drt_writer_finish(writer);
    if (status != DRT_OK) fprintf(stderr, "write: %s\n", drt_last_error());
    drt_writer_destroy(writer);
    return status != DRT_OK;
}

/* Opens URL through `remote` into *dataset (in order, seed 1); 1 on failure, said. */
static int open_url(drt_runtime *runtime, drt_remote *remote, drt_dataset **dataset) {
    const char *paths[1] = {URL};
    const uint64_t path_lens[1] = {strlen(URL)};
    const drt_reader_options options = {.seed = 1, .prefetch_size = 16, .shuffle = 0, .validate_cache = 0};
    *dataset = NULL;
    if (drt_dataset_open_remote(runtime, paths, path_lens, 1, &options, remote, dataset) != DRT_OK) {
        fprintf(stderr, "dataset_open_remote: %s\n", drt_last_error());
        return 1;
    }
    return 0;
}

/* Opens URL through `remote` and reads every sample, checking each. */
static int read_all(drt_runtime *runtime, drt_remote *remote, int32_t *read_status) {
    drt_dataset *dataset = NULL;
    if (open_url(runtime, remote, &dataset)) return 1;
    drt_iterator *iterator = NULL;
    int failed = drt_iterator_create(dataset, &iterator) != DRT_OK;
    uint64_t seen = 0;
    *read_status = DRT_OK;
    while (!failed) {
        drt_batch *batch = NULL;
        *read_status = drt_iterator_next(iterator, &batch);
        if (*read_status != DRT_OK || batch == NULL) break;
        for (uint64_t s = 0; s < batch->count; s++) {
            uint64_t i = batch->sample_ids[s];
            uint64_t len = batch->payload_offsets[s + 1] - batch->payload_offsets[s];
            const uint8_t *bytes = batch->payloads + batch->payload_offsets[s];
            int bad = i != seen || len != payload_len(i);
            for (uint64_t k = 0; !bad && k < len; k++) bad = bytes[k] != payload_byte(i, k);
            if (bad) {
                fprintf(stderr, "sample %llu (position %llu) differs from what was written\n", (unsigned long long)i,
                        (unsigned long long)seen);
                failed = 1;
            }
            seen++;
        }
        drt_batch_release(batch);
    }
    if (!failed && *read_status == DRT_OK && seen != SAMPLES) {
        fprintf(stderr, "read %llu samples, expected %d\n", (unsigned long long)seen, SAMPLES);
        failed = 1;
    }
    if (iterator != NULL) drt_iterator_destroy(iterator);
    drt_dataset_destroy(dataset);
    return failed;
}

/* Pins the version of URL that `remote` holds (opened without a request: revalidate
 * is off; described from its manifest), then turns revalidate on; an empty URL is
 * refused. */
static int pin_held_version(drt_runtime *runtime, drt_remote *remote) {
    drt_dataset *dataset = NULL;
    if (open_url(runtime, remote, &dataset)) return 1;
    uint8_t digest[32];
    int failed = drt_dataset_cache_sha256s(dataset, digest, 1) != DRT_OK;
    /* The version opened describes itself without a request (the caller's counts). */
    drt_buffer *info = NULL;
    if (!failed && drt_dataset_cache_info(dataset, 0, &info) != DRT_OK) {
        fprintf(stderr, "dataset_cache_info: %s\n", drt_last_error());
        failed = 1;
    }
    if (!failed) {
        char text[4096];
        snprintf(text, sizeof text, "%.*s", (int)info->len, (const char *)info->data);
        drt_buffer_release(info);
        const char *expected = "\"source_name\":\"" CACHE_NAME "\",\"sample_count\":300,";
        if (strstr(text, expected) == NULL) {
            fprintf(stderr, "dataset_cache_info lacks %s: %s\n", expected, text);
            failed = 1;
        }
    }
    drt_dataset_destroy(dataset);
    if (!failed && drt_remote_pin_version(remote, URL, 0, digest) != DRT_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, "pin_version of an empty URL was not refused\n");
        failed = 1;
    }
    if (!failed && drt_remote_pin_version(remote, URL, strlen(URL), digest) != DRT_OK) {
        fprintf(stderr, "pin_version: %s\n", drt_last_error());
        failed = 1;
    }
    if (!failed && drt_remote_set_revalidate(remote, 1) != DRT_OK) failed = 1;
    return failed;
}

static int expect_stats(drt_remote *remote, uint64_t files, uint64_t shards, const char *when) {
    drt_remote_stats stats;
    if (drt_remote_stats_get(remote, &stats) != DRT_OK) {
        fprintf(stderr, "remote_stats_get: %s\n", drt_last_error());
        return 1;
    }
    if (stats.fetched_files != files || stats.shards_fetched != shards || stats.refetches != 0) {
        fprintf(stderr, "%s: fetched %llu files, %llu shards, %llu refetches; expected %llu, %llu, 0\n", when,
                (unsigned long long)stats.fetched_files, (unsigned long long)stats.shards_fetched,
                (unsigned long long)stats.refetches, (unsigned long long)files, (unsigned long long)shards);
        return 1;
    }
    return 0;
}

/* The number of shards the written cache has: shards/000000.bin, ... that exist. */
static uint64_t count_shards(const char *cache_dir) {
    uint64_t count = 0;
    for (;;) {
        char path[8192];
        snprintf(path, sizeof path, "%s/shards/%06llu.bin", cache_dir, (unsigned long long)count);
        FILE *file = fopen(path, "rb");
        if (file == NULL) return count;
        fclose(file);
        count++;
    }
}

static int run(drt_runtime *runtime, const char *base_dir) {
    if (write_cache(runtime, base_dir)) return 1;
    static struct source source;
    snprintf(source.dir, sizeof source.dir, "%s/%s", base_dir, CACHE_NAME);
    uint64_t shards = count_shards(source.dir);
    if (shards < 3) {
        fprintf(stderr, "the written cache has %llu shards, expected several\n", (unsigned long long)shards);
        return 1;
    }
    char local_dir[4096];
    snprintf(local_dir, sizeof local_dir, "%s/local", base_dir);
    drt_remote *remote = NULL;
    if (drt_remote_create(copy_fetch, &source, local_dir, strlen(local_dir), &remote) != DRT_OK) {
        fprintf(stderr, "remote_create: %s\n", drt_last_error());
        return 1;
    }
    int32_t status;
    /* manifest.json, index.bin, metadata.arrow, records.crc32c; then every shard once. */
    int failed = read_all(runtime, remote, &status) || status != DRT_OK || expect_stats(remote, 4 + shards, shards, "first read");
    if (!failed) printf("read back %d samples of %s through the fetch hook, %llu shards fetched\n", SAMPLES, URL,
                        (unsigned long long)shards);
    /* The folder is reused: only manifest.json is fetched again. */
    if (!failed) failed = read_all(runtime, remote, &status) || status != DRT_OK || expect_stats(remote, 5 + shards, shards, "reuse");
    if (!failed) printf("a second open reused the local folder\n");
    /* A scrub through the hook: every file already in the folder, nothing wrong. */
    drt_verifier *verifier = NULL;
    if (!failed && drt_verify_create_remote(runtime, URL, strlen(URL), remote, &verifier) != DRT_OK) failed = 1;
    if (!failed) {
        uint64_t kept = 1, total = 1;
        if (drt_verify_run(verifier) != DRT_OK || drt_verify_problem_count(verifier, &kept, &total) != DRT_OK || total != 0) {
            fprintf(stderr, "verify_remote: %llu problems: %s\n", (unsigned long long)total, drt_last_error());
            failed = 1;
        }
        drt_verify_destroy(verifier);
    }
    if (!failed) failed = expect_stats(remote, 6 + shards, shards, "verify");
    if (!failed) printf("a remote scrub found no problem\n");
    /* With revalidate off, the version held opens without a request; 2 is refused. */
    if (!failed && drt_remote_set_revalidate(remote, 2) != DRT_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, "set_revalidate(2) was not refused\n");
        failed = 1;
    }
    if (!failed && drt_remote_set_revalidate(remote, 0) != DRT_OK) failed = 1;
    if (!failed) failed = read_all(runtime, remote, &status) || status != DRT_OK || expect_stats(remote, 6 + shards, shards, "held");
    if (!failed) printf("an open with revalidate off made no request\n");
    /* With revalidate on, a pinned version held opens without a request. */
    if (!failed) failed = pin_held_version(runtime, remote);
    if (!failed) failed = read_all(runtime, remote, &status) || status != DRT_OK || expect_stats(remote, 6 + shards, shards, "pinned");
    if (!failed) printf("an open of a pinned version made no request\n");
    /* A URL without a hook is refused, naming it. */
    const char *paths[1] = {URL};
    const uint64_t path_lens[1] = {strlen(URL)};
    const drt_reader_options options = {.seed = 1, .prefetch_size = 16};
    drt_dataset *dataset = NULL;
    status = drt_dataset_open_remote(runtime, paths, path_lens, 1, &options, NULL, &dataset);
    if (status != DRT_ERR_INVALID_ARGUMENT || strstr(drt_last_error(), URL) == NULL) {
        fprintf(stderr, "open without a hook: status %d: %s\n", status, drt_last_error());
        failed = 1;
    }
    drt_remote_destroy(remote);
    /* A fetch function that fails: the read fails with its message. */
    snprintf(local_dir, sizeof local_dir, "%s/local_failing", base_dir);
    source.fail_shards = 1;
    if (!failed && drt_remote_create(copy_fetch, &source, local_dir, strlen(local_dir), &remote) != DRT_OK) return 1;
    if (!failed) {
        int read_failed = read_all(runtime, remote, &status);
        if (read_failed || status != DRT_ERR_IO || strstr(drt_last_error(), "the test refuses shards/000000.bin") == NULL) {
            fprintf(stderr, "a failing fetch: status %d: %s\n", status, drt_last_error());
            failed = 1;
        }
        drt_remote_destroy(remote);
    }
    if (!failed) printf("a failing fetch function fails the read with its message: %s\n", drt_last_error());
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
    int rc = run(runtime, argv[1]);
    drt_runtime_destroy(runtime);
    return rc;
}
