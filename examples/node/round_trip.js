// Writes a small cache through DatasetRT's C ABI and reads it back, from Node.js.
//
// Only the functions of zig/include/dataset_rt.h are used, declared below with
// koffi (a foreign function interface for Node, no compiler needed):
//
//     npm ci --prefix examples/node
//     node examples/node/round_trip.js /tmp/caches path/to/libdataset_rt.so
//
// (or the library in $DATASET_RT_LIBRARY). The program writes six samples
// (payload bytes; metadata `id`, an integer, and `label`, a string) to
// <base_dir>/node_example, reads them back in table order and shuffled, compares
// every payload, the metadata JSON and the metadata columns with what it wrote,
// checks that failures come back as a status code with a message from
// drt_last_error(), prints one line and exits 0; on any mismatch it prints what
// differs and exits 1.
'use strict';

const path = require('path');
const koffi = require('koffi');

// ---- The header's declarations, in koffi's C-like syntax -------------------------

const DRT_ABI_VERSION = 4;
const DRT_OK = 0;
const DRT_ERR_INVALID_ARGUMENT = 1;
const DRT_ERR_INVALID_CACHE = 3;
const DRT_ERR_ALREADY_EXISTS = 6;
const DRT_COMPRESSION_NONE = 0;
const DRT_COMPRESSION_LZ4 = 1;
const KIND_INT = 1;
const KIND_STRING = 3;

function declare(libraryPath) {
    const lib = koffi.load(libraryPath);

    // Opaque handles: only ever behind a pointer.
    koffi.opaque('drt_runtime');
    koffi.opaque('drt_writer');
    koffi.opaque('drt_dataset');
    koffi.opaque('drt_iterator');

    koffi.struct('drt_writer_options', {
        max_shard_bytes: 'uint64_t',
        batches_in_flight_max: 'uint32_t',
        compression: 'uint32_t',
        compression_ratio: 'double',
        format_version: 'uint32_t', // 2 or 3 (0 means 2)
        reserved: 'uint32_t',
    });
    koffi.struct('drt_reader_options', {
        seed: 'uint64_t',
        prefetch_size: 'uint32_t',
        shuffle: 'uint32_t',
        validate_cache: 'uint32_t',
        without_replacement: 'uint32_t',
    });
    // Batches are read through their pointer (koffi.decode), so the pointer
    // members stay plain addresses here.
    const batchColumn = koffi.struct('drt_batch_column', {
        kind: 'uint32_t',
        distinct: 'uint32_t',
        values: 'void *',
        offsets: 'void *',
        bytes: 'void *',
    });
    const batch = koffi.struct('drt_batch', {
        count: 'uint64_t',
        payloads: 'void *',
        payload_offsets: 'void *',
        metadata_json: 'void *',
        metadata_offsets: 'void *',
        cache_ids: 'void *',
        sample_ids: 'void *',
        column_count: 'uint64_t',
        columns: 'void *',
        packed: 'void *',
        packed_len: 'uint64_t',
    });

    return {
        batch,
        batchColumn,
        abi_version: lib.func('uint32_t drt_abi_version(void)'),
        last_error: lib.func('const char *drt_last_error(void)'),
        runtime_create: lib.func('int32_t drt_runtime_create(uint32_t num_workers, _Out_ drt_runtime **out)'),
        runtime_destroy: lib.func('void drt_runtime_destroy(drt_runtime *runtime)'),
        writer_create: lib.func(
            'int32_t drt_writer_create(drt_runtime *runtime, const char *base_dir, uint64_t base_dir_len, ' +
            'const char *source_name, uint64_t source_name_len, const drt_writer_options *options, ' +
            '_Out_ drt_writer **out)'),
        writer_push: lib.func(
            'int32_t drt_writer_push(drt_writer *writer, const uint8_t *payloads, uint64_t payloads_len, ' +
            'const uint64_t *payload_lens, uint64_t count, const uint8_t *metadata_json, uint64_t metadata_json_len)'),
        writer_finish: lib.func('int32_t drt_writer_finish(drt_writer *writer)'),
        writer_path: lib.func('const char *drt_writer_path(const drt_writer *writer)'),
        writer_destroy: lib.func('void drt_writer_destroy(drt_writer *writer)'),
        dataset_open: lib.func(
            'int32_t drt_dataset_open(drt_runtime *runtime, const char **paths, const uint64_t *path_lens, ' +
            'uint32_t path_count, const drt_reader_options *options, _Out_ drt_dataset **out)'),
        dataset_len: lib.func('int32_t drt_dataset_len(drt_dataset *dataset, _Out_ uint64_t *out)'),
        dataset_destroy: lib.func('void drt_dataset_destroy(drt_dataset *dataset)'),
        iterator_create: lib.func('int32_t drt_iterator_create(drt_dataset *dataset, _Out_ drt_iterator **out)'),
        iterator_next: lib.func('int32_t drt_iterator_next(drt_iterator *iterator, _Out_ void **out)'),
        iterator_destroy: lib.func('void drt_iterator_destroy(drt_iterator *iterator)'),
        batch_release: lib.func('void drt_batch_release(void *batch)'),
        permutation_rows: lib.func(
            'int32_t drt_permutation_rows(uint64_t n, uint64_t seed, uint64_t start, uint64_t count, uint64_t *rows_out)'),
    };
}

// ---- Small helpers ---------------------------------------------------------------

let drt; // the declared functions, once the library is loaded

class Mismatch extends Error {}

// DRT_OK, or a Mismatch naming the call with the library's message.
function check(status, what) {
    if (status !== DRT_OK) throw new Mismatch(`${what} failed with status ${status}: ${drt.last_error()}`);
}

// A call that must fail with `expected` and say why; returns the message.
function expectFailure(status, expected, what) {
    const message = drt.last_error();
    if (status !== expected) throw new Mismatch(`${what}: status ${status}, expected ${expected} (${message})`);
    if (!message) throw new Mismatch(`${what}: status ${status} but drt_last_error() is empty`);
    return message;
}

// `count` integers of `type` at `pointer`, as Numbers.
function numbers(pointer, type, count) {
    return count === 0 ? [] : Array.from(koffi.decode(pointer, type, count), Number);
}

// A copy of `length` bytes at `pointer` (which may be NULL when length is 0).
function bytes(pointer, length) {
    return length === 0 ? Buffer.alloc(0) : Buffer.from(koffi.view(pointer, length));
}

// ---- The samples -----------------------------------------------------------------

const SAMPLES = [
    { payload: Buffer.from('hello from node'), id: 0, label: 'greeting' },
    { payload: Buffer.alloc(0), id: 1, label: 'empty payload' },
    { payload: Buffer.from(Array.from({ length: 256 }, (_, i) => i)), id: -2, label: 'every byte value' },
    // Compressible payloads, so LZ4 has something to do.
    { payload: Buffer.from('abc'.repeat(1000)), id: 2 ** 40, label: 'caf\u00e9 \u2615' },
    { payload: Buffer.from([0, 1, 2]), id: 4, label: 'say "hi" \\ bye' },
    { payload: Buffer.from(Array.from({ length: 20000 }, (_, i) => Math.floor(i / 100) & 0xff)), id: 5, label: 'repetitive' },
];

// The metadata as the core returns it: canonical JSON, keys sorted.
function metadataJson(sample) {
    return JSON.stringify({ id: sample.id, label: sample.label });
}

// ---- Writing ---------------------------------------------------------------------

function writeCache(runtime, baseDir, name) {
    const options = {
        max_shard_bytes: 256, // small, so the six samples span several shards
        batches_in_flight_max: 4,
        compression: DRT_COMPRESSION_LZ4,
        compression_ratio: 2.0,
        format_version: 2,
        reserved: 0,
    };
    const out = [null];
    check(drt.writer_create(runtime, baseDir, Buffer.byteLength(baseDir), name, Buffer.byteLength(name), options, out),
        'drt_writer_create');
    const writer = out[0];
    try {
        // Two pushes (the core copies the inputs): payloads back to back, their
        // lengths, and a JSON array of flat objects, keys in any order.
        for (let first = 0; first < SAMPLES.length; first += 4) {
            const batch = SAMPLES.slice(first, first + 4);
            const payloads = Buffer.concat(batch.map((s) => s.payload));
            const lens = BigUint64Array.from(batch.map((s) => BigInt(s.payload.length)));
            const metadata = Buffer.from(JSON.stringify(batch.map((s) => ({ label: s.label, id: s.id }))));
            check(drt.writer_push(writer, payloads, payloads.length, lens, batch.length, metadata, metadata.length),
                'drt_writer_push');
        }
        check(drt.writer_finish(writer), 'drt_writer_finish');
        return drt.writer_path(writer);
    } finally {
        drt.writer_destroy(writer); // an unfinished writer's staging directory is removed
    }
}

// ---- Reading ---------------------------------------------------------------------

// Reads one epoch; returns the sample ids in the order read, after checking each
// sample's payload, metadata JSON and metadata columns.
function readCache(runtime, cachePath, shuffle, seed) {
    const options = {
        seed,
        prefetch_size: 4,
        shuffle: shuffle ? 1 : 0,
        validate_cache: 1, // check every SHA-256 of the manifest while opening
        without_replacement: 1, // shuffled: each epoch a permutation of the samples
    };
    const out = [null];
    check(drt.dataset_open(runtime, [cachePath], BigUint64Array.of(BigInt(Buffer.byteLength(cachePath))), 1, options, out),
        'drt_dataset_open');
    const dataset = out[0];
    const order = [];
    try {
        const len = [0];
        check(drt.dataset_len(dataset, len), 'drt_dataset_len');
        if (Number(len[0]) !== SAMPLES.length) {
            throw new Mismatch(`drt_dataset_len says ${len[0]}, ${SAMPLES.length} were written`);
        }
        check(drt.iterator_create(dataset, out), 'drt_iterator_create');
        const iterator = out[0];
        try {
            for (;;) {
                check(drt.iterator_next(iterator, out), 'drt_iterator_next');
                const batch = out[0];
                if (!batch) break; // the end of the epoch
                try {
                    checkBatch(koffi.decode(batch, drt.batch), order);
                } finally {
                    drt.batch_release(batch);
                }
            }
        } finally {
            drt.iterator_destroy(iterator);
        }
    } finally {
        drt.dataset_destroy(dataset);
    }
    return order;
}

function checkBatch(batch, order) {
    const n = Number(batch.count);
    const payloadOffsets = numbers(batch.payload_offsets, 'uint64_t', n + 1);
    const metadataOffsets = numbers(batch.metadata_offsets, 'uint64_t', n + 1);
    const payloads = bytes(batch.payloads, payloadOffsets[n]);
    const metadata = bytes(batch.metadata_json, metadataOffsets[n]);
    const cacheIds = numbers(batch.cache_ids, 'uint64_t', n);
    const sampleIds = numbers(batch.sample_ids, 'uint64_t', n);
    const columnCount = Number(batch.column_count);
    const columns = columnCount === 0 ? [] : koffi.decode(batch.columns, drt.batchColumn, columnCount);
    // Schema order is by name: id (int), label (string).
    if (columns.length !== 2 || columns[0].kind !== KIND_INT || columns[1].kind !== KIND_STRING) {
        throw new Mismatch(`unexpected metadata columns: ${JSON.stringify(columns.map((c) => c.kind))}`);
    }
    const ids = numbers(columns[0].values, 'int64_t', n);
    const labelOffsets = numbers(columns[1].offsets, 'uint64_t', n + 1);
    const labels = bytes(columns[1].bytes, labelOffsets[n]);

    for (let k = 0; k < n; k++) {
        const sampleId = sampleIds[k];
        const expected = SAMPLES[sampleId];
        if (cacheIds[k] !== 0 || expected === undefined) {
            throw new Mismatch(`unexpected identity (cache ${cacheIds[k]}, sample ${sampleId})`);
        }
        const payload = payloads.subarray(payloadOffsets[k], payloadOffsets[k + 1]);
        if (!payload.equals(expected.payload)) {
            throw new Mismatch(`sample ${sampleId}: payload of ${payload.length} bytes differs from the ${expected.payload.length} written`);
        }
        const json = metadata.subarray(metadataOffsets[k], metadataOffsets[k + 1]).toString('utf8');
        if (json !== metadataJson(expected)) {
            throw new Mismatch(`sample ${sampleId}: metadata ${json} differs from ${metadataJson(expected)}`);
        }
        const label = labels.subarray(labelOffsets[k], labelOffsets[k + 1]).toString('utf8');
        if (ids[k] !== expected.id || label !== expected.label) {
            throw new Mismatch(`sample ${sampleId}: columns hold id ${ids[k]} and label ${JSON.stringify(label)}`);
        }
        order.push(sampleId);
    }
}

// ---- Errors come back as a status and a message ----------------------------------

function checkErrors(runtime, baseDir, name) {
    const out = [null];
    expectFailure(drt.runtime_create(0, out), DRT_ERR_INVALID_ARGUMENT, 'drt_runtime_create with 0 workers');

    // The cache exists now: a second writer of the name is refused.
    const options = {
        max_shard_bytes: 1 << 20, batches_in_flight_max: 4, compression: DRT_COMPRESSION_NONE, compression_ratio: 1.0,
        format_version: 2, reserved: 0,
    };
    let status = drt.writer_create(runtime, baseDir, Buffer.byteLength(baseDir), name, Buffer.byteLength(name), options, out);
    if (status === DRT_OK) drt.writer_destroy(out[0]);
    expectFailure(status, DRT_ERR_ALREADY_EXISTS, 'a second writer of a published cache');

    // A path that holds no cache.
    const missing = `${baseDir}/no_such_cache`;
    const reader = { seed: 0, prefetch_size: 1, shuffle: 0, validate_cache: 0, without_replacement: 0 };
    status = drt.dataset_open(runtime, [missing], BigUint64Array.of(BigInt(Buffer.byteLength(missing))), 1, reader, out);
    if (status === DRT_OK) drt.dataset_destroy(out[0]);
    const message = expectFailure(status, DRT_ERR_INVALID_CACHE, 'drt_dataset_open of a missing path');
    if (!message.includes('no_such_cache')) {
        throw new Mismatch(`the message for a missing cache does not name it: ${message}`);
    }
    return 3;
}

// ---- main ------------------------------------------------------------------------

function run(baseDir, libraryPath) {
    try {
        drt = declare(libraryPath);
    } catch (error) {
        throw new Mismatch(`cannot load ${libraryPath}: ${error.message}`);
    }
    const version = drt.abi_version();
    if (version !== DRT_ABI_VERSION) {
        throw new Mismatch(`${libraryPath} implements C ABI ${version}, this program was written for ${DRT_ABI_VERSION}`);
    }
    const out = [null];
    check(drt.runtime_create(2, out), 'drt_runtime_create');
    const runtime = out[0];
    try {
        const name = 'node_example';
        const cachePath = writeCache(runtime, baseDir, name);

        const ordered = readCache(runtime, cachePath, false, 0);
        if (ordered.join() !== SAMPLES.map((_, i) => i).join()) {
            throw new Mismatch(`read in table order: [${ordered}]`);
        }
        const seed = 2026;
        const shuffled = readCache(runtime, cachePath, true, seed);
        const rows = new BigUint64Array(SAMPLES.length);
        check(drt.permutation_rows(SAMPLES.length, seed, 0, SAMPLES.length, rows), 'drt_permutation_rows');
        if (shuffled.join() !== Array.from(rows, Number).join()) {
            throw new Mismatch(`shuffled order [${shuffled}], drt_permutation_rows says [${rows}]`);
        }
        const errors = checkErrors(runtime, baseDir, name);
        return `node: wrote ${SAMPLES.length} samples to ${cachePath}, read them back in order and shuffled ` +
            `[${shuffled.join(', ')}] (seed ${seed}); ${errors} errors reported with status and message; C ABI ${version}`;
    } finally {
        drt.runtime_destroy(runtime);
    }
}

function main() {
    const [baseDir, libraryArgument] = process.argv.slice(2);
    const libraryPath = libraryArgument || process.env.DATASET_RT_LIBRARY;
    if (!baseDir || !libraryPath || process.argv.length > 4) {
        console.error(`usage: node ${path.relative(process.cwd(), __filename)} <base_dir> [library]` +
            '   (library: else $DATASET_RT_LIBRARY; writes <base_dir>/node_example, which must not exist)');
        process.exit(2);
    }
    try {
        console.log(run(baseDir, libraryPath));
    } catch (error) {
        if (!(error instanceof Mismatch)) throw error; // a bug here: node prints the stack and exits 1
        console.error(`node: FAILED: ${error.message}`);
        process.exit(1);
    }
}

main();
