//! Writes a small cache through DatasetRT's C ABI and reads it back, from Rust.
//!
//! Only the functions of `zig/include/dataset_rt.h` are used, declared below as
//! `extern "C"` items: no crates, no bindgen, one `rustc` call (see README.md):
//!
//!     rustc --edition 2021 -O examples/rust/round_trip.rs -o /tmp/round_trip \
//!         -L native=LIBDIR -C link-arg=-Wl,-rpath,LIBDIR
//!     /tmp/round_trip /tmp/caches
//!
//! The program writes six samples (payload bytes; metadata `id`, an integer, and
//! `label`, a string) to `<base_dir>/rust_example`, reads them back in table
//! order and shuffled, compares every payload, the metadata JSON and the
//! metadata columns with what it wrote, checks that failures come back as a
//! status code with a message from `drt_last_error()`, prints one line and exits
//! 0; on any mismatch it prints what differs and exits 1.
//!
//! Kept to Rust 1.63 (Debian 12's `rustc`) and edition 2021: edition 2024 asks for
//! `unsafe extern` blocks, which Rust 1.82 introduced.

use std::ffi::CStr;
use std::os::raw::c_char;
use std::process::exit;
use std::ptr;

// ---- The header's declarations, by hand -------------------------------------

const DRT_ABI_VERSION: u32 = 4;
const DRT_OK: i32 = 0;
const DRT_ERR_INVALID_ARGUMENT: i32 = 1;
const DRT_ERR_INVALID_CACHE: i32 = 3;
const DRT_ERR_ALREADY_EXISTS: i32 = 6;
const DRT_COMPRESSION_LZ4: u32 = 1;
const KIND_INT: u32 = 1;
const KIND_STRING: u32 = 3;

// Opaque handles: only ever behind a pointer.
#[repr(C)]
struct DrtRuntime {
    _opaque: [u8; 0],
}
#[repr(C)]
struct DrtWriter {
    _opaque: [u8; 0],
}
#[repr(C)]
struct DrtDataset {
    _opaque: [u8; 0],
}
#[repr(C)]
struct DrtIterator {
    _opaque: [u8; 0],
}

#[repr(C)]
struct DrtWriterOptions {
    max_shard_bytes: u64,
    batches_in_flight_max: u32,
    compression: u32,
    compression_ratio: f64,
    format_version: u32, // 2 or 3 (0 means 2)
    reserved: u32,
}

#[repr(C)]
struct DrtReaderOptions {
    seed: u64,
    prefetch_size: u32,
    shuffle: u32,
    validate_cache: u32,
    without_replacement: u32,
}

#[repr(C)]
struct DrtBatchColumn {
    kind: u32,
    distinct: u32,
    values: *const u8,
    offsets: *const u64,
    bytes: *const u8,
}

#[repr(C)]
struct DrtBatch {
    count: u64,
    payloads: *const u8,
    payload_offsets: *const u64,
    metadata_json: *const u8,
    metadata_offsets: *const u64,
    cache_ids: *const u64,
    sample_ids: *const u64,
    column_count: u64,
    columns: *const DrtBatchColumn,
    packed: *const u8,
    packed_len: u64,
}

#[link(name = "dataset_rt")]
extern "C" {
    fn drt_abi_version() -> u32;
    fn drt_last_error() -> *const c_char;
    fn drt_runtime_create(num_workers: u32, out: *mut *mut DrtRuntime) -> i32;
    fn drt_runtime_destroy(runtime: *mut DrtRuntime);
    fn drt_writer_create(
        runtime: *mut DrtRuntime,
        base_dir: *const u8,
        base_dir_len: u64,
        source_name: *const u8,
        source_name_len: u64,
        options: *const DrtWriterOptions,
        out: *mut *mut DrtWriter,
    ) -> i32;
    fn drt_writer_push(
        writer: *mut DrtWriter,
        payloads: *const u8,
        payloads_len: u64,
        payload_lens: *const u64,
        count: u64,
        metadata_json: *const u8,
        metadata_json_len: u64,
    ) -> i32;
    fn drt_writer_finish(writer: *mut DrtWriter) -> i32;
    fn drt_writer_path(writer: *const DrtWriter) -> *const c_char;
    fn drt_writer_destroy(writer: *mut DrtWriter);
    fn drt_dataset_open(
        runtime: *mut DrtRuntime,
        paths: *const *const u8,
        path_lens: *const u64,
        path_count: u32,
        options: *const DrtReaderOptions,
        out: *mut *mut DrtDataset,
    ) -> i32;
    fn drt_dataset_len(dataset: *mut DrtDataset, out: *mut u64) -> i32;
    fn drt_dataset_destroy(dataset: *mut DrtDataset);
    fn drt_iterator_create(dataset: *mut DrtDataset, out: *mut *mut DrtIterator) -> i32;
    fn drt_iterator_next(iterator: *mut DrtIterator, out: *mut *mut DrtBatch) -> i32;
    fn drt_iterator_destroy(iterator: *mut DrtIterator);
    fn drt_batch_release(batch: *mut DrtBatch);
    fn drt_permutation_rows(n: u64, seed: u64, start: u64, count: u64, rows_out: *mut u64) -> i32;
}

// ---- Small safe helpers -------------------------------------------------------

fn last_error() -> String {
    // drt_last_error never returns NULL: "" when nothing failed on this thread.
    unsafe { CStr::from_ptr(drt_last_error()) }.to_string_lossy().into_owned()
}

/// DRT_OK, or Err naming the call with the library's message.
fn check(status: i32, what: &str) -> Result<(), String> {
    if status == DRT_OK {
        Ok(())
    } else {
        Err(format!("{} failed with status {}: {}", what, status, last_error()))
    }
}

/// A call that must fail with `expected` and say why; returns the message.
fn expect_failure(status: i32, expected: i32, what: &str) -> Result<String, String> {
    let message = last_error();
    if status != expected {
        return Err(format!("{}: status {}, expected {} ({})", what, status, expected, message));
    }
    if message.is_empty() {
        return Err(format!("{}: status {} but drt_last_error() is empty", what, status));
    }
    Ok(message)
}

/// `len` bytes at `data` (which may be NULL when `len` is 0).
unsafe fn slice<'a, T>(data: *const T, len: u64) -> &'a [T] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(data, len as usize)
    }
}

/// Destroys the handle when dropped, so every early return releases it.
struct Guard<T> {
    handle: *mut T,
    destroy: unsafe extern "C" fn(*mut T),
}
impl<T> Drop for Guard<T> {
    fn drop(&mut self) {
        unsafe { (self.destroy)(self.handle) }
    }
}

// ---- The samples --------------------------------------------------------------

struct Sample {
    payload: Vec<u8>,
    id: i64,
    label: String,
}

fn samples() -> Vec<Sample> {
    let sample = |payload: Vec<u8>, id: i64, label: &str| Sample { payload, id, label: label.to_string() };
    vec![
        sample(b"hello from rust".to_vec(), 0, "greeting"),
        sample(Vec::new(), 1, "empty payload"),
        sample((0..=255u8).collect(), -2, "every byte value"),
        // Compressible payloads, so LZ4 has something to do.
        sample(b"abc".iter().cycle().take(3000).cloned().collect(), 1 << 40, "caf\u{e9} \u{2615}"),
        sample(b"\x00\x01\x02".to_vec(), 4, "say \"hi\" \\ bye"),
        sample((0..20_000u32).map(|i| (i / 100) as u8).collect(), 5, "repetitive"),
    ]
}

/// A JSON string literal: `"`, `\` and control characters escaped, the rest as UTF-8.
fn json_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The metadata as the core returns it: canonical JSON, keys sorted.
fn metadata_json(sample: &Sample) -> String {
    format!("{{\"id\":{},\"label\":{}}}", sample.id, json_string(&sample.label))
}

// ---- Writing ------------------------------------------------------------------

fn write_cache(runtime: *mut DrtRuntime, base_dir: &str, name: &str, samples: &[Sample]) -> Result<String, String> {
    let options = DrtWriterOptions {
        max_shard_bytes: 256, // small, so the six samples span several shards
        batches_in_flight_max: 4,
        compression: DRT_COMPRESSION_LZ4,
        compression_ratio: 2.0,
        format_version: 2,
        reserved: 0,
    };
    let mut writer: *mut DrtWriter = ptr::null_mut();
    check(
        unsafe {
            drt_writer_create(runtime, base_dir.as_ptr(), base_dir.len() as u64, name.as_ptr(),
                              name.len() as u64, &options, &mut writer)
        },
        "drt_writer_create",
    )?;
    // Destroying an unfinished writer removes its staging directory.
    let writer = Guard { handle: writer, destroy: drt_writer_destroy };

    // Two pushes (the core copies the inputs): payloads back to back, their
    // lengths, and a JSON array of flat objects, keys in any order.
    for batch in samples.chunks(4) {
        let payloads: Vec<u8> = batch.iter().flat_map(|s| s.payload.iter().cloned()).collect();
        let lens: Vec<u64> = batch.iter().map(|s| s.payload.len() as u64).collect();
        let objects: Vec<String> = batch
            .iter()
            .map(|s| format!("{{\"label\":{},\"id\":{}}}", json_string(&s.label), s.id))
            .collect();
        let metadata = format!("[{}]", objects.join(","));
        check(
            unsafe {
                drt_writer_push(writer.handle, payloads.as_ptr(), payloads.len() as u64, lens.as_ptr(),
                                batch.len() as u64, metadata.as_ptr(), metadata.len() as u64)
            },
            "drt_writer_push",
        )?;
    }
    check(unsafe { drt_writer_finish(writer.handle) }, "drt_writer_finish")?;
    let path = unsafe { CStr::from_ptr(drt_writer_path(writer.handle)) }.to_string_lossy().into_owned();
    Ok(path)
}

// ---- Reading ------------------------------------------------------------------

/// Reads one epoch; returns the sample ids in the order read, after checking
/// each sample's payload, metadata JSON and metadata columns.
fn read_cache(runtime: *mut DrtRuntime, path: &str, shuffle: bool, seed: u64, samples: &[Sample]) -> Result<Vec<u64>, String> {
    let options = DrtReaderOptions {
        seed,
        prefetch_size: 4,
        shuffle: shuffle as u32,
        validate_cache: 1, // check every SHA-256 of the manifest while opening
        without_replacement: 1, // shuffled: each epoch a permutation of the samples
    };
    let paths = [path.as_ptr()];
    let path_lens = [path.len() as u64];
    let mut dataset: *mut DrtDataset = ptr::null_mut();
    check(
        unsafe { drt_dataset_open(runtime, paths.as_ptr(), path_lens.as_ptr(), 1, &options, &mut dataset) },
        "drt_dataset_open",
    )?;
    let dataset = Guard { handle: dataset, destroy: drt_dataset_destroy };
    let mut len = 0u64;
    check(unsafe { drt_dataset_len(dataset.handle, &mut len) }, "drt_dataset_len")?;
    if len != samples.len() as u64 {
        return Err(format!("drt_dataset_len says {}, {} were written", len, samples.len()));
    }
    let mut iterator: *mut DrtIterator = ptr::null_mut();
    check(unsafe { drt_iterator_create(dataset.handle, &mut iterator) }, "drt_iterator_create")?;
    let iterator = Guard { handle: iterator, destroy: drt_iterator_destroy };

    let mut order = Vec::new();
    loop {
        let mut batch: *mut DrtBatch = ptr::null_mut();
        check(unsafe { drt_iterator_next(iterator.handle, &mut batch) }, "drt_iterator_next")?;
        if batch.is_null() {
            break; // the end of the epoch
        }
        let batch = Guard { handle: batch, destroy: drt_batch_release };
        check_batch(unsafe { &*batch.handle }, samples, &mut order)?;
    }
    Ok(order)
}

fn check_batch(batch: &DrtBatch, samples: &[Sample], order: &mut Vec<u64>) -> Result<(), String> {
    let n = batch.count;
    let payload_offsets = unsafe { slice(batch.payload_offsets, n + 1) };
    let metadata_offsets = unsafe { slice(batch.metadata_offsets, n + 1) };
    let payloads = unsafe { slice(batch.payloads, payload_offsets[n as usize]) };
    let metadata = unsafe { slice(batch.metadata_json, metadata_offsets[n as usize]) };
    let cache_ids = unsafe { slice(batch.cache_ids, n) };
    let sample_ids = unsafe { slice(batch.sample_ids, n) };
    let columns = unsafe { slice(batch.columns, batch.column_count) };
    // Schema order is by name: id (int), label (string).
    if columns.len() != 2 || columns[0].kind != KIND_INT || columns[1].kind != KIND_STRING {
        return Err(format!("unexpected metadata columns: {} of them", columns.len()));
    }
    let ids = unsafe { slice(columns[0].values as *const i64, n) };
    let label_offsets = unsafe { slice(columns[1].offsets, n + 1) };
    let label_bytes = unsafe { slice(columns[1].bytes, label_offsets[n as usize]) };

    for k in 0..n as usize {
        let sample_id = sample_ids[k];
        let expected = match samples.get(sample_id as usize) {
            Some(sample) if cache_ids[k] == 0 => sample,
            _ => return Err(format!("unexpected identity (cache {}, sample {})", cache_ids[k], sample_id)),
        };
        let payload = &payloads[payload_offsets[k] as usize..payload_offsets[k + 1] as usize];
        if payload != &expected.payload[..] {
            return Err(format!("sample {}: payload of {} bytes differs from the {} written",
                               sample_id, payload.len(), expected.payload.len()));
        }
        let json = &metadata[metadata_offsets[k] as usize..metadata_offsets[k + 1] as usize];
        if json != metadata_json(expected).as_bytes() {
            return Err(format!("sample {}: metadata {} differs from {}", sample_id,
                               String::from_utf8_lossy(json), metadata_json(expected)));
        }
        let label = &label_bytes[label_offsets[k] as usize..label_offsets[k + 1] as usize];
        if ids[k] != expected.id || label != expected.label.as_bytes() {
            return Err(format!("sample {}: columns hold id {} and label {:?}", sample_id, ids[k],
                               String::from_utf8_lossy(label)));
        }
        order.push(sample_id);
    }
    Ok(())
}

// ---- Errors come back as a status and a message -------------------------------

fn check_errors(runtime: *mut DrtRuntime, base_dir: &str, name: &str) -> Result<usize, String> {
    let mut unused: *mut DrtRuntime = ptr::null_mut();
    expect_failure(unsafe { drt_runtime_create(0, &mut unused) }, DRT_ERR_INVALID_ARGUMENT,
                   "drt_runtime_create with 0 workers")?;

    // The cache exists now: a second writer of the name is refused.
    let options = DrtWriterOptions {
        max_shard_bytes: 1 << 20, batches_in_flight_max: 4, compression: 0, compression_ratio: 1.0,
        format_version: 2, reserved: 0,
    };
    let mut writer: *mut DrtWriter = ptr::null_mut();
    let status = unsafe {
        drt_writer_create(runtime, base_dir.as_ptr(), base_dir.len() as u64, name.as_ptr(),
                          name.len() as u64, &options, &mut writer)
    };
    if status == DRT_OK {
        unsafe { drt_writer_destroy(writer) };
    }
    expect_failure(status, DRT_ERR_ALREADY_EXISTS, "a second writer of a published cache")?;

    // A path that holds no cache.
    let missing = format!("{}/no_such_cache", base_dir);
    let paths = [missing.as_ptr()];
    let path_lens = [missing.len() as u64];
    let reader = DrtReaderOptions { seed: 0, prefetch_size: 1, shuffle: 0, validate_cache: 0, without_replacement: 0 };
    let mut dataset: *mut DrtDataset = ptr::null_mut();
    let status = unsafe { drt_dataset_open(runtime, paths.as_ptr(), path_lens.as_ptr(), 1, &reader, &mut dataset) };
    if status == DRT_OK {
        unsafe { drt_dataset_destroy(dataset) };
    }
    let message = expect_failure(status, DRT_ERR_INVALID_CACHE, "drt_dataset_open of a missing path")?;
    if !message.contains("no_such_cache") {
        return Err(format!("the message for a missing cache does not name it: {}", message));
    }
    Ok(3)
}

// ---- main ---------------------------------------------------------------------

fn run(base_dir: &str) -> Result<String, String> {
    let version = unsafe { drt_abi_version() };
    if version != DRT_ABI_VERSION {
        return Err(format!("the library implements C ABI {}, this program was written for {}", version, DRT_ABI_VERSION));
    }
    let mut runtime: *mut DrtRuntime = ptr::null_mut();
    check(unsafe { drt_runtime_create(2, &mut runtime) }, "drt_runtime_create")?;
    let runtime = Guard { handle: runtime, destroy: drt_runtime_destroy };

    let samples = samples();
    let name = "rust_example";
    let path = write_cache(runtime.handle, base_dir, name, &samples)?;

    let ordered = read_cache(runtime.handle, &path, false, 0, &samples)?;
    let expected: Vec<u64> = (0..samples.len() as u64).collect();
    if ordered != expected {
        return Err(format!("read in table order: {:?}", ordered));
    }
    let seed = 2026;
    let shuffled = read_cache(runtime.handle, &path, true, seed, &samples)?;
    let mut rows = vec![0u64; samples.len()];
    check(
        unsafe { drt_permutation_rows(samples.len() as u64, seed, 0, samples.len() as u64, rows.as_mut_ptr()) },
        "drt_permutation_rows",
    )?;
    if shuffled != rows {
        return Err(format!("shuffled order {:?}, drt_permutation_rows says {:?}", shuffled, rows));
    }
    let errors = check_errors(runtime.handle, base_dir, name)?;
    Ok(format!(
        "rust: wrote {} samples to {}, read them back in order and shuffled {:?} (seed {}); {} errors reported with status and message; C ABI {}",
        samples.len(), path, shuffled, seed, errors, version
    ))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 {
        eprintln!("usage: {} <base_dir>   (writes <base_dir>/rust_example, which must not exist)", args[0]);
        exit(2);
    }
    match run(&args[1]) {
        Ok(summary) => println!("{}", summary),
        Err(problem) => {
            eprintln!("rust: FAILED: {}", problem);
            exit(1);
        }
    }
}
