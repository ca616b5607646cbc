/*
 * DatasetRT C ABI.
 *
 * Conventions
 * - Every fallible function returns an int32_t status (DRT_OK or a DRT_ERR_*
 *   code) and, on failure, sets a thread-local message read by drt_last_error().
 * - Handles are opaque and created/destroyed explicitly. Destroying NULL is a no-op.
 * - Buffers handed out by the core (drt_batch, drt_buffer) stay valid until
 *   released with their release function.
 * - Names and paths are passed as pointer + byte length (bytes as given to the
 *   OS), so an embedded NUL is seen and rejected instead of cutting the string.
 * - No failure ever aborts the process: a panic never crosses this boundary.
 * - A handle created before fork() belongs to the parent: in the child, calls
 *   on it return DRT_ERR_WRONG_PROCESS (drt_iterator_bytes_held returns 0) and destroy
 *   functions leak it instead of touching the parent's threads or files.
 */
#ifndef DATASET_RT_H
#define DATASET_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of a signature or struct below. */
#define DRT_ABI_VERSION 4u

enum {
    DRT_OK = 0,
    DRT_ERR_INVALID_ARGUMENT = 1, /* a call-level mistake: bad option, name or pointer */
    DRT_ERR_INVALID_INPUT = 2,    /* supplied samples or tables break a rule of the format */
    DRT_ERR_INVALID_CACHE = 3,    /* a cache on disk is missing, truncated, corrupt or of another version */
    DRT_ERR_IO = 4,               /* the operating system refused a file operation */
    DRT_ERR_OUT_OF_MEMORY = 5,
    DRT_ERR_ALREADY_EXISTS = 6,   /* the write target already exists; nothing was overwritten */
    DRT_ERR_WRONG_PROCESS = 7,    /* the handle was created in the parent of a fork() */
    DRT_ERR_STATE = 8,            /* the call is not valid in the handle's current state */
    DRT_ERR_OUT_OF_RANGE = 9      /* an index or identity names nothing (ABI 2) */
};

enum { DRT_COMPRESSION_NONE = 0, DRT_COMPRESSION_LZ4 = 1 };

/* ABI version of the loaded library; compare with DRT_ABI_VERSION. */
uint32_t drt_abi_version(void);

/* The message of the last failure on the calling thread ("" if none). */
const char *drt_last_error(void);

/* ---- Runtime: a fixed pool of native worker threads ------------------- */

typedef struct drt_runtime drt_runtime;

/* Starts exactly num_workers threads (1..256), reused by every operation. */
int32_t drt_runtime_create(uint32_t num_workers, drt_runtime **out);
/* Releases the caller's reference. Writers and datasets hold their own, so the
 * threads stop (and are joined) when the last of them is destroyed too. */
void drt_runtime_destroy(drt_runtime *runtime);
uint32_t drt_runtime_num_workers(const drt_runtime *runtime);

/* ---- Writer: one source into one cache -------------------------------- */

typedef struct drt_writer drt_writer;

typedef struct drt_writer_options {
    uint64_t max_shard_bytes;       /* >= 1; a shard rotates before it would exceed this */
    uint32_t batches_in_flight_max; /* >= 1; caps memory: pushes block beyond
                                     * min(this, max(8, 2 * num_workers)) batches */
    uint32_t compression;           /* DRT_COMPRESSION_* */
    double compression_ratio;       /* none: 1.0; lz4: positive and finite (advisory) */
    uint32_t format_version;        /* 2 or 3 (0 means 2): the manifest's format; 3 persists
                                     * the cache_id of source_name (ABI 4) */
    uint32_t reserved;              /* 0 */
} drt_writer_options;

typedef struct drt_stage_stats {
    uint64_t calls;
    uint64_t nanoseconds;
    uint64_t bytes;
} drt_stage_stats;

typedef struct drt_writer_stats {
    uint64_t samples_committed;
    uint64_t payload_bytes_committed; /* uncompressed payload bytes */
    uint64_t shard_bytes_committed;   /* bytes written to shards */
    drt_stage_stats ingress_wait;     /* pushes blocked on the in-flight bound */
    drt_stage_stats encode;           /* metadata validation and record framing */
    drt_stage_stats compression;
    drt_stage_stats hashing;
    drt_stage_stats disk_write;
    drt_stage_stats finish_manifest;  /* index, metadata.arrow, manifest, fsync */
    drt_stage_stats publish;          /* atomic rename and directory fsync */
} drt_writer_stats;

/*
 * Prepares base_dir/source_name: validates the name (one plain path segment of
 * valid UTF-8, not "tmp"),
 * takes a file lock on the target (waiting while another writer holds it),
 * fails with DRT_ERR_ALREADY_EXISTS if the target exists, and creates a staging
 * directory of its own under base_dir/tmp.
 */
int32_t drt_writer_create(drt_runtime *runtime, const char *base_dir, uint64_t base_dir_len,
                          const char *source_name, uint64_t source_name_len,
                          const drt_writer_options *options, drt_writer **out);

/* DRT_OK when source_name is usable as a cache name (one plain path segment of valid
 * UTF-8, at most 250 bytes, not "tmp"). */
int32_t drt_check_source_name(const char *source_name, uint64_t source_name_len);

/*
 * Publishes the complete cache at base_dir/fresh_name (a folder inside base_dir/tmp,
 * e.g. a cache written by a writer whose base_dir was such a folder) as
 * base_dir/source_name, replacing the cache published there. Under the name's
 * writer lock (as drt_writer_create takes it), the old cache is renamed aside into
 * base_dir/tmp, the fresh one renamed in, base_dir fsynced, and only then the old
 * one removed; a failure before the fresh cache is in puts the old one back.
 * *replaced is 1 when a cache was replaced, 0 when none was there. A target that
 * exists but is not a cache (no manifest.json) is DRT_ERR_INVALID_CACHE and is
 * left alone, as is a fresh folder without manifest.json; a fresh_name outside
 * base_dir/tmp is DRT_ERR_INVALID_ARGUMENT.
 */
int32_t drt_cache_replace(const char *base_dir, uint64_t base_dir_len, const char *source_name,
                          uint64_t source_name_len, const char *fresh_name,
                          uint64_t fresh_name_len, uint32_t *replaced);

/* Makes the caches at paths[i] format 3 with the cache_id cache_ids[i] (ABI 4):
 * only manifest.json changes, replaced atomically (new text written to the base
 * folder's tmp/ and fsynced, renamed over it, the cache directory fsynced).
 * Every cache is checked first, and nothing is written when one fails: listed
 * once, its name's writer lock free (DRT_ERR_STATE when a writer holds it; it
 * is held to the end), its manifest valid and, in format 2, laid out as the
 * writers lay it out, or already format 3 with that id (left unchanged).
 * outcomes[i] (count entries, set also on failure): DRT_MIGRATE_UPDATED,
 * DRT_MIGRATE_UNCHANGED, or DRT_MIGRATE_NOT_REACHED for a cache an error
 * stopped the run before (only an I/O failure while replacing can leave some
 * caches updated and others not; running it again is safe). */
enum { DRT_MIGRATE_UPDATED = 0, DRT_MIGRATE_UNCHANGED = 1, DRT_MIGRATE_NOT_REACHED = 2 };
int32_t drt_caches_migrate(const char *const *paths, const uint64_t *path_lens,
                           const uint64_t *cache_ids, uint32_t count, uint32_t *outcomes);

/* Commits a cache built in partitions (docs/storage-format.md, "Partitions"):
 * partition i (of count, at least 1) is the cache source_name written inside
 * base_dir/tmp/partitions/<source_name>/part-<i, 6 digits>.<attempts[i]>/,
 * holding sample_counts[i] samples, whose manifest.json has the SHA-256
 * manifest_sha256s[i] (32 bytes each); attempts[i] NULL (with
 * sample_counts[i] 0) is an empty partition. Under the name's writer lock it
 * verifies every partition (manifest against the given digest; index.bin,
 * records.crc32c and metadata.arrow against the manifest's digests; shard
 * sizes, not their hashes), requires one format version and one metadata
 * schema (DRT_ERR_INVALID_INPUT naming both partitions and the column),
 * writes the joined index, checksums and metadata table, renames the shard
 * files into place (no copy), writes the manifest, fsyncs, records
 * tmp/partitions/<source_name>/committed.json and publishes
 * base_dir/<source_name> by one rename; nothing is published on failure.
 * *outcome: DRT_PARTITIONS_PUBLISHED, or DRT_PARTITIONS_ALREADY_PUBLISHED when
 * base_dir/<source_name> is the cache an earlier commit published (its
 * committed.json names that manifest); any other existing cache there is
 * DRT_ERR_ALREADY_EXISTS ("cache path already exists: ..."). */
enum { DRT_PARTITIONS_PUBLISHED = 0, DRT_PARTITIONS_ALREADY_PUBLISHED = 1 };
int32_t drt_partitions_commit(const char *base_dir, uint64_t base_dir_len, const char *source_name,
                              uint64_t source_name_len, const char *const *attempts,
                              const uint64_t *attempt_lens, const uint64_t *sample_counts,
                              const uint8_t (*manifest_sha256s)[32], uint32_t count,
                              uint32_t *outcome);

/*
 * Hands `count` samples to the core. Payload i is
 * payloads[sum(payload_lens[0..i]) .. +payload_lens[i]]; metadata_json is a JSON
 * array of `count` flat objects (bool, integer, float or string values). The
 * core copies the inputs, so they may be freed when the call returns. Validation
 * happens on the pool: a bad sample is reported by a later push or by finish.
 */
int32_t drt_writer_push(drt_writer *writer, const uint8_t *payloads, uint64_t payloads_len,
                        const uint64_t *payload_lens, uint64_t count,
                        const uint8_t *metadata_json, uint64_t metadata_json_len);
/*
 * Like drt_writer_push, but payload i is payloads[i] (payload_lens[i] bytes; NULL
 * only when empty) and is not copied: the core reads it later on the pool, so
 * the caller must keep it alive and unchanged until drt_writer_stats_get
 * reports samples_committed past it, or until drt_writer_destroy returns.
 * The lengths and the metadata are copied.
 */
int32_t drt_writer_push_borrowed(drt_writer *writer, const uint8_t *const *payloads,
                                 const uint64_t *payload_lens, uint64_t count,
                                 const uint8_t *metadata_json, uint64_t metadata_json_len);

/* One metadata column of a drt_writer_push_columns batch: `count` values of
 * kind 0 bool (uint8_t 0/1), 1 int (int64_t), 2 float (double, finite) or
 * 3 string (row i is bytes[offsets[i] .. offsets[i+1]], UTF-8; offsets[0] == 0).
 * Unused pointers may be NULL. */
typedef struct drt_push_column {
    const uint8_t *name;
    uint64_t name_len;
    uint32_t kind;
    uint32_t reserved;
    const void *values;
    const uint64_t *offsets;
    const uint8_t *bytes;
} drt_push_column;

/*
 * Like drt_writer_push_borrowed (payloads borrowed until committed), with the
 * metadata by column instead of as JSON: one column per field, in any order.
 * The first batch's columns fix the schema (names sorted); later batches must
 * have the same fields and kinds. The columns are checked and copied during
 * the call. The cache written is byte for byte the one JSON pushes give.
 */
int32_t drt_writer_push_columns(drt_writer *writer, const uint8_t *const *payloads,
                                const uint64_t *payload_lens, uint64_t count,
                                const drt_push_column *columns, uint64_t column_count);
/*
 * Like drt_writer_push_columns, with the payloads in one buffer as for
 * drt_writer_push: payload i is payloads[sum(payload_lens[0..i]) .. +payload_lens[i]],
 * and payloads_len must be the sum of the lengths. The buffer is borrowed like
 * drt_writer_push_borrowed's payloads: alive and unchanged until committed.
 */
int32_t drt_writer_push_columns_joined(drt_writer *writer, const uint8_t *payloads,
                                       uint64_t payloads_len, const uint64_t *payload_lens,
                                       uint64_t count, const drt_push_column *columns,
                                       uint64_t column_count);

/* Waits for all samples, writes index, metadata and manifest, fsyncs and publishes. */
/*
 * Which shards keep their pages in the page cache once written, hashed and on
 * disk (Linux; elsewhere the system decides). DRT_PAGE_CACHE_AUTO (the
 * default): the shards while the writer's total is at most half of the memory
 * the system reported available when the writer was created (MemAvailable; none
 * kept without it, before Linux 3.14), none after it, so a cache that fits is read from memory right after it is
 * written and a much larger one does not fill the machine's memory;
 * DRT_PAGE_CACHE_KEEP: every shard; DRT_PAGE_CACHE_DROP: none. Only before the
 * first push (DRT_ERR_STATE after it); an unknown policy is DRT_ERR_INVALID_ARGUMENT.
 */
#define DRT_PAGE_CACHE_AUTO 0u
#define DRT_PAGE_CACHE_KEEP 1u
#define DRT_PAGE_CACHE_DROP 2u
int32_t drt_writer_set_page_cache(drt_writer *writer, uint32_t policy);

int32_t drt_writer_finish(drt_writer *writer);

/* Path of the published cache (valid until destroy); NULL before a successful finish. */
const char *drt_writer_path(const drt_writer *writer);

int32_t drt_writer_stats_get(const drt_writer *writer, drt_writer_stats *out);

/* Releases the writer. An unfinished writer is aborted: its staging directory is removed. */
void drt_writer_destroy(drt_writer *writer);

/* ---- Dataset: caches loaded for reading ------------------------------- */

typedef struct drt_dataset drt_dataset;
typedef struct drt_iterator drt_iterator;

typedef struct drt_reader_options {
    uint64_t seed;
    uint32_t prefetch_size;  /* >= 1: the most samples an iterator reads ahead */
    uint32_t shuffle;        /* 0 or 1 */
    uint32_t validate_cache; /* 0 or 1: verify every SHA-256 while loading */
    uint32_t without_replacement; /* 0: weighted draws with replacement; 1: with shuffle,
                                   * each epoch a permutation of the rows (ABI 2) */
} drt_reader_options;

/* Loads the caches in order and validates them. All caches must share one
 * metadata schema. A cache's cache_id is the one its format 3 manifest persists,
 * else its position in `paths`; two caches with one cache_id are refused (ABI 4).
 * Every cache_id below is such an id, never a position unless the two agree. */
int32_t drt_dataset_open(drt_runtime *runtime, const char *const *paths, const uint64_t *path_lens,
                         uint32_t path_count, const drt_reader_options *options, drt_dataset **out);
/* Releases the caller's reference; iterators hold their own, so the caches
 * close when the last iterator is destroyed too. */
void drt_dataset_destroy(drt_dataset *dataset);
/* Samples the next iterator yields: the epoch length (default: the active rows),
 * or the rest of the epoch a loaded state stopped in. */
int32_t drt_dataset_len(drt_dataset *dataset, uint64_t *out);
/* Sets the epoch length (>= 1); kept when the table is replaced. DRT_ERR_STATE
 * when a loaded state stops inside an epoch of another length. */
int32_t drt_dataset_set_epoch_len(drt_dataset *dataset, uint64_t epoch_len);

/* ---- Mixing caches without replacement (added within ABI 4) ------------
 * A mix gives each cache an exact count of samples per epoch; the epoch is one
 * keyed permutation of that multiset (docs/determinism.md, "Mixing"). */
#define DRT_MIX_REPEAT 1u     /* value: r, finite > 0; k = floor(r * n + 1/2) */
#define DRT_MIX_CHOOSE 2u     /* count: k >= 1 */
#define DRT_MIX_PROPORTION 3u /* value: p in (0, 1]; k from p * epoch_len */
typedef struct drt_mix_entry {
    uint32_t cache; /* the cache's position in the paths given to drt_dataset_open */
    uint32_t form;  /* DRT_MIX_REPEAT, DRT_MIX_CHOOSE or DRT_MIX_PROPORTION */
    double value;   /* repeat's or proportion's value */
    uint64_t count; /* choose's count */
} drt_mix_entry;
/* Installs a mix (entry_count 0: none) on a dataset opened with shuffle and
 * without_replacement whose table has equal weights; resets the stream like a
 * new table. Every entry repeat/choose (a cache not listed repeats once; no
 * explicit epoch length allowed) or every cache a proportion (summing to 1
 * within 1e-9; drt_dataset_set_epoch_len first, which later recomputes the
 * counts). Kept, recomputed, across drt_dataset_set_table. */
int32_t drt_dataset_set_mix(drt_dataset *dataset, const drt_mix_entry *entries,
                            uint64_t entry_count);
/* Each cache's count per epoch under the current mix; *mixed_out 0 (counts 0)
 * without one. cache_count must be the dataset's. */
int32_t drt_dataset_mix_counts(drt_dataset *dataset, uint64_t *counts_out, uint32_t cache_count,
                               uint32_t *mixed_out);
/* The counts `entries` give caches of row_counts active rows (epoch_len 0: none
 * set), with the checks and messages of drt_dataset_set_mix. */
int32_t drt_mix_counts(const drt_mix_entry *entries, uint64_t entry_count,
                       const uint64_t *row_counts, uint32_t cache_count, uint64_t epoch_len,
                       uint64_t *counts_out);
/* The (cache, row within the cache) at stream positions start .. start+count-1 of
 * a mix of these per-cache counts over caches of row_counts rows. */
int32_t drt_mix_rows(uint64_t seed, const uint64_t *counts, const uint64_t *row_counts,
                     uint32_t cache_count, uint64_t start, uint64_t count, uint32_t *caches_out,
                     uint64_t *rows_out);

/* Core-owned bytes; release with drt_buffer_release. */
typedef struct drt_buffer {
    const uint8_t *data;
    uint64_t len;
} drt_buffer;
void drt_buffer_release(drt_buffer *buffer);

/* The stored metadata schema as JSON, in name order:
 * [{"name": ..., "kind": "bool"|"int"|"float"|"string",
 *   "arrow_type": "bool"|"int64"|"float64"|"utf8"}, ...]
 * (arrow_type: the column's type in the metadata table, as drt_dataset_set_table names it). */
int32_t drt_dataset_schema_json(drt_dataset *dataset, drt_buffer **out);

/* The active table as an Arrow IPC file:
 * cache_id int64 | sample_id int64 | <stored columns by name> | weight float64. */
int32_t drt_dataset_metadata_arrow(drt_dataset *dataset, drt_buffer **out);

/* The Arrow C data interface's structs, as its specification defines them
 * (https://arrow.apache.org/docs/format/CDataInterface.html); the guards let
 * another header that defines them come first. */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};
#endif

/* The active table as an Arrow C stream of one struct batch (then the end):
 * cache_id uint64 | sample_id uint64 | <stored columns by name> | weight float64,
 * no nulls; bool columns are "b", int "l", float "g", string "U" (large_utf8).
 * The stream owns copies of the columns, shared with whatever imports them
 * without another copy, and valid after drt_dataset_destroy until the stream,
 * the batch's array (and any child moved out of it) and every schema from
 * get_schema are released, in any order, from any thread. On failure *out is
 * untouched. */
int32_t drt_dataset_metadata_arrow_stream(drt_dataset *dataset, struct ArrowArrayStream *out);

/* An Arrow integer column widened to 64 bits, with its optional validity bitmap. */
typedef struct drt_int_column {
    const uint64_t *values;
    const uint8_t *validity; /* NULL: no nulls */
    uint64_t validity_offset; /* in bits */
    uint32_t is_signed;      /* values are int64 (1) or uint64 (0) */
    uint32_t reserved;
} drt_int_column;

typedef struct drt_float_column {
    const double *values;
    const uint8_t *validity;
    uint64_t validity_offset;
} drt_float_column;

/*
 * Replaces the active table. columns_json lists every column of the caller's
 * frame as a JSON array of [name, arrow_type] pairs (arrow_type: "int64",
 * "uint32", "float64", "bool", "utf8", "large_utf8", ...). The core checks the
 * columns, identities and weights, builds the sampler, then swaps the table and
 * resets the stream position; on any error nothing changes.
 */
int32_t drt_dataset_set_table(drt_dataset *dataset, const char *columns_json, uint64_t row_count,
                              const drt_int_column *cache_ids, const drt_int_column *sample_ids,
                              const drt_float_column *weights);

/* One metadata column of a batch, in schema (name) order; kind is
 * 0 bool (uint8_t 0/1 values), 1 int (int64_t), 2 float (double), 3 string
 * (sample i: bytes[offsets[i] .. offsets[i+1]], UTF-8).
 * A string column may also be coded: then distinct > 0 and values points to
 * one uint32_t code per sample, equal strings sharing a code and codes
 * numbered 0 .. distinct-1 in order of first occurrence (the core codes a
 * column when at most a quarter of its samples' strings are distinct); else
 * distinct is 0 and values NULL. */
typedef struct drt_batch_column {
    uint32_t kind;
    uint32_t distinct;
    const void *values;
    const uint64_t *offsets;
    const uint8_t *bytes;
} drt_batch_column;

/* One batch of samples, in planned order. */
typedef struct drt_batch {
    uint64_t count;
    const uint8_t *payloads;          /* sample i: payloads[payload_offsets[i] .. payload_offsets[i+1]] */
    const uint64_t *payload_offsets;  /* count + 1 entries */
    const uint8_t *metadata_json;     /* sample i: canonical JSON object of its metadata row */
    const uint64_t *metadata_offsets; /* count + 1 entries */
    const uint64_t *cache_ids;        /* each sample's cache_id (uint64_t since ABI 4) */
    const uint64_t *sample_ids;
    uint64_t column_count;            /* the metadata schema's fields */
    const drt_batch_column *columns;  /* the same metadata, by column */
    const uint8_t *packed;            /* all of the above but payloads and JSON, in one buffer: */
    uint64_t packed_len;              /* a binding copies it in one call (layout below) */
} drt_batch;

/* drt_batch.packed: native-endian integers; every part is zero-padded to a
 * multiple of 8 bytes, so each starts 8-aligned relative to the buffer. The
 * buffer lies in the payloads' own, at payloads + payload_bytes rounded up to a
 * multiple of 8 (ABI 3): a binding may copy the payloads and packed in one call.
 *   head:        u64 count, column_count, payload_bytes (payload_offsets[count]),
 *                deferred (1 when drt_batch_deferred gives lengths, else 0),
 *                skipped (drt_batch_skipped's count; ABI 3)
 *   per column:  u64 kind, distinct, values_len, offsets_len, bytes_len (in bytes)
 *   u64 payload lengths[count]; u64 sample_ids[count]; u64 cache_ids[count] (ABI 4)
 *   per column:  values (values_len bytes: bool u8, int i64, float f64, or a
 *                string column's u32 codes when distinct > 0), then offsets
 *                (offsets_len bytes: u64, string columns only), then bytes
 *                (bytes_len bytes of UTF-8, string columns only)
 *   drt_skipped skipped[skipped] (ABI 3). */

/* Snapshots the active table, weights and epoch length, takes the next epoch of
 * the stream (or, after drt_dataset_load_state, the rest of the epoch the state
 * stopped in) and starts reading ahead (at most min(num_workers, prefetch_size)
 * reads in flight). */
int32_t drt_iterator_create(drt_dataset *dataset, drt_iterator **out);
/* defer_payload_bytes: the core's own threshold (64 KiB), where one copy from
 * the file costs less than a copy into a batch and another out of it. */
#define DRT_DEFER_DEFAULT UINT64_MAX
/* Like drt_iterator_create, but each uncompressed payload of at least
 * defer_payload_bytes bytes (0: none; DRT_DEFER_DEFAULT: the core's) is left in its shard instead of being
 * copied into a batch: its span in payloads is empty, drt_batch_deferred gives
 * its length, and drt_iterator_read_deferred copies it into the caller's own
 * memory, one copy from the file. Its record's metadata is still read and
 * verified ahead, and the kernel is asked to start reading the payload. */
int32_t drt_iterator_create_deferring(drt_dataset *dataset, uint64_t defer_payload_bytes,
                                      drt_iterator **out);
/* ---- Ranks, workers and resume ----------------------------------------
 *
 * A stream position p belongs to epoch e when the epoch's first position is
 * epoch_start and epoch_start <= p < epoch_start + epoch_len. The dataset keeps
 * the next iterator's place: drt_dataset_position (cheap) or drt_dataset_state
 * (with the fingerprint of the data: manifest SHA-256s, table digest, seed,
 * shuffle, algorithm; docs/determinism.md). */

typedef struct drt_stream_position {
    uint64_t epoch;       /* epochs begun before this one since the table was installed */
    uint64_t epoch_start; /* stream position of the epoch's first sample */
    uint64_t epoch_len;
    uint64_t position;    /* the next unconsumed position */
} drt_stream_position;

#define DRT_ALGORITHM_NAME_BYTES 64

typedef struct drt_stream_state {
    drt_stream_position at;
    uint64_t seed;
    uint32_t shuffle;
    uint32_t cache_count;
    uint8_t table_sha256[32];                 /* the active table's digest */
    char algorithm[DRT_ALGORITHM_NAME_BYTES]; /* NUL-terminated sampling algorithm name */
} drt_stream_state;

/* A share: one reader's part of an epoch among world_size ranks and num_workers
 * DataLoader workers (a shard, by contrast, is a file of a cache). Global step g
 * gives rank r the positions
 * g*world_size*batch_size + r*batch_size .. + batch_size of the epoch's rest, and
 * a rank's k-th batch belongs to worker k % num_workers. Without drop_last, one
 * rank's last batch may be short; with several ranks the last step is filled
 * with the positions after the epoch. With drop_last only full steps are read.
 * Limits: batch_size 1..2^31, world_size 1..2^20, num_workers 1..2^12.
 * drt_share and drt_share_counts, drt_iterator_create_share and drt_share_count
 * were added within ABI 3 under these names; the former names stay as aliases. */
typedef struct drt_share {
    uint64_t batch_size;
    uint32_t rank;
    uint32_t world_size;
    uint32_t worker;
    uint32_t num_workers;
    uint32_t drop_last; /* 0 or 1 */
    uint32_t reserved;
} drt_share;

typedef struct drt_share_counts {
    uint64_t steps;          /* global steps: batches each rank yields */
    uint64_t rank_samples;   /* samples the share's rank yields */
    uint64_t worker_batches; /* batches the share's worker yields */
    uint64_t worker_samples; /* samples the share's worker yields */
} drt_share_counts;

/* Deprecated: the former names of drt_share and drt_share_counts (the same
 * types), kept until ABI 4. */
typedef struct drt_share drt_shard;
typedef struct drt_share_counts drt_shard_counts;

/* The SHA-256 of each cache's manifest.json as read when the dataset was opened,
 * 32 bytes per cache in the order of drt_dataset_open's paths; cache_count must
 * be the dataset's. */
int32_t drt_dataset_cache_sha256s(drt_dataset *dataset, uint8_t *out, uint32_t cache_count);
/* The cache_id of each cache, in the order of drt_dataset_open's paths;
 * cache_count must be the dataset's (ABI 4). */
int32_t drt_dataset_cache_ids(drt_dataset *dataset, uint64_t *out, uint32_t cache_count);
/* Describes cache cache_index (in the order of drt_dataset_open's paths) from the
 * manifest the dataset opened, in a core-owned buffer holding the JSON object
 * drt_cache_info gives for a folder; for a remote cache, the version opened,
 * with no request. DRT_ERR_OUT_OF_RANGE past the last cache (ABI 4). */
int32_t drt_dataset_cache_info(drt_dataset *dataset, uint32_t cache_index, drt_buffer **out);
/* Where the next iterator starts. */
int32_t drt_dataset_position(drt_dataset *dataset, drt_stream_position *out);
/* Where the next iterator starts, with the fingerprint (the table digest costs
 * O(rows) the first time a table is asked for it). */
int32_t drt_dataset_state(drt_dataset *dataset, drt_stream_state *out);
/* Like drt_dataset_state, and moves the stream past that epoch as an iterator
 * would: for a process that hands the epoch to other processes to read (each
 * loads the state into its own dataset and creates its share's iterator). */
int32_t drt_dataset_take_state(drt_dataset *dataset, drt_stream_state *out);
/* Continues the stream from a state: the next iterator yields the rest of its
 * epoch (nothing is skipped or repeated), the one after the next epoch. Refused
 * with DRT_ERR_INVALID_ARGUMENT and a message naming what differs unless
 * cache_sha256s (cache_count digests of 32 bytes, in the order of the paths), the table
 * digest, seed, shuffle, algorithm and epoch_len match this dataset; nothing
 * changes then. */
int32_t drt_dataset_load_state(drt_dataset *dataset, const drt_stream_state *state,
                               const uint8_t *cache_sha256s, uint32_t cache_count);
/* Makes epoch `epoch` the next one, from its start (epoch_start = epoch * the
 * current epoch length): the stream as if every epoch since the table was
 * installed had that length. */
int32_t drt_dataset_set_epoch(drt_dataset *dataset, uint64_t epoch);
/* Like drt_iterator_create_deferring, reading only `share` of the epoch (see
 * drt_share) without its first `skip` samples. */
int32_t drt_iterator_create_share(drt_dataset *dataset, const drt_share *share, uint64_t skip,
                                  uint64_t defer_payload_bytes, drt_iterator **out);
/* An iterator over the `count` samples (cache_ids[i], sample_ids[i]), in that
 * order, read and checked like the stream's (embedded metadata compared with the
 * index, lz4 decoded), on the runtime's threads; any sample of the caches, in the
 * active table or not. The stream does not move, and the iterator has no stream
 * position (drt_iterator_state and drt_iterator_span return DRT_ERR_STATE). An
 * identity that names no sample fails with DRT_ERR_OUT_OF_RANGE before anything
 * is read. (ABI 2) */
int32_t drt_iterator_create_reads(drt_dataset *dataset, const uint64_t *cache_ids,
                                  const uint64_t *sample_ids, uint64_t count,
                                  uint64_t defer_payload_bytes, drt_iterator **out);
/* The state the iterator's share was cut from: the rest of the epoch as it
 * stood when the iterator was created. With the same share, loading it and
 * skipping the samples already consumed continues this iterator exactly. */
int32_t drt_iterator_span(const drt_iterator *iterator, drt_stream_state *out);
/* The state after the iterator's first `consumed` samples (the next epoch once
 * all are consumed), for an iterator that reads its epoch in order (one rank,
 * one worker); DRT_ERR_STATE for a share of several. */
int32_t drt_iterator_state(const drt_iterator *iterator, uint64_t consumed, drt_stream_state *out);
/* How `span_len` positions divide among the share's ranks and workers. */
int32_t drt_share_count(uint64_t span_len, const drt_share *share, drt_share_counts *out);
/* The position after `steps` global steps of the share's layout over the rest of
 * the epoch `span` starts in (the next epoch after the last step). */
int32_t drt_stream_after_steps(const drt_stream_position *span, const drt_share *share,
                               uint64_t steps, drt_stream_position *out);
/* Deprecated: the former names of drt_iterator_create_share and
 * drt_share_count (the same functions), kept until ABI 4. */
int32_t drt_iterator_create_shard(drt_dataset *dataset, const drt_share *share, uint64_t skip,
                                  uint64_t defer_payload_bytes, drt_iterator **out);
int32_t drt_shard_count(uint64_t span_len, const drt_share *share, drt_share_counts *out);

/* Next batch in planned order; *out is NULL at the end of the epoch. */
int32_t drt_iterator_next(drt_iterator *iterator, drt_batch **out);
/* *lengths_out: count entries; entry i is the length of sample i's deferred
 * payload, or 0 when its payload is in the batch. NULL when the batch deferred
 * none. Valid until the batch is released. */
int32_t drt_batch_deferred(const drt_batch *batch, const uint64_t **lengths_out);
/* Reads the deferred payload of sample `sample` of a batch this iterator
 * returned into destination, which must hold its length (drt_batch_deferred).
 * Returns when the payload is there (a large one is read in pieces by the
 * calling thread and the pool's workers together); may be repeated. */
int32_t drt_iterator_read_deferred(drt_iterator *iterator, const drt_batch *batch,
                                   uint64_t sample, void *destination);
/* Reads every deferred payload of a batch this iterator returned at once:
 * destinations has count entries, entry i holding sample i's deferred payload
 * length (it is ignored, and may be NULL, for a sample without one). The
 * calling thread and the pool's workers share the reading; returns when every
 * payload is there, or with the first error once no read is running. */
int32_t drt_iterator_read_deferred_batch(drt_iterator *iterator, const drt_batch *batch,
                                         void *const *destinations);
void drt_batch_release(drt_batch *batch);

/* ---- Mapped payloads ---------------------------------------------------
 * Added within ABI 3 (new functions only). With DRT_PAYLOADS_MAPPED, iterators
 * created afterwards (drt_iterator_create_deferring, _share, _reads) check each
 * deferred payload against its record's checksum in place, in a read-only
 * mapping of its shard, while the pool reads its chunk ahead of the consumer;
 * drt_batch_mapped then gives its address. No copy is made. */
#define DRT_PAYLOADS_COPY 0u   /* deferred payloads are read with drt_iterator_read_deferred* (default) */
#define DRT_PAYLOADS_MAPPED 1u /* deferred payloads are checked and handed out in place */
typedef struct drt_mapping drt_mapping;
int32_t drt_dataset_set_payloads(drt_dataset *dataset, uint32_t mode);
/* *addresses_out and *mappings_out: count entries each (NULL when the batch
 * mapped no payload); entry i is the address of sample i's deferred payload
 * (drt_batch_deferred gives its length) and the mapping holding it, or NULL
 * for a sample whose payload is in the batch. The address is readable while
 * the batch, or a reference to its mapping, is held. Valid until the batch is
 * released. */
int32_t drt_batch_mapped(const drt_batch *batch, const uint8_t *const **addresses_out,
                         drt_mapping *const **mappings_out);
/* Takes a reference to a mapping, which keeps its bytes readable (also after the
 * batch, the iterator and the dataset are gone) until drt_mapping_release;
 * *base_out and *len_out receive the whole shard's bytes. A shard shortened on
 * disk while it is mapped ends the process (SIGBUS) when its missing bytes are
 * read. */
int32_t drt_mapping_retain(drt_mapping *mapping, const uint8_t **base_out, uint64_t *len_out);
void drt_mapping_release(drt_mapping *mapping);

/* Bytes of samples read ahead and held by the iterator (not yet handed out). */
uint64_t drt_iterator_bytes_held(const drt_iterator *iterator);
/* Cancels read-ahead, waits for running reads and frees the iterator. */
void drt_iterator_destroy(drt_iterator *iterator);

/* ---- Codec utilities (the same code the cache uses) ------------------- */

/* The most bytes an LZ4 block of source_len bytes can take; 0 when source_len is
 * above the largest block input, 0x7E000000 bytes (as LZ4_compressBound). */
uint64_t drt_lz4_compress_bound(uint64_t source_len);
/* Writes one LZ4 block; *written receives its length. */
int32_t drt_lz4_compress(const uint8_t *source, uint64_t source_len, uint8_t *destination,
                         uint64_t destination_len, uint64_t *written);
/* Decodes one LZ4 block that must fill destination exactly. */
int32_t drt_lz4_decompress(const uint8_t *source, uint64_t source_len, uint8_t *destination,
                           uint64_t destination_len);
/* Rows drawn at stream positions start .. start+count-1 by the shuffled sampler for
 * `weights` (in row order) and `seed` (see docs/determinism.md). */
int32_t drt_sampler_draws(const double *weights, uint64_t n, uint64_t seed, uint64_t start,
                          uint64_t count, uint64_t *rows_out);
/* DRT_OK when `ratio` fits `compression` (DRT_COMPRESSION_*): exactly 1.0 with
 * none, positive and finite with lz4; else DRT_ERR_INVALID_ARGUMENT saying why
 * (the check drt_writer_create makes). (ABI 2) */
int32_t drt_check_compression(uint32_t compression, double ratio);
/* *out = 1 when `path` is a published cache (a directory holding manifest.json,
 * which the writer puts in place last), else 0; the cache's validity is checked
 * when it is opened. (ABI 2) */
int32_t drt_cache_published(const char *path, uint64_t path_len, uint32_t *out);
/* The cache at `path` described from its manifest.json alone (checked as
 * drt_dataset_open checks it; no other file is opened), as a JSON object in a
 * core-owned buffer released with drt_buffer_release: format_version,
 * source_name, sample_count, shard_count, shard_bytes (the shard files' total),
 * payload_bytes_uncompressed, compression ([{"algo", "ratio"}, ...]: each
 * setting of the shards once), record_checksums (true when records.crc32c is
 * listed) and metadata_schema (as drt_dataset_schema_json gives it). A folder
 * without a manifest, or a manifest that is not valid, is DRT_ERR_INVALID_CACHE
 * with the reader's message. (Added within ABI 3.) */
int32_t drt_cache_info(const char *path, uint64_t path_len, drt_buffer **out);
/* Rows at stream positions start .. start+count-1 of a shuffled table of n rows read
 * without replacement (each epoch of n positions a permutation; docs/determinism.md). */
int32_t drt_permutation_rows(uint64_t n, uint64_t seed, uint64_t start, uint64_t count,
                             uint64_t *rows_out);
void drt_sha256(const uint8_t *data, uint64_t len, uint8_t out[32]);

/* ---- Corrupt records (ABI 3) ------------------------------------------- */

#define DRT_ON_CORRUPT_RAISE 0u /* a corrupt record fails the read (the default) */
#define DRT_ON_CORRUPT_SKIP 1u  /* it is left out of its batch and listed there */

/* What iterators created afterwards by drt_iterator_create* (not _reads, which
 * always fail) do with a sample whose record fails its checks (DRT_ERR_INVALID_CACHE:
 * checksum, placement, framing, embedded metadata, LZ4). With SKIP the sample
 * still takes its stream position, so states and resumes are unchanged; payloads
 * are then never deferred (drt_batch_deferred gives NULL). I/O errors still fail. */
int32_t drt_dataset_set_on_corrupt(drt_dataset *dataset, uint32_t policy);

/* A sample left out of a batch: it stood before the batch's sample `at`
 * (at == count: after the last one). */
typedef struct drt_skipped {
    uint64_t at;
    uint64_t sample_id;
    uint64_t cache_id; /* uint64_t since ABI 4 */
} drt_skipped;

/* *count_out samples were left out of this batch, listed in stream order at
 * *skipped_out (NULL when none; owned by the batch). */
int32_t drt_batch_skipped(const drt_batch *batch, uint64_t *count_out, const drt_skipped **skipped_out);

/* ---- Verify: scrub a whole cache (ABI 3) ------------------------------- */

typedef struct drt_verifier drt_verifier;

/* One problem found. The strings belong to the verifier (not NUL-terminated). */
typedef struct drt_problem {
    const char *file;     /* relative to the cache ("shards/000003.bin"); "" for the cache itself */
    uint64_t file_len;
    const char *message;
    uint64_t message_len;
    uint64_t sample_id;   /* valid when has_sample */
    uint64_t offset;      /* the record's offset in its shard; valid when has_offset */
    uint32_t has_sample;
    uint32_t has_offset;
} drt_problem;

/* A scrub of the cache at `path`, run by drt_verify_run on the runtime's threads
 * and the calling thread. Nothing is read before drt_verify_run. */
int32_t drt_verify_create(drt_runtime *runtime, const char *path, uint64_t path_len,
                          drt_verifier **out);
/* Checks everything and returns when done: every listed file's existence, length
 * and SHA-256; then, if the cache opens, every record as reads check it (index
 * bounds and placement, record checksum, embedded metadata against
 * metadata.arrow, LZ4 blocks decoding to their stated size) and each shard's
 * payload total. Problems found are not errors: DRT_OK, and drt_verify_problem
 * lists them. Another thread may poll drt_verify_progress meanwhile. */
int32_t drt_verify_run(drt_verifier *verifier);
/* Bytes read so far and in all (both passes); thread-safe, any time. */
int32_t drt_verify_progress(const drt_verifier *verifier, uint64_t *bytes_done,
                            uint64_t *bytes_total);
/* After drt_verify_run: problems kept (at most 10,000) and found in all. */
int32_t drt_verify_problem_count(const drt_verifier *verifier, uint64_t *kept, uint64_t *total);
int32_t drt_verify_problem(const drt_verifier *verifier, uint64_t index, drt_problem *out);
void drt_verify_destroy(drt_verifier *verifier);

/* ---- Writers at work (added within ABI 4) ------------------------------ */

/* *active = 1 when a writer of the cache source_name under base_dir holds its lock
 * right now (it is writing, or replacing or migrating that cache), else 0. The call
 * tries a shared lock on base_dir/tmp/<source_name>.lock and drops it at once: it
 * cannot be had while a writer holds its exclusive lock, and a writer trying to take
 * the lock meanwhile waits (or, trying once, is told it is held) for no longer than
 * these two calls. No lock file, or no base_dir, is 0; a lock file a killed writer
 * left behind is not held, so 0. source_name must be a valid cache name
 * (drt_check_source_name), else DRT_ERR_INVALID_ARGUMENT; a lock file that cannot be
 * opened or locked is DRT_ERR_IO. *active is set only on success. */
int32_t drt_cache_writer_active(const char *base_dir, uint64_t base_dir_len, const char *source_name,
                                uint64_t source_name_len, uint32_t *active);

/* ---- Open shard files (added within ABI 4) ------------------------------ */

/* The process holds at most this many shard files open, for every cache of every
 * dataset together (default 64): a shard's file opens when a read needs it and
 * closes when room is needed for another, never while a read uses it. Files above
 * a lowered maximum close now unless in use. 0 is DRT_ERR_INVALID_ARGUMENT. */
int32_t drt_set_max_open_shards(uint32_t max);

typedef struct drt_open_shards_stats {
    uint64_t open;      /* shard files open now */
    uint64_t max;       /* the maximum (drt_set_max_open_shards) */
    uint64_t opens;     /* files opened since the process started (or forked) */
    uint64_t evictions; /* files closed to make room for another */
} drt_open_shards_stats;

int32_t drt_open_shards_stats_get(drt_open_shards_stats *out);

/* ---- Remote caches: the fetch hook (added within ABI 4) ---------------- */

#define DRT_FETCH_OK 0        /* the file was written to dest_path */
#define DRT_FETCH_NOT_FOUND 1 /* the object does not exist */
#define DRT_FETCH_FAILED 2    /* any other failure, described in `message` */

/* Fetches the file `name` ("manifest.json", "index.bin", "metadata.arrow",
 * "records.crc32c", "shards/000017.bin") of the remote cache at `url` into the new
 * file `dest_path`, which the function creates (the core chose a temporary name
 * there and renames it only after checking the file against the manifest). Every
 * string is also NUL-terminated. Returns DRT_FETCH_OK, DRT_FETCH_NOT_FOUND, or
 * DRT_FETCH_FAILED after writing a NUL-terminated message of at most message_cap
 * bytes; retries are the function's own. May be called from several threads at
 * once, never twice at once for one file of one local folder. */
typedef int32_t (*drt_fetch_fn)(void *context, const char *url, uint64_t url_len, const char *name,
                                uint64_t name_len, const char *dest_path, uint64_t dest_path_len,
                                char *message, uint64_t message_cap);

typedef struct drt_remote drt_remote;

/* A fetch hook calling `fetch` with `context`, keeping each remote cache in a folder
 * of its own under local_dir (created if missing): <16 hex of SHA-256(url)>-<16 hex
 * of SHA-256(manifest.json)>. */
int32_t drt_remote_create(drt_fetch_fn fetch, void *context, const char *local_dir,
                          uint64_t local_dir_len, drt_remote **out);
/* Releases the caller's reference; datasets opened through it keep it alive. */
void drt_remote_destroy(drt_remote *remote);

/* Bytes of shards the local folders of caches read through `remote` may hold at
 * most (0: no limit, the default); set before opening datasets through it. */
int32_t drt_remote_set_budget(drt_remote *remote, uint64_t budget_bytes);
/* Shard downloads at once through `remote`, ahead of the stream or for a read
 * that needs the shard now (default 4; 0 is DRT_ERR_INVALID_ARGUMENT); set before
 * opening datasets through it. */
int32_t drt_remote_set_max_in_flight(drt_remote *remote, uint32_t max_in_flight);
/* 1 (the default): every open of a remote cache fetches its manifest.json to
 * learn which version the URL holds. 0: a cache whose version last fetched into
 * `local_dir` is still there opens from it without a request (shards it lacks
 * are still fetched). Other values are DRT_ERR_INVALID_ARGUMENT; set before
 * opening datasets through it. */
int32_t drt_remote_set_revalidate(drt_remote *remote, int32_t revalidate);
/* Has every later open through `remote` of the cache at `url` (url_len bytes)
 * read the version whose manifest.json has SHA-256 `manifest_sha256` (32 bytes,
 * as drt_dataset_cache_sha256s gives it): from its folder in `local_dir`, without
 * a request, while the folder holds it, whatever drt_remote_set_revalidate says;
 * else the open fetches the manifest as it would unpinned. A later call for the
 * same URL replaces the version. For reopening a dataset in another process. */
int32_t drt_remote_pin_version(drt_remote *remote, const char *url, uint64_t url_len,
                               const uint8_t *manifest_sha256);

typedef struct drt_remote_stats {
    uint64_t fetched_files;       /* files the fetch function delivered (every attempt) */
    uint64_t fetched_bytes;       /* their bytes */
    uint64_t shards_fetched;      /* shards checked and put in place */
    uint64_t shard_bytes_fetched; /* their bytes */
    uint64_t refetches;           /* files fetched again after failing their check */
    uint64_t evicted_shards;      /* shards deleted to stay within the budget */
    uint64_t evicted_bytes;       /* their bytes */
    uint64_t reserved[2];         /* 0 */
} drt_remote_stats;

int32_t drt_remote_stats_get(const drt_remote *remote, drt_remote_stats *out);

/* drt_dataset_open, where a path that starts with s3://, http:// or https:// names a
 * cache in object storage read through `remote`: its manifest, index, metadata and
 * record checksums are fetched (unless its folder holds them) and checked at open,
 * each shard when a read first needs it, checked against its SHA-256 before any of
 * its bytes is read. `remote` may be NULL only when no path is remote
 * (DRT_ERR_INVALID_ARGUMENT naming the path). A failed fetch fails the open or the
 * read with DRT_ERR_IO and the function's message; so does a shard that fails its
 * check twice (the message names both digests). A listed file the function says
 * does not exist, or no manifest, is DRT_ERR_INVALID_CACHE. */
int32_t drt_dataset_open_remote(drt_runtime *runtime, const char *const *paths,
                                const uint64_t *path_lens, uint32_t path_count,
                                const drt_reader_options *options, drt_remote *remote,
                                drt_dataset **out);
/* drt_verify_create for the remote cache at `url` (s3://, http://, https://, else
 * DRT_ERR_INVALID_ARGUMENT): drt_verify_run first brings every file of the cache
 * into its folder through `remote` (as drt_dataset_open_remote and reads would, each
 * checked as it is fetched; a file that cannot be fetched is a problem), then
 * scrubs the folder; a shard whose local copy does not match the manifest is
 * deleted and fetched again rather than reported. Problems name files relative
 * to the cache. */
int32_t drt_verify_create_remote(drt_runtime *runtime, const char *url, uint64_t url_len,
                                 drt_remote *remote, drt_verifier **out);

#ifdef __cplusplus
}
#endif

#endif /* DATASET_RT_H */
