/*
 * Writes three caches through the C ABI (lz4 with copied pushes; uncompressed
 * with borrowed payloads; the same by metadata columns) and reads every record
 * back (the second with deferred payloads), with each one's metadata table
 * through the Arrow C stream, and checks that a second writer of a published
 * name is refused and that the first cache is described from its manifest,
 * using only dataset_rt.h and the shared library. Usage: abi_round_trip <base_dir> [read]
 * With `read` it only reads the caches a previous run left in <base_dir> (how
 * scripts/test.sh has the Windows build read caches written on Linux).
 * Exits 0 when every payload and metadata row matches what was written.
 */
#include "dataset_rt.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_COUNT 1000u
#define BATCH_SAMPLES 64u

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, drt_last_error());
    return 1;
}

static size_t payload_len(uint32_t i) { return (size_t)(i * 37u) % 3000u; }

static void fill_payload(uint32_t i, uint8_t *out) {
    for (size_t k = 0; k < payload_len(i); k++) out[k] = (uint8_t)((i * 31u + k * 7u) & 0xffu);
}

static int expected_metadata(uint32_t i, char *out, size_t cap) {
    /* Canonical form: keys sorted, floats with a '.' or exponent. */
    return snprintf(out, cap, "{\"index\":%u,\"label\":\"l%u\",\"score\":%u.5}", i, i % 4u, i);
}

enum push_mode { PUSH_COPIED, PUSH_BORROWED, PUSH_COLUMNS, PUSH_COLUMNS_JOINED };

static int write_cache(drt_runtime *runtime, const char *base_dir, const char *name, uint32_t compression,
                       enum push_mode mode) {
    drt_writer_options options = {
        .max_shard_bytes = 200000, .batches_in_flight_max = 4,
        .compression = compression, .compression_ratio = compression == DRT_COMPRESSION_LZ4 ? 2.0 : 1.0,
    };
    drt_writer *writer = NULL;
    if (drt_writer_create(runtime, base_dir, strlen(base_dir), name, strlen(name), &options, &writer) != DRT_OK) return fail("writer_create");
    /* The page cache policy: known ones before the first push, not after it. */
    if (drt_writer_set_page_cache(writer, 3) != DRT_ERR_INVALID_ARGUMENT ||
        drt_writer_set_page_cache(writer, DRT_PAGE_CACHE_KEEP) != DRT_OK) {
        drt_writer_destroy(writer);
        return fail("writer_set_page_cache");
    }
    /* Copied pushes reuse one buffer; borrowed payloads stay untouched until
     * the writer finishes. */
    static uint8_t payloads[BATCH_SAMPLES * 3000u];
    int64_t indexes[BATCH_SAMPLES];
    double scores[BATCH_SAMPLES];
    uint64_t label_offsets[BATCH_SAMPLES + 1];
    char labels[BATCH_SAMPLES * 4];
    static uint8_t all_payloads[SAMPLE_COUNT * 3000u];
    static char metadata[BATCH_SAMPLES * 96u];
    uint64_t lens[BATCH_SAMPLES];
    const uint8_t *parts[BATCH_SAMPLES];
    size_t all_used = 0;
    for (uint32_t first = 0; first < SAMPLE_COUNT; first += BATCH_SAMPLES) {
        uint32_t count = SAMPLE_COUNT - first < BATCH_SAMPLES ? SAMPLE_COUNT - first : BATCH_SAMPLES;
        size_t used = 0, text = 0;
        metadata[text++] = '[';
        label_offsets[0] = 0;
        for (uint32_t k = 0; k < count; k++) {
            uint32_t i = first + k;
            fill_payload(i, payloads + used);
            fill_payload(i, all_payloads + all_used);
            parts[k] = all_payloads + all_used;
            lens[k] = payload_len(i);
            used += lens[k];
            all_used += lens[k];
            indexes[k] = i;
            scores[k] = i + 0.5;
            label_offsets[k + 1] = label_offsets[k] +
                (uint64_t)snprintf(labels + label_offsets[k], sizeof labels - label_offsets[k], "l%u", i % 4u);
            /* Keys deliberately unsorted: the core sorts them. */
            text += (size_t)snprintf(metadata + text, sizeof metadata - text, "%s{\"score\":%u.5,\"label\":\"l%u\",\"index\":%u}",
                                     k ? "," : "", i, i % 4u, i);
        }
        metadata[text++] = ']';
        /* Deliberately not in name order: the core sorts the fields. */
        const drt_push_column columns[3] = {
            {(const uint8_t *)"score", 5, 2, 0, scores, NULL, NULL},
            {(const uint8_t *)"index", 5, 1, 0, indexes, NULL, NULL},
            {(const uint8_t *)"label", 5, 3, 0, NULL, label_offsets, (const uint8_t *)labels},
        };
        /* The batch's borrowed payloads lie back to back in all_payloads. */
        const uint8_t *joined = all_payloads + (all_used - used);
        if (mode == PUSH_COLUMNS_JOINED && used > 0 &&
            drt_writer_push_columns_joined(writer, joined, used - 1, lens, count, columns, 3) != DRT_ERR_INVALID_ARGUMENT) {
            drt_writer_destroy(writer);
            return fail("push_columns_joined with a wrong payloads_len was accepted");
        }
        int32_t status =
            mode == PUSH_COLUMNS_JOINED ? drt_writer_push_columns_joined(writer, joined, used, lens, count, columns, 3)
            : mode == PUSH_COLUMNS ? drt_writer_push_columns(writer, parts, lens, count, columns, 3)
            : mode == PUSH_BORROWED ? drt_writer_push_borrowed(writer, parts, lens, count, (const uint8_t *)metadata, text)
                                    : drt_writer_push(writer, payloads, used, lens, count, (const uint8_t *)metadata, text);
        if (status != DRT_OK) {
            drt_writer_destroy(writer);
            return fail("writer_push");
        }
    }
    if (drt_writer_set_page_cache(writer, DRT_PAGE_CACHE_AUTO) != DRT_ERR_STATE) {
        drt_writer_destroy(writer);
        return fail("writer_set_page_cache after a push");
    }
    if (drt_writer_finish(writer) != DRT_OK) {
        drt_writer_destroy(writer);
        return fail("writer_finish");
    }
    printf("published %s\n", drt_writer_path(writer));
    drt_writer_destroy(writer);
    /* A second writer of the published name is refused, and neither writer
     * leaves its lock file behind. */
    drt_writer *again = NULL;
    if (drt_writer_create(runtime, base_dir, strlen(base_dir), name, strlen(name), &options, &again) != DRT_ERR_ALREADY_EXISTS) {
        fprintf(stderr, "%s: a second writer of a published cache was not refused: %s\n", name, drt_last_error());
        return 1;
    }
    char lock_path[4096];
    snprintf(lock_path, sizeof lock_path, "%s/tmp/%s.lock", base_dir, name);
    FILE *lock = fopen(lock_path, "rb");
    if (lock != NULL) {
        fclose(lock);
        fprintf(stderr, "%s: the lock file %s was left behind\n", name, lock_path);
        return 1;
    }
    return 0;
}

static int same_string(const drt_batch_column *column, uint64_t a, uint64_t b) {
    uint64_t len = column->offsets[a + 1] - column->offsets[a];
    return len == column->offsets[b + 1] - column->offsets[b] &&
           memcmp(column->bytes + column->offsets[a], column->bytes + column->offsets[b], (size_t)len) == 0;
}

/* The label column (schema order: index, label, score), when coded: equal
 * strings share a code, codes count up from 0 in order of first occurrence. */
static int check_label_codes(const drt_batch *batch, uint32_t *coded_batches) {
    const drt_batch_column *label = &batch->columns[1];
    if (label->kind != 3) {
        fprintf(stderr, "column 1 has kind %u, expected 3 (string)\n", label->kind);
        return 1;
    }
    if (label->distinct == 0) return 0;
    const uint32_t *codes = (const uint32_t *)label->values;
    static uint64_t first_row[256];
    uint32_t next_code = 0;
    for (uint64_t k = 0; k < batch->count; k++) {
        uint32_t expected = next_code;
        for (uint32_t c = 0; c < next_code; c++) {
            if (same_string(label, k, first_row[c])) expected = c;
        }
        if (codes[k] != expected || expected >= label->distinct) {
            fprintf(stderr, "row %llu has code %u, expected %u of %u\n", (unsigned long long)k, codes[k], expected, label->distinct);
            return 1;
        }
        if (expected == next_code) first_row[next_code++] = k;
    }
    if (next_code != label->distinct) {
        fprintf(stderr, "%u codes used, distinct says %u\n", next_code, label->distinct);
        return 1;
    }
    (*coded_batches)++;
    return 0;
}

static uint64_t padded8(uint64_t len) { return (len + 7) & ~(uint64_t)7; }

/* Compares `bytes` with the packed part at *at (then moves past it and its padding). */
static int packed_part(const drt_batch *batch, uint64_t *at, const void *bytes, uint64_t len, const char *what) {
    if (*at + len > batch->packed_len || (len != 0 && memcmp(batch->packed + *at, bytes, (size_t)len) != 0)) {
        fprintf(stderr, "packed %s (at %llu, %llu bytes) differs from the batch's\n", what, (unsigned long long)*at, (unsigned long long)len);
        return 1;
    }
    *at += padded8(len);
    return 0;
}

/* drt_batch.packed holds the same counts, ids, lengths and columns as the
 * struct's arrays, in the layout documented in the header. */
static int check_packed(const drt_batch *batch, const uint64_t *deferred) {
    const uint64_t n = batch->count;
    uint64_t skipped_count = 1;
    const drt_skipped *skipped = NULL;
    if (drt_batch_skipped(batch, &skipped_count, &skipped) != DRT_OK) return fail("batch_skipped");
    uint64_t head[5] = {n, batch->column_count, batch->payload_offsets[n], deferred != NULL, skipped_count};
    /* In the payloads' buffer, from the first multiple of 8 after them. */
    if (batch->packed != batch->payloads + (batch->payload_offsets[n] + 7) / 8 * 8) return fail("packed does not follow the payloads");
    uint64_t at = 0;
    if (packed_part(batch, &at, head, sizeof head, "head") != 0) return 1;
    uint64_t value_bytes[4] = {1, 8, 8, 4}; /* bool, int, float, string code */
    for (uint64_t c = 0; c < batch->column_count; c++) {
        const drt_batch_column *column = &batch->columns[c];
        int string = column->kind == 3;
        uint64_t words[5] = {column->kind, column->distinct,
                             string && column->distinct == 0 ? 0 : n * value_bytes[column->kind],
                             string ? (n + 1) * 8 : 0, string ? column->offsets[n] : 0};
        if (packed_part(batch, &at, words, sizeof words, "column descriptor") != 0) return 1;
    }
    for (uint64_t k = 0; k < n; k++) {
        uint64_t len = batch->payload_offsets[k + 1] - batch->payload_offsets[k];
        if (memcmp(batch->packed + at + 8 * k, &len, 8) != 0) return fail("packed payload length differs");
    }
    at += 8 * n;
    if (packed_part(batch, &at, batch->sample_ids, 8 * n, "sample ids") != 0) return 1;
    if (packed_part(batch, &at, batch->cache_ids, 8 * n, "cache ids") != 0) return 1;
    for (uint64_t c = 0; c < batch->column_count; c++) {
        const drt_batch_column *column = &batch->columns[c];
        int string = column->kind == 3;
        uint64_t values_len = string && column->distinct == 0 ? 0 : n * value_bytes[column->kind];
        if (packed_part(batch, &at, column->values, values_len, "column values") != 0) return 1;
        if (string && packed_part(batch, &at, column->offsets, (n + 1) * 8, "string offsets") != 0) return 1;
        if (string && packed_part(batch, &at, column->bytes, column->offsets[n], "string bytes") != 0) return 1;
    }
    if (packed_part(batch, &at, skipped, skipped_count * sizeof(drt_skipped), "skipped samples") != 0) return 1;
    if (at != batch->packed_len) {
        fprintf(stderr, "packed_len %llu, its parts end at %llu\n", (unsigned long long)batch->packed_len, (unsigned long long)at);
        return 1;
    }
    return 0;
}

/* Reads every deferred payload of a batch at once with
 * drt_iterator_read_deferred_batch into buffers of its own and checks them;
 * a NULL destination for a deferred payload must be refused. */
static int check_batch_read(drt_iterator *iterator, const drt_batch *batch, const uint64_t *deferred) {
    void **destinations = calloc((size_t)batch->count, sizeof *destinations);
    if (destinations == NULL) return fail("calloc");
    int failed = 0;
    int any = 0;
    for (uint64_t k = 0; k < batch->count && !failed; k++) {
        if (deferred[k] == 0) continue;
        any = 1;
        destinations[k] = malloc((size_t)deferred[k]);
        if (destinations[k] == NULL) failed = fail("malloc");
    }
    if (!failed && any) {
        uint64_t first = 0;
        while (deferred[first] == 0) first++;
        void *kept = destinations[first];
        destinations[first] = NULL;
        if (drt_iterator_read_deferred_batch(iterator, batch, (void *const *)destinations) != DRT_ERR_INVALID_ARGUMENT) {
            failed = fail("read_deferred_batch with a NULL destination did not fail");
        }
        destinations[first] = kept;
    }
    if (!failed && drt_iterator_read_deferred_batch(iterator, batch, (void *const *)destinations) != DRT_OK) failed = fail("read_deferred_batch");
    static uint8_t expected[3000];
    for (uint64_t k = 0; k < batch->count && !failed; k++) {
        if (deferred[k] == 0) continue;
        uint32_t i = (uint32_t)batch->sample_ids[k];
        fill_payload(i, expected);
        if (deferred[k] != payload_len(i) || memcmp(destinations[k], expected, (size_t)deferred[k]) != 0) {
            fprintf(stderr, "sample %u: read_deferred_batch gave other bytes\n", i);
            failed = 1;
        }
    }
    for (uint64_t k = 0; k < batch->count; k++) free(destinations[k]);
    free(destinations);
    return failed;
}

/* Reads the cache back; payloads of at least defer_bytes (0: none) are deferred
 * and read into a buffer of the caller with drt_iterator_read_deferred. */
/* The metadata table through the Arrow C stream, read after its dataset was
 * destroyed: cache_id | sample_id | index | label | score | weight. */
static int check_metadata_stream(struct ArrowArrayStream *stream, const char *name) {
    static const char *const names[6] = {"cache_id", "sample_id", "index", "label", "score", "weight"};
    static const char *const formats[6] = {"L", "L", "l", "U", "g", "g"};
    struct ArrowSchema schema;
    if (stream->get_schema(stream, &schema) != 0) {
        fprintf(stderr, "%s: get_schema: %s\n", name, stream->get_last_error(stream));
        return 1;
    }
    if (strcmp(schema.format, "+s") != 0 || schema.n_children != 6) {
        fprintf(stderr, "%s: table schema %s with %lld columns\n", name, schema.format, (long long)schema.n_children);
        return 1;
    }
    for (int c = 0; c < 6; c++) {
        if (strcmp(schema.children[c]->name, names[c]) != 0 || strcmp(schema.children[c]->format, formats[c]) != 0) {
            fprintf(stderr, "%s: column %d is %s (%s)\n", name, c, schema.children[c]->name, schema.children[c]->format);
            return 1;
        }
    }
    struct ArrowArray array;
    struct ArrowArray end;
    if (stream->get_next(stream, &array) != 0 || array.release == NULL) return fail("metadata stream get_next");
    if (stream->get_next(stream, &end) != 0 || end.release != NULL) return fail("metadata stream has a second batch");
    /* Released first: the array and the schema keep what they point to. */
    stream->release(stream);
    if (array.length != SAMPLE_COUNT || array.n_children != 6) {
        fprintf(stderr, "%s: %lld rows in %lld columns\n", name, (long long)array.length, (long long)array.n_children);
        return 1;
    }
    const uint64_t *cache_ids = array.children[0]->buffers[1];
    const uint64_t *sample_ids = array.children[1]->buffers[1];
    const int64_t *indexes = array.children[2]->buffers[1];
    const int64_t *label_offsets = array.children[3]->buffers[1];
    const char *label_bytes = array.children[3]->buffers[2];
    const double *scores = array.children[4]->buffers[1];
    const double *weights = array.children[5]->buffers[1];
    for (uint32_t i = 0; i < SAMPLE_COUNT; i++) {
        char label[16];
        int label_len = snprintf(label, sizeof label, "l%u", i % 4u);
        int same_label = label_offsets[i + 1] - label_offsets[i] == label_len &&
                         memcmp(label_bytes + label_offsets[i], label, (size_t)label_len) == 0;
        if (cache_ids[i] != 0 || sample_ids[i] != i || indexes[i] != (int64_t)i || !same_label ||
            scores[i] != i + 0.5 || weights[i] != 1.0) {
            fprintf(stderr, "%s: metadata table row %u differs\n", name, i);
            return 1;
        }
    }
    schema.release(&schema);
    array.release(&array);
    return 0;
}

static int read_cache(drt_runtime *runtime, const char *base_dir, const char *name, uint64_t defer_bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", base_dir, name);
    const char *paths[1] = {path};
    const uint64_t path_lens[1] = {strlen(path)};
    drt_reader_options options = {.seed = 7, .prefetch_size = 16, .shuffle = 0, .validate_cache = 1};
    drt_dataset *dataset = NULL;
    if (drt_dataset_open(runtime, paths, path_lens, 1, &options, &dataset) != DRT_OK) return fail("dataset_open");
    uint64_t length = 0;
    if (drt_dataset_len(dataset, &length) != DRT_OK) return fail("dataset_len");
    if (length != SAMPLE_COUNT) {
        fprintf(stderr, "dataset_len %llu\n", (unsigned long long)length);
        return 1;
    }
    struct ArrowArrayStream metadata_stream;
    if (drt_dataset_metadata_arrow_stream(dataset, &metadata_stream) != DRT_OK) return fail("metadata_arrow_stream");
    drt_iterator *iterator = NULL;
    if (drt_iterator_create_deferring(dataset, defer_bytes, &iterator) != DRT_OK) return fail("iterator_create");
    static uint8_t expected[3000];
    static uint8_t deferred_payload[3000];
    uint32_t deferred_count = 0;
    char expected_json[128];
    uint32_t seen = 0;
    uint32_t coded_batches = 0;
    for (;;) {
        drt_batch *batch = NULL;
        if (drt_iterator_next(iterator, &batch) != DRT_OK) return fail("iterator_next");
        if (batch == NULL) break;
        const uint64_t *deferred = NULL;
        if (drt_batch_deferred(batch, &deferred) != DRT_OK) return fail("batch_deferred");
        if (check_packed(batch, deferred) != 0) return 1;
        if (deferred != NULL && check_batch_read(iterator, batch, deferred) != 0) return 1;
        for (uint64_t k = 0; k < batch->count; k++, seen++) {
            uint32_t i = seen;
            size_t len = (size_t)(batch->payload_offsets[k + 1] - batch->payload_offsets[k]);
            const uint8_t *payload = batch->payloads + batch->payload_offsets[k];
            if (deferred != NULL && deferred[k] != 0) {
                if (len != 0 || deferred[k] < defer_bytes || deferred[k] > sizeof deferred_payload) {
                    fprintf(stderr, "sample %u: deferred %llu bytes, %zu in the batch\n", i, (unsigned long long)deferred[k], len);
                    return 1;
                }
                len = (size_t)deferred[k];
                if (drt_iterator_read_deferred(iterator, batch, k, deferred_payload) != DRT_OK) return fail("read_deferred");
                payload = deferred_payload;
                deferred_count++;
            } else if (defer_bytes != 0 && len >= defer_bytes) {
                fprintf(stderr, "sample %u: %zu bytes were not deferred\n", i, len);
                return 1;
            } else if (drt_iterator_read_deferred(iterator, batch, k, deferred_payload) != DRT_ERR_INVALID_ARGUMENT) {
                fprintf(stderr, "sample %u: reading a payload that was not deferred did not fail\n", i);
                return 1;
            }
            fill_payload(i, expected);
            int json_len = expected_metadata(i, expected_json, sizeof expected_json);
            size_t got_json_len = (size_t)(batch->metadata_offsets[k + 1] - batch->metadata_offsets[k]);
            if (batch->cache_ids[k] != 0 || batch->sample_ids[k] != i || len != payload_len(i) ||
                memcmp(payload, expected, len) != 0 ||
                got_json_len != (size_t)json_len ||
                memcmp(batch->metadata_json + batch->metadata_offsets[k], expected_json, got_json_len) != 0) {
                fprintf(stderr, "sample %u differs: %.*s\n", i, (int)got_json_len,
                        (const char *)batch->metadata_json + batch->metadata_offsets[k]);
                return 1;
            }
        }
        if (check_label_codes(batch, &coded_batches) != 0) return 1;
        drt_batch_release(batch);
    }
    drt_iterator_destroy(iterator);
    drt_dataset_destroy(dataset);
    if (check_metadata_stream(&metadata_stream, name) != 0) return 1;
    if (coded_batches == 0) {
        fprintf(stderr, "%s: no batch coded its label column (4 distinct labels)\n", name);
        return 1;
    }
    if (seen != SAMPLE_COUNT) {
        fprintf(stderr, "read %u samples\n", seen);
        return 1;
    }
    if (defer_bytes != 0 && deferred_count == 0) {
        fprintf(stderr, "%s: no payload was deferred\n", name);
        return 1;
    }
    printf("read back %u samples of %s, %u payloads deferred\n", seen, name, deferred_count);
    return 0;
}

/* Reads the cache with DRT_PAYLOADS_MAPPED: each payload of at least
 * defer_bytes is checked in place and given by its address in its shard's
 * mapping. One mapping is retained and read again after the iterator and the
 * dataset are gone. An unknown mode is refused. */
static int read_mapped(drt_runtime *runtime, const char *base_dir, const char *name, uint64_t defer_bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", base_dir, name);
    const char *paths[1] = {path};
    const uint64_t path_lens[1] = {strlen(path)};
    drt_reader_options options = {.seed = 7, .prefetch_size = 16, .shuffle = 0};
    drt_dataset *dataset = NULL;
    if (drt_dataset_open(runtime, paths, path_lens, 1, &options, &dataset) != DRT_OK) return fail("dataset_open");
    if (drt_dataset_set_payloads(dataset, 7) != DRT_ERR_INVALID_ARGUMENT) return fail("payloads mode 7 was accepted");
    if (drt_dataset_set_payloads(dataset, DRT_PAYLOADS_MAPPED) != DRT_OK) return fail("set_payloads");
    drt_iterator *iterator = NULL;
    if (drt_iterator_create_deferring(dataset, defer_bytes, &iterator) != DRT_OK) return fail("iterator_create");
    static uint8_t expected[3000];
    uint32_t mapped_count = 0;
    drt_mapping *kept = NULL;
    const uint8_t *kept_base = NULL;
    uint64_t kept_len = 0;
    const uint8_t *kept_payload = NULL;
    uint32_t kept_sample = 0;
    for (;;) {
        drt_batch *batch = NULL;
        if (drt_iterator_next(iterator, &batch) != DRT_OK) return fail("iterator_next");
        if (batch == NULL) break;
        const uint64_t *deferred = NULL;
        const uint8_t *const *addresses = NULL;
        drt_mapping *const *mappings = NULL;
        if (drt_batch_deferred(batch, &deferred) != DRT_OK) return fail("batch_deferred");
        if (drt_batch_mapped(batch, &addresses, &mappings) != DRT_OK) return fail("batch_mapped");
        if ((deferred == NULL) != (addresses == NULL) || (addresses == NULL) != (mappings == NULL)) {
            fprintf(stderr, "%s: deferred %p, mapped %p / %p\n", name, (const void *)deferred, (const void *)addresses,
                    (const void *)mappings);
            return 1;
        }
        for (uint64_t k = 0; deferred != NULL && k < batch->count; k++) {
            uint32_t i = (uint32_t)batch->sample_ids[k];
            if (deferred[k] == 0) {
                if (addresses[k] != NULL || mappings[k] != NULL) return fail("a payload in the batch has an address");
                continue;
            }
            fill_payload(i, expected);
            if (addresses[k] == NULL || mappings[k] == NULL || deferred[k] != payload_len(i) ||
                memcmp(addresses[k], expected, (size_t)deferred[k]) != 0) {
                fprintf(stderr, "sample %u: the mapped payload differs\n", i);
                return 1;
            }
            mapped_count++;
            if (kept == NULL) {
                kept = mappings[k];
                if (drt_mapping_retain(kept, &kept_base, &kept_len) != DRT_OK) return fail("mapping_retain");
                if (addresses[k] < kept_base || addresses[k] + deferred[k] > kept_base + kept_len) {
                    return fail("the payload lies outside its mapping");
                }
                kept_payload = addresses[k];
                kept_sample = i;
            }
        }
        drt_batch_release(batch);
    }
    drt_iterator_destroy(iterator);
    drt_dataset_destroy(dataset);
    if (mapped_count == 0 || kept == NULL) {
        fprintf(stderr, "%s: no payload was mapped\n", name);
        return 1;
    }
    fill_payload(kept_sample, expected);
    if (memcmp(kept_payload, expected, payload_len(kept_sample)) != 0) return fail("a retained mapping lost its bytes");
    drt_mapping_release(kept);
    printf("read %u payloads of %s in place\n", mapped_count, name);
    return 0;
}

/* Every sample an iterator yields, as cache_id * 2^32 + sample_id, into out
 * (at most cap); returns the count, or -1 on failure. */
static long collect(drt_iterator *iterator, uint64_t *out, long cap, long limit) {
    long count = 0;
    for (;;) {
        drt_batch *batch = NULL;
        if (drt_iterator_next(iterator, &batch) != DRT_OK) return fail("iterator_next"), -1;
        if (!batch) return count;
        for (uint64_t k = 0; k < batch->count && count < limit; k++) {
            if (count == cap) return fprintf(stderr, "more samples than expected\n"), -1;
            out[count++] = ((uint64_t)batch->cache_ids[k] << 32) | batch->sample_ids[k];
        }
        drt_batch_release(batch);
        if (count == limit) return count;
    }
}

static drt_dataset *open_shuffled(drt_runtime *runtime, const char *path, uint64_t seed, uint64_t epoch_len) {
    const char *paths[1] = {path};
    const uint64_t path_lens[1] = {strlen(path)};
    drt_reader_options options = {.seed = seed, .prefetch_size = 8, .shuffle = 1, .validate_cache = 0};
    drt_dataset *dataset = NULL;
    if (drt_dataset_open(runtime, paths, path_lens, 1, &options, &dataset) != DRT_OK) return fail("dataset_open"), NULL;
    if (drt_dataset_set_epoch_len(dataset, epoch_len) != DRT_OK) return fail("set_epoch_len"), NULL;
    return dataset;
}

/* Shares of 2 ranks x 2 workers (batch 3) interleave back into the stream,
 * padded past the epoch of 50; a state saved after 17 samples resumes the rest
 * in another dataset, and a dataset of another seed refuses it. */
static int check_shares_and_resume(drt_runtime *runtime, const char *base_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/c_source", base_dir);
    enum { EPOCH = 50, PADDED = 54 };
    uint64_t stream[PADDED], shares[2][2][PADDED], resumed[EPOCH];
    long share_len[2][2];
    drt_dataset *reference = open_shuffled(runtime, path, 11, PADDED);
    if (!reference) return 1;
    drt_iterator *iterator = NULL;
    if (drt_iterator_create(reference, &iterator) != DRT_OK) return fail("iterator_create");
    if (collect(iterator, stream, PADDED, PADDED) != PADDED) return 1;
    drt_iterator_destroy(iterator);
    drt_dataset_destroy(reference);
    for (uint32_t rank = 0; rank < 2; rank++) {
        for (uint32_t worker = 0; worker < 2; worker++) {
            drt_dataset *dataset = open_shuffled(runtime, path, 11, EPOCH);
            if (!dataset) return 1;
            const drt_share share = {.batch_size = 3, .rank = rank, .world_size = 2, .worker = worker, .num_workers = 2};
            if (drt_iterator_create_share(dataset, &share, 0, 0, &iterator) != DRT_OK) return fail("iterator_create_share");
            share_len[rank][worker] = collect(iterator, shares[rank][worker], PADDED, PADDED);
            drt_iterator_destroy(iterator);
            drt_dataset_destroy(dataset);
        }
    }
    long at = 0;
    for (long step = 0; step < PADDED / 6; step++) {
        for (uint32_t rank = 0; rank < 2; rank++) {
            for (long k = 0; k < 3; k++) {
                long index = step / 2 * 3 + k;
                if (index >= share_len[rank][step % 2] || shares[rank][step % 2][index] != stream[at]) {
                    fprintf(stderr, "share step %ld rank %u differs from the stream at %ld\n", step, rank, at);
                    return 1;
                }
                at++;
            }
        }
    }
    drt_share_counts counts;
    const drt_share rank_one = {.batch_size = 3, .rank = 1, .world_size = 2, .num_workers = 1};
    if (drt_share_count(EPOCH, &rank_one, &counts) != DRT_OK) return fail("share_count");
    if (counts.steps != 9 || counts.rank_samples != 27) {
        fprintf(stderr, "share counts: %llu steps, %llu samples\n", (unsigned long long)counts.steps,
                (unsigned long long)counts.rank_samples);
        return 1;
    }

    drt_dataset *first = open_shuffled(runtime, path, 11, EPOCH);
    if (!first || drt_iterator_create(first, &iterator) != DRT_OK) return fail("resume: iterator_create");
    if (collect(iterator, resumed, EPOCH, 17) != 17) return 1;
    drt_stream_state state;
    if (drt_iterator_state(iterator, 17, &state) != DRT_OK) return fail("iterator_state");
    drt_iterator_destroy(iterator);
    uint8_t digests[32];
    if (drt_dataset_cache_sha256s(first, digests, 1) != DRT_OK) return fail("cache_sha256s");
    drt_dataset_destroy(first);
    if (state.at.position != 17 || state.at.epoch != 0 || strcmp(state.algorithm, "dataset_rt/sampler/v1") != 0) {
        fprintf(stderr, "unexpected state: position %llu, algorithm %s\n", (unsigned long long)state.at.position, state.algorithm);
        return 1;
    }
    drt_dataset *other_seed = open_shuffled(runtime, path, 12, EPOCH);
    if (!other_seed) return 1;
    if (drt_dataset_load_state(other_seed, &state, digests, 1) != DRT_ERR_INVALID_ARGUMENT || !strstr(drt_last_error(), "seed")) {
        fprintf(stderr, "a state of another seed was not refused by name: %s\n", drt_last_error());
        return 1;
    }
    drt_dataset_destroy(other_seed);
    drt_dataset *second = open_shuffled(runtime, path, 11, EPOCH);
    if (!second) return 1;
    if (drt_dataset_load_state(second, &state, digests, 1) != DRT_OK) return fail("load_state");
    uint64_t length = 0;
    if (drt_dataset_len(second, &length) != DRT_OK || length != EPOCH - 17) return fail("len after load_state");
    if (drt_iterator_create(second, &iterator) != DRT_OK) return fail("resumed iterator_create");
    if (collect(iterator, resumed + 17, EPOCH - 17, EPOCH) != EPOCH - 17) return 1;
    drt_iterator_destroy(iterator);
    drt_dataset_destroy(second);
    for (long k = 0; k < EPOCH; k++) {
        if (resumed[k] != stream[k]) {
            fprintf(stderr, "the resumed stream differs at %ld\n", k);
            return 1;
        }
    }
    drt_stream_position after;
    const drt_stream_position span = {.epoch = 0, .epoch_start = 0, .epoch_len = EPOCH, .position = 17};
    if (drt_stream_after_steps(&span, &rank_one, 2, &after) != DRT_OK || after.position != 29) return fail("stream_after_steps");
    printf("ranks, workers and resume agree with the stream\n");
    return 0;
}

/* The deprecated names (kept until ABI 4) are the same types, laid out as
 * before, and the same functions: a program built against them keeps working. */
_Static_assert(sizeof(drt_shard) == 32 && offsetof(drt_shard, rank) == 8 && offsetof(drt_shard, world_size) == 12 &&
                   offsetof(drt_shard, worker) == 16 && offsetof(drt_shard, num_workers) == 20 &&
                   offsetof(drt_shard, drop_last) == 24 && offsetof(drt_shard, reserved) == 28,
               "drt_share keeps drt_shard's layout");
_Static_assert(sizeof(drt_shard_counts) == 32 && offsetof(drt_shard_counts, worker_samples) == 24,
               "drt_share_counts keeps drt_shard_counts' layout");

static int check_deprecated_share_names(drt_runtime *runtime, const char *base_dir) {
    const drt_share shares[] = {
        {.batch_size = 3, .rank = 1, .world_size = 2, .worker = 1, .num_workers = 2},
        {.batch_size = 4, .num_workers = 3, .worker = 2, .world_size = 1, .drop_last = 1},
        {.batch_size = 0, .world_size = 1, .num_workers = 1}, /* refused: batch_size 0 */
    };
    for (size_t k = 0; k < sizeof shares / sizeof shares[0]; k++) {
        const drt_shard *old_share = &shares[k]; /* the alias takes a drt_share as it is */
        drt_share_counts by_new = {0};
        drt_shard_counts by_old = {0};
        const int32_t new_status = drt_share_count(37, &shares[k], &by_new);
        char new_error[256];
        snprintf(new_error, sizeof new_error, "%s", drt_last_error());
        const int32_t old_status = drt_shard_count(37, old_share, &by_old);
        if (new_status != old_status || memcmp(&by_new, &by_old, sizeof by_new) != 0 ||
            (new_status != DRT_OK && strcmp(new_error, drt_last_error()) != 0)) {
            fprintf(stderr, "drt_shard_count differs from drt_share_count for share %zu\n", k);
            return 1;
        }
        if (k == 2 && (new_status != DRT_ERR_INVALID_ARGUMENT || !strstr(new_error, "batch_size"))) {
            fprintf(stderr, "a share of batch_size 0 was not refused by name: %s\n", new_error);
            return 1;
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/c_source", base_dir);
    uint64_t samples[2][50];
    long lens[2];
    for (int old_name = 0; old_name < 2; old_name++) {
        drt_dataset *dataset = open_shuffled(runtime, path, 11, 50);
        if (!dataset) return 1;
        drt_iterator *iterator = NULL;
        const int32_t status = old_name ? drt_iterator_create_shard(dataset, &shares[0], 2, 0, &iterator)
                                        : drt_iterator_create_share(dataset, &shares[0], 2, 0, &iterator);
        if (status != DRT_OK) return fail(old_name ? "iterator_create_shard" : "iterator_create_share");
        lens[old_name] = collect(iterator, samples[old_name], 50, 50);
        drt_iterator_destroy(iterator);
        drt_dataset_destroy(dataset);
    }
    if (lens[0] < 1 || lens[0] != lens[1] || memcmp(samples[0], samples[1], (size_t)lens[0] * sizeof samples[0][0]) != 0) {
        fprintf(stderr, "drt_iterator_create_shard read another share than drt_iterator_create_share\n");
        return 1;
    }
    printf("the deprecated share names give what the new names give\n");
    return 0;
}

/* Without replacement each epoch of the cache is a permutation of its samples, equal
 * to drt_permutation_rows; reads by identity return exactly the samples asked
 * for, in order, and an unknown identity is DRT_ERR_OUT_OF_RANGE. */
static int check_permutation_and_reads(drt_runtime *runtime, const char *base_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/c_source", base_dir);
    enum { N = SAMPLE_COUNT };
    const char *paths[1] = {path};
    const uint64_t path_lens[1] = {strlen(path)};
    drt_reader_options options = {.seed = 9, .prefetch_size = 8, .shuffle = 1, .without_replacement = 1};
    drt_dataset *dataset = NULL;
    if (drt_dataset_open(runtime, paths, path_lens, 1, &options, &dataset) != DRT_OK) return fail("dataset_open");
    uint64_t rows[2 * N], read[N];
    if (drt_permutation_rows(N, 9, 0, 2 * N, rows) != DRT_OK) return fail("permutation_rows");
    for (int epoch = 0; epoch < 2; epoch++) {
        drt_iterator *iterator = NULL;
        if (drt_iterator_create(dataset, &iterator) != DRT_OK) return fail("iterator_create");
        if (collect(iterator, read, N, N) != N) return 1;
        drt_iterator_destroy(iterator);
        int seen[N] = {0};
        for (int i = 0; i < N; i++) {
            if (read[i] != rows[epoch * N + i] || seen[read[i]]++) {
                fprintf(stderr, "epoch %d position %d: sample %llu\n", epoch, i, (unsigned long long)read[i]);
                return 1;
            }
        }
    }
    const uint64_t cache_ids[3] = {0, 0, 0};
    const uint64_t sample_ids[3] = {42, 7, 42};
    drt_iterator *reads = NULL;
    if (drt_iterator_create_reads(dataset, cache_ids, sample_ids, 3, 0, &reads) != DRT_OK) return fail("iterator_create_reads");
    if (collect(reads, read, N, N) != 3 || read[0] != 42 || read[1] != 7 || read[2] != 42) {
        fprintf(stderr, "reads by identity returned other samples\n");
        return 1;
    }
    drt_stream_state state;
    if (drt_iterator_state(reads, 0, &state) != DRT_ERR_STATE) return fprintf(stderr, "reads had a state\n"), 1;
    drt_iterator_destroy(reads);
    const uint64_t unknown[1] = {N};
    if (drt_iterator_create_reads(dataset, cache_ids, unknown, 1, 0, &reads) != DRT_ERR_OUT_OF_RANGE) {
        fprintf(stderr, "an unknown identity was accepted\n");
        return 1;
    }
    if (strstr(drt_last_error(), "cache 0 has 1000 samples") == NULL) return fprintf(stderr, "message: %s\n", drt_last_error()), 1;
    drt_dataset_destroy(dataset);
    return 0;
}

/* A mix of two caches: cache 0 read half (a fresh 500 of its 1000 samples), cache 1
 * chosen 1500 times (every sample once, 500 twice); each epoch is drt_mix_rows of
 * the counts drt_dataset_mix_counts gives, and set_epoch_len is refused. */
static int check_mix(drt_runtime *runtime, const char *base_dir) {
    char first[4096], second[4096];
    snprintf(first, sizeof first, "%s/c_source", base_dir);
    snprintf(second, sizeof second, "%s/c_raw", base_dir);
    enum { N = SAMPLE_COUNT, L = 2000 };
    const char *paths[2] = {first, second};
    const uint64_t path_lens[2] = {strlen(first), strlen(second)};
    drt_reader_options options = {.seed = 4, .prefetch_size = 8, .shuffle = 1, .without_replacement = 1};
    drt_dataset *dataset = NULL;
    if (drt_dataset_open(runtime, paths, path_lens, 2, &options, &dataset) != DRT_OK) return fail("dataset_open");
    const drt_mix_entry entries[2] = {
        {.cache = 0, .form = DRT_MIX_REPEAT, .value = 0.5},
        {.cache = 1, .form = DRT_MIX_CHOOSE, .count = 1500},
    };
    if (drt_dataset_set_mix(dataset, entries, 2) != DRT_OK) return fail("set_mix");
    uint64_t counts[2] = {0}, length = 0;
    uint32_t mixed = 0;
    if (drt_dataset_mix_counts(dataset, counts, 2, &mixed) != DRT_OK) return fail("mix_counts");
    if (drt_dataset_len(dataset, &length) != DRT_OK) return fail("dataset_len");
    if (!mixed || counts[0] != 500 || counts[1] != 1500 || length != L) {
        fprintf(stderr, "mix counts %llu %llu, length %llu\n", (unsigned long long)counts[0],
                (unsigned long long)counts[1], (unsigned long long)length);
        return 1;
    }
    static uint64_t rows[2 * L], read[L];
    static uint32_t caches[2 * L];
    const uint64_t row_counts[2] = {N, N};
    if (drt_mix_rows(4, counts, row_counts, 2, 0, 2 * L, caches, rows) != DRT_OK) return fail("mix_rows");
    for (int epoch = 0; epoch < 2; epoch++) {
        drt_iterator *iterator = NULL;
        if (drt_iterator_create(dataset, &iterator) != DRT_OK) return fail("iterator_create");
        if (collect(iterator, read, L, L) != L) return 1;
        drt_iterator_destroy(iterator);
        for (int i = 0; i < L; i++) {
            uint64_t expected = ((uint64_t)caches[epoch * L + i] << 32) | rows[epoch * L + i];
            if (read[i] != expected) return fprintf(stderr, "mix epoch %d position %d differs\n", epoch, i), 1;
        }
    }
    if (drt_dataset_set_epoch_len(dataset, 9) != DRT_ERR_INVALID_ARGUMENT) return fprintf(stderr, "set_epoch_len under a mix\n"), 1;
    if (drt_dataset_set_mix(dataset, NULL, 0) != DRT_OK) return fail("set_mix none");
    if (drt_dataset_len(dataset, &length) != DRT_OK || length != 2 * N) return fprintf(stderr, "no mix: length\n"), 1;
    drt_dataset_destroy(dataset);
    printf("read two mixed epochs of c_source and c_raw\n");
    return 0;
}

/* Scrubs a cache: sound as written, then one flipped payload byte is reported
 * with its file, sample and offset (and the shard's SHA-256); the byte is
 * restored afterwards. */
static int check_verify(drt_runtime *runtime, const char *base_dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", base_dir, name);
    drt_verifier *verifier = NULL;
    if (drt_verify_create(runtime, path, strlen(path), &verifier) != DRT_OK) return fail("verify_create");
    if (drt_verify_run(verifier) != DRT_OK) return fail("verify_run");
    uint64_t kept = 1, total = 1, done = 0, all = 0;
    if (drt_verify_problem_count(verifier, &kept, &total) != DRT_OK) return fail("verify_problem_count");
    if (drt_verify_progress(verifier, &done, &all) != DRT_OK) return fail("verify_progress");
    drt_verify_destroy(verifier);
    if (kept != 0 || total != 0 || done != all || all == 0) {
        fprintf(stderr, "%s: verify found %llu problems, read %llu of %llu bytes\n", name,
                (unsigned long long)total, (unsigned long long)done, (unsigned long long)all);
        return 1;
    }
    char shard_path[4200];
    snprintf(shard_path, sizeof shard_path, "%s/shards/000000.bin", path);
    FILE *shard = fopen(shard_path, "r+b");
    if (shard == NULL) return fail("open shard");
    fseek(shard, -1, SEEK_END); /* the last byte of the shard's last record */
    int byte = fgetc(shard);
    fseek(shard, -1, SEEK_END);
    fputc(byte ^ 0x01, shard);
    fclose(shard);
    if (drt_verify_create(runtime, path, strlen(path), &verifier) != DRT_OK) return fail("verify_create");
    if (drt_verify_run(verifier) != DRT_OK) return fail("verify_run");
    if (drt_verify_problem_count(verifier, &kept, &total) != DRT_OK) return fail("verify_problem_count");
    int found_record = 0;
    for (uint64_t i = 0; i < kept; i++) {
        drt_problem problem;
        if (drt_verify_problem(verifier, i, &problem) != DRT_OK) return fail("verify_problem");
        if (problem.has_sample && problem.has_offset && problem.file_len == 17 &&
            memcmp(problem.file, "shards/000000.bin", 17) == 0) {
            found_record = 1;
        }
    }
    drt_problem none;
    if (drt_verify_problem(verifier, kept, &none) != DRT_ERR_OUT_OF_RANGE) return fail("verify_problem past the end");
    drt_verify_destroy(verifier);
    shard = fopen(shard_path, "r+b"); /* put the byte back for later reads */
    if (shard == NULL) return fail("open shard");
    fseek(shard, -1, SEEK_END);
    fputc(byte, shard);
    fclose(shard);
    if (total != 2 || !found_record) {
        fprintf(stderr, "%s: after a flipped byte verify found %llu problems (record: %d)\n", name,
                (unsigned long long)total, found_record);
        return 1;
    }
    return 0;
}

/* Describes c_source from its manifest alone (drt_cache_info): the JSON names
 * what was written; the base folder, which holds no manifest, is refused. */
static int check_cache_info(const char *base_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/c_source", base_dir);
    drt_buffer *info = NULL;
    if (drt_cache_info(path, strlen(path), &info) != DRT_OK) return fail("cache_info");
    char text[4096];
    snprintf(text, sizeof text, "%.*s", (int)info->len, (const char *)info->data);
    drt_buffer_release(info);
    const char *expected[] = {
        "\"format_version\":2,\"cache_id\":null,\"source_name\":\"c_source\",\"sample_count\":1000,",
        "\"compression\":[{\"algo\":\"lz4\",\"ratio\":2.0}],\"record_checksums\":true,",
        "{\"name\":\"label\",\"kind\":\"string\",\"arrow_type\":\"utf8\"}",
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        if (strstr(text, expected[i]) == NULL) {
            fprintf(stderr, "cache_info lacks %s: %s\n", expected[i], text);
            return 1;
        }
    }
    info = NULL;
    if (drt_cache_info(base_dir, strlen(base_dir), &info) != DRT_ERR_INVALID_CACHE || info != NULL ||
        strstr(drt_last_error(), "missing manifest: cannot read manifest.json") == NULL) {
        fprintf(stderr, "the base folder was described: %s\n", drt_last_error());
        return 1;
    }
    printf("described c_source from its manifest\n");
    return 0;
}

/* An open dataset of c_source and c_raw describes each cache exactly as
 * drt_cache_info describes its folder; an index past the last is out of range. */
static int check_dataset_cache_info(drt_runtime *runtime, const char *base_dir) {
    char first[4096], second[4096];
    snprintf(first, sizeof first, "%s/c_source", base_dir);
    snprintf(second, sizeof second, "%s/c_raw", base_dir);
    const char *paths[2] = {first, second};
    const uint64_t path_lens[2] = {strlen(first), strlen(second)};
    drt_reader_options options = {.seed = 1, .prefetch_size = 8};
    drt_dataset *dataset = NULL;
    if (drt_dataset_open(runtime, paths, path_lens, 2, &options, &dataset) != DRT_OK) return fail("dataset_open");
    int failed = 0;
    for (uint32_t i = 0; i < 2 && !failed; i++) {
        drt_buffer *opened = NULL, *folder = NULL;
        if (drt_dataset_cache_info(dataset, i, &opened) != DRT_OK) return fail("dataset_cache_info");
        if (drt_cache_info(paths[i], path_lens[i], &folder) != DRT_OK) return fail("cache_info");
        if (opened->len != folder->len || memcmp(opened->data, folder->data, folder->len) != 0) {
            fprintf(stderr, "cache %u described as %.*s, its folder as %.*s\n", i, (int)opened->len,
                    (const char *)opened->data, (int)folder->len, (const char *)folder->data);
            failed = 1;
        }
        drt_buffer_release(opened);
        drt_buffer_release(folder);
    }
    drt_buffer *past = NULL;
    if (!failed && (drt_dataset_cache_info(dataset, 2, &past) != DRT_ERR_OUT_OF_RANGE || past != NULL ||
                    strstr(drt_last_error(), "cache_index is 2, the dataset has 2 caches") == NULL)) {
        fprintf(stderr, "cache_index 2 of 2 caches: %s\n", drt_last_error());
        failed = 1;
    }
    drt_dataset_destroy(dataset);
    if (!failed) printf("an open dataset described its two caches as their folders\n");
    return failed;
}

/* With at most one shard file open in the process, c_raw (two shards) reads back
 * whole, its payloads in place: each shard is opened when read (and mapped), the
 * other closed to make room. */
static int check_open_shards(drt_runtime *runtime, const char *base_dir) {
    if (drt_set_max_open_shards(0) != DRT_ERR_INVALID_ARGUMENT ||
        strstr(drt_last_error(), "max_open_shards must be at least 1, got 0") == NULL) {
        fprintf(stderr, "a maximum of 0 open shards was accepted: %s\n", drt_last_error());
        return 1;
    }
    drt_open_shards_stats before, after;
    if (drt_open_shards_stats_get(&before) != DRT_OK) return fail("open_shards_stats_get");
    if (drt_set_max_open_shards(1) != DRT_OK) return fail("set_max_open_shards");
    int rc = read_mapped(runtime, base_dir, "c_raw", 1000);
    if (drt_open_shards_stats_get(&after) != DRT_OK) return fail("open_shards_stats_get");
    if (drt_set_max_open_shards(64) != DRT_OK) return fail("set_max_open_shards");
    if (rc != 0) return rc;
    if (after.max != 1 || after.open > 1 || after.opens - before.opens < 2 ||
        after.evictions - before.evictions < 1) {
        fprintf(stderr, "open shards: %llu open (max %llu), %llu opens, %llu evictions\n",
                (unsigned long long)after.open, (unsigned long long)after.max,
                (unsigned long long)(after.opens - before.opens),
                (unsigned long long)(after.evictions - before.evictions));
        return 1;
    }
    printf("read c_raw through one open shard file\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2 && !(argc == 3 && strcmp(argv[2], "read") == 0)) {
        fprintf(stderr, "usage: %s <base_dir> [read]\n", argv[0]);
        return 2;
    }
    const int writing = argc == 2;
    if (drt_abi_version() != DRT_ABI_VERSION) {
        fprintf(stderr, "ABI version %u, header %u\n", drt_abi_version(), DRT_ABI_VERSION);
        return 1;
    }
    drt_runtime *runtime = NULL;
    if (drt_runtime_create(0, &runtime) != DRT_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, "zero workers was accepted\n");
        return 1;
    }
    if (drt_runtime_create(2, &runtime) != DRT_OK) return fail("runtime_create");
    int rc = writing ? write_cache(runtime, argv[1], "c_source", DRT_COMPRESSION_LZ4, PUSH_COPIED) : 0;
    if (rc == 0) rc = read_cache(runtime, argv[1], "c_source", 0);
    if (rc == 0) rc = check_cache_info(argv[1]);
    if (rc == 0 && writing) rc = write_cache(runtime, argv[1], "c_raw", DRT_COMPRESSION_NONE, PUSH_BORROWED);
    if (rc == 0) rc = read_cache(runtime, argv[1], "c_raw", 1000);
    if (rc == 0) rc = read_mapped(runtime, argv[1], "c_raw", 1000);
    if (rc == 0) rc = check_dataset_cache_info(runtime, argv[1]);
    if (rc == 0 && writing) rc = write_cache(runtime, argv[1], "c_columns", DRT_COMPRESSION_NONE, PUSH_COLUMNS);
    if (rc == 0) rc = read_cache(runtime, argv[1], "c_columns", 0);
    if (rc == 0 && writing) rc = write_cache(runtime, argv[1], "c_columns_joined", DRT_COMPRESSION_NONE, PUSH_COLUMNS_JOINED);
    if (rc == 0) rc = read_cache(runtime, argv[1], "c_columns_joined", 0);
    if (rc == 0) rc = check_shares_and_resume(runtime, argv[1]);
    if (rc == 0) rc = check_deprecated_share_names(runtime, argv[1]);
    if (rc == 0) rc = check_permutation_and_reads(runtime, argv[1]);
    if (rc == 0) rc = check_mix(runtime, argv[1]);
    if (rc == 0) rc = check_open_shards(runtime, argv[1]);
    if (rc == 0 && writing) rc = check_verify(runtime, argv[1], "c_columns_joined");
    drt_runtime_destroy(runtime);
    return rc;
}
