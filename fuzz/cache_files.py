"""Fuzz harness: every parser of a cache's untrusted bytes, through the C ABI.

It writes small seed caches with the library (formats 2 and 3, with and without
records.crc32c, none and lz4), and for each input mutates one of
their files (manifest.json, metadata.arrow, index.bin, records.crc32c, a shard)
or one record (its header and metadata JSON, or its LZ4 block), writes the
mutated cache to a temporary directory (tmpfs when there is one), and reads it
with the public API both ways (`validate_cache` False and True): open, iterate
every sample, `get_metadata()` (the Arrow export) and `get_many()` (the random
access reads). The `lz4_codec` target calls the core's LZ4 codec directly.

The property: a read either fails with the library's documented exception for a
bad cache (an InvalidCacheError, status DRT_ERR_INVALID_CACHE, or a CacheIOError),
or returns exactly what the bytes mean (`cache_reference.py`): the record each
index row names, its metadata as its JSON states and `metadata.arrow` lists,
its payload as stored or as its LZ4 block decodes. Whatever is no longer
authenticated must be refused: a record whose CRC-32C differs from
records.crc32c, with `validate_cache` any file whose SHA-256 or length differs
from the manifest's, a manifest that is not JSON or breaks a documented rule.
A cache whose files are the seed's (the manifest possibly respelled) must be
accepted, and `verify()` must report a problem exactly when the read with
`validate_cache=True` failed. Anything else (another exception, a crash, a
hang, data that differs from the bytes' meaning) is a finding.

Usage (see CONTRIBUTING.md, "Fuzzing"):
    python fuzz/cache_files.py fuzz/corpus -max_total_time=600   # atheris (libFuzzer)
    python fuzz/cache_files.py --iterations 1000 --seed 1         # seeded, no atheris
    python fuzz/cache_files.py --replay tests/fuzz_regressions/*  # replay inputs

Beside it: `cache_model.py` (the seeds and what a cache's files mean), `cache_mutations.py`
(how an input becomes mutations), `lz4_reference.py` and `arrow_layouts.py` (LZ4 blocks and
metadata.arrow files), `fuzz_runs.py` (the run's directories, findings and inputs).
"""

from __future__ import annotations

import argparse
import copy
import faulthandler
import inspect
import json
import re
import shutil
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import cache_reference as reference
from arrow_layouts import ArrowLayout, arrow_hot_points
from cache_model import (
    CHECKSUMS,
    INDEX,
    MANIFEST,
    METADATA,
    ListSource,
    Model,
    Variant,
    parse_manifest,
    record_crc32c,
    record_meaning,
    seed_samples,
    sha256_hex,
)
from cache_mutations import Choices, json_tokens, mutate_bytes, mutate_json
from fuzz_runs import (
    FEEDBACK_BUCKETS,
    feedback_function,
    random_inputs,
    save_finding,
    work_directory,
)
from lz4_reference import (
    DIRECT_DECODE_MAX,
    HAVE_REFERENCE,
    LZ4_EXPANSION_MAX,
    lz4_decoded_len,
    lz4_hot_points,
    reference_lz4,
)

from dataset_rt import (
    CachedSample,
    DatasetRuntime,
    MetadataValue,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
    verify,
)
from dataset_rt._binding import native as _native
from dataset_rt.errors import DatasetRtError, InvalidInputError

# Statuses a bad cache may fail a read with (docs/c-abi.md): ValueError and OSError.
ALLOWED_STATUSES = frozenset({_native.ERR_INVALID_CACHE, _native.ERR_IO})
FILE_TIMEOUT_SECONDS = 60


class Violation(AssertionError):
    """The library broke the property; the message says how."""


# (cache_id, sample_id, payload, metadata) of a sample as a read returned it.
ReadSample = tuple[int, int, bytes, dict[str, MetadataValue]]


@dataclass
class Read:
    """What one open-and-read-everything returned."""

    samples: list[ReadSample]
    rows: list[dict[str, Any]]
    again: list[ReadSample]


def sample_of(sample: CachedSample) -> ReadSample:
    """A sample as `Read` keeps it."""
    return sample.cache_id, sample.sample_id, bytes(sample.data), dict(sample.metadata)


@dataclass
class Failure:
    stage: str
    error: DatasetRtError


class Harness:
    """Seed caches, the targets that mutate them and the property that judges each read."""

    def __init__(self, runtime: DatasetRuntime, work: Path) -> None:
        self.runtime = runtime
        self.work = work
        self.mutated = work / "m"
        self.other = work / "other"
        self.feedback: Callable[[int], int] | None = None
        self.stats: Counter[str] = Counter()
        self.arrow_files: dict[ArrowLayout, bytes] = {}
        self.samples = seed_samples()
        self.variants = self._write_seeds(work / "seed")
        self._install(self.other, self.variants[0].files)
        self.other_model = Model(dict(self.variants[0].files), self.variants[0].manifest)
        for variant in self.variants:
            self._check_seed(variant)

    # ---- seeds ------------------------------------------------------------------

    def _write_seeds(self, base: Path) -> list[Variant]:
        """The format 2 seeds, then their format 3 twins in the same order: an input
        picks variant `b % len(variants)`, so an input of the four format 2 seeds
        now picks its seed or that seed's twin."""
        variants = []
        versions: tuple[Literal[2, 3], ...] = (2, 3)
        for version in versions:
            for compression in (ShardCompression(), ShardCompression(algo="lz4", ratio=2.0)):
                variants += self._write_seed(base / f"v{version}", compression, version)
        return variants

    def _write_seed(
        self, base: Path, compression: ShardCompression, version: Literal[2, 3]
    ) -> list[Variant]:
        """A seed cache as this library writes it, and as dataset-rt writes it (no
        records.crc32c: 0.2.4 for format 2, 0.4.8 for format 3)."""
        algo = compression.algo
        name = algo if version == 2 else f"{algo}-v3"
        config = WriterConfig(
            show_progress=False,
            max_shard_bytes=600,
            shard_compression=compression,
            format_version=version,
        )
        [result] = self.runtime.write_cache(
            ListSource(name, self.samples), base, writer_config=config
        )
        path = getattr(result, "path", None)
        if path is None:
            raise RuntimeError(f"cannot write the seed cache: {result}")
        files = {
            str(file.relative_to(path)): file.read_bytes()
            for file in sorted(path.rglob("*"))
            if file.is_file()
        }
        # As dataset-rt writes it: no records.crc32c, reads reach the checks behind it.
        without = {path: data for path, data in files.items() if path != CHECKSUMS}
        manifest = json.loads(files[MANIFEST])
        del manifest["record_checksums"]
        without[MANIFEST] = json.dumps(manifest, indent=2).encode()
        return [self._variant(name, files), self._variant(f"{name}-peer", without)]

    def _variant(self, name: str, files: dict[str, bytes]) -> Variant:
        manifest = json.loads(files[MANIFEST])
        rows = reference.index_rows(files[INDEX])
        variant = Variant(name, files, manifest, rows, CHECKSUMS in files, {})
        variant.hot = {path: self._hot_points(variant, path) for path in files}
        return variant

    def _hot_points(self, variant: Variant, path: str) -> list[int]:
        """Offsets where a file's structure changes: where mutations do the most."""
        data = variant.files[path]
        if path == INDEX:
            return [row * 24 + field for row in range(len(variant.rows)) for field in (0, 8, 16)]
        if path == CHECKSUMS:
            return list(range(0, len(data) + 1, 4))
        if path == MANIFEST:
            return [start for start, _ in json_tokens(data)]
        if path == METADATA:
            return arrow_hot_points(data)
        shard_id = int(path.split("/")[1].split(".")[0])
        points = []
        for sample_id, (shard, offset, length) in enumerate(variant.rows):
            if shard == shard_id:
                meta_len = reference.record_meta_len(variant.record(sample_id))
                starts = (0, 8, 8 + meta_len, 12 + meta_len, length)
                points += [offset + start for start in starts]
        return points

    def _check_seed(self, variant: Variant) -> None:
        """The harness's own check: the seed reads back as written, and means it."""
        for sample_id, (payload, metadata) in enumerate(self.samples):
            algo = variant.manifest["shards"][variant.rows[sample_id][0]]["compression"]["algo"]
            meaning = record_meaning(variant.record(sample_id), algo)
            assert isinstance(meaning, reference.Sample), meaning
            assert meaning.payload == payload, f"{variant.name}: sample {sample_id} payload"
            assert reference.same_value(meaning.metadata, metadata), (sample_id, metadata)
        self.check_cache(dict(variant.files), two_caches=False, expect_success=True)

    # ---- targets ----------------------------------------------------------------

    def run_one(self, data: bytes) -> str:
        """Runs one input; returns a short description of what happened. Raises Violation."""
        choices = Choices(data)
        name, target = TARGETS[choices.below(len(TARGETS))]
        self.stats[f"target {name}"] += 1
        outcome = target(self, choices)
        self.stats[f"outcome {outcome}"] += 1
        if self.feedback is not None:
            self.feedback(zlib.crc32(f"{name} {outcome}".encode()) % FEEDBACK_BUCKETS)
        return f"{name}: {outcome}"

    def target_cache(self, choices: Choices) -> str:
        """Any file of a seed cache: deleted, replaced, or mutated (and maybe resealed)."""
        variant = self.variants[choices.below(len(self.variants))]
        paths = sorted(variant.files)
        path = paths[choices.below(len(paths))]
        files: dict[str, bytes | None] = dict(variant.files)
        mode = choices.byte() % 8
        if mode == 0:
            files[path] = None
        elif mode == 1:
            files[path] = choices.rest()
        elif path == MANIFEST and mode & 1:
            files[path] = mutate_json(variant.files[path], choices)
        else:
            files[path] = mutate_bytes(variant.files[path], choices, variant.hot[path])
        resealed = mode >= 4 and path != MANIFEST
        if resealed:
            self._reseal(variant, files, path)
        outcome = self.check_cache(files, two_caches=choices.flag())
        return f"{variant.name} {path} {'resealed ' if resealed else ''}{outcome}"

    def target_manifest(self, choices: Choices) -> str:
        """manifest.json alone, mostly by JSON-aware edits."""
        variant = self.variants[choices.below(len(self.variants))]
        files: dict[str, bytes | None] = dict(variant.files)
        text = variant.files[MANIFEST]
        for _ in range(1 + choices.byte() % 2):
            if choices.byte() % 4:
                text = mutate_json(text, choices)
            else:
                text = mutate_bytes(text, choices, variant.hot[MANIFEST])
        files[MANIFEST] = text
        return f"{variant.name} {self.check_cache(files, two_caches=choices.flag())}"

    def target_record(self, choices: Choices) -> str:
        """One record's header and metadata JSON; the cache laid out and resealed around it."""
        variant = self.variants[choices.below(len(self.variants))]
        sample_id = choices.below(len(variant.rows))
        record = variant.record(sample_id)
        header = record[: reference.RECORD_HEADER_BYTES]
        text, stored = reference.record_json(record), reference.record_stored(record)
        for _ in range(1 + choices.byte() % 3):
            region = choices.byte() % 4
            if region == 0:
                header = mutate_bytes(header, choices, [0, 4])
            elif region == 3:
                text = mutate_bytes(text, choices, [start for start, _ in json_tokens(text)])
            else:
                text = mutate_json(text, choices)
        if choices.byte() % 4:
            header = reference.encode_record_header(len(text))
        files = self._relayout(variant, sample_id, header + text + stored, 0)
        return f"{variant.name} {self.check_cache(files, two_caches=choices.flag())}"

    def target_lz4_record(self, choices: Choices) -> str:
        """One lz4 record's stored payload (length and block); the cache resealed around it."""
        variants = [v for v in self.variants if v.name.startswith("lz4")]
        variant = variants[choices.below(len(variants))]
        sample_id = choices.below(len(variant.rows))
        record = variant.record(sample_id)
        head, stored = record[: reference.stored_offset(record, 0)], reference.record_stored(record)
        size = reference.lz4_size(stored)
        block = mutate_bytes(stored[4:], choices, lz4_hot_points(stored[4:]))
        mode = choices.byte() % 4
        if mode == 1:
            size = min(lz4_decoded_len(block) or size, 2**32 - 1)
        elif mode == 2:
            edited = mutate_bytes(stored[:4], choices, [0])
            size = int.from_bytes(edited[:4].ljust(4, b"\0"), "little")
        direct = self._check_lz4_block(block, size)
        # Usually the manifest's uncompressed_byte_len follows, so validate_cache can pass.
        delta = size - reference.lz4_size(stored)
        follows = choices.byte() % 4 != 0
        record = head + reference.encode_lz4_size(size) + block
        files = self._relayout(variant, sample_id, record, delta if follows else 0)
        meaning = record_meaning(record, "lz4")
        # A block the reference implementation decodes, within the documented bound, in a
        # cache that is otherwise consistent: the library must read it.
        must_read = (
            direct == "conforming"
            and size <= LZ4_EXPANSION_MAX * len(block)
            and isinstance(meaning, reference.Sample)
            and (follows or delta == 0)
        )
        outcome = self.check_cache(files, two_caches=False, expect_success=must_read)
        return f"{variant.name} block {direct} {outcome}"

    def target_arrow(self, choices: Choices) -> str:
        """metadata.arrow rewritten by pyarrow (batches, types, layouts), maybe mutated."""
        variant = self.variants[choices.below(len(self.variants))]
        layout = ArrowLayout.chosen(choices)
        data = self._arrow_file(layout)
        mutated = choices.byte() % 2 == 0
        if mutated:
            data = mutate_bytes(data, choices, arrow_hot_points(data))
        files: dict[str, bytes | None] = dict(variant.files)
        files[METADATA] = data
        self._reseal(variant, files, METADATA)
        outcome = self.check_cache(
            files, two_caches=choices.flag(), expect_success=layout.valid and not mutated
        )
        if not mutated and not layout.valid and outcome.startswith("ok"):
            raise Violation(f"metadata.arrow with {layout.invalid} was accepted")
        return f"{variant.name} {layout.summary()}{' mutated' if mutated else ''} {outcome}"

    def _arrow_file(self, layout: ArrowLayout) -> bytes:
        if layout not in self.arrow_files:
            self.arrow_files[layout] = layout.write([metadata for _, metadata in self.samples])
        return self.arrow_files[layout]

    def target_lz4_codec(self, choices: Choices) -> str:
        """drt_lz4_compress and drt_lz4_decompress directly: round trips, then a mutated block."""
        mutation = Choices(choices.take(24))
        repeat = 1 + choices.byte() % 32
        payload = choices.rest() * repeat
        block = _native.lz4_compress(payload)
        bound = _native.lib.drt_lz4_compress_bound(len(payload))
        if len(block) > bound:
            raise Violation(f"lz4 block of {len(block)} bytes exceeds its bound {bound}")
        decoded = _native.lz4_decompress(block, len(payload))
        if decoded != payload or reference.lz4_decode(block, len(payload)) != payload:
            raise Violation("drt_lz4_compress's block does not decode to its input")
        if HAVE_REFERENCE and reference_lz4(block, len(payload)) != payload:
            raise Violation("the reference LZ4 decoder rejects drt_lz4_compress's block")
        mutated = mutate_bytes(block, mutation, lz4_hot_points(block))
        return f"codec {self._check_lz4_block(mutated, len(payload))}"

    def _check_lz4_block(self, block: bytes, size: int) -> str:
        """drt_lz4_decompress must return what the block means, or refuse it."""
        meaning = reference.lz4_decode(block, size)
        if size > min(LZ4_EXPANSION_MAX * len(block), DIRECT_DECODE_MAX):
            return "oversized"
        try:
            decoded: bytes | None = _native.lz4_decompress(block, size)
        except DatasetRtError as error:
            if not isinstance(error, InvalidInputError):
                raise Violation(f"drt_lz4_decompress failed with status {error.status}") from error
            decoded = None
        if decoded is not None and decoded != meaning:
            raise Violation(
                "drt_lz4_decompress returned bytes the block does not mean"
                if meaning is not None
                else "drt_lz4_decompress accepted a block that means no such output"
            )
        if HAVE_REFERENCE and meaning is not None and decoded is None:
            if reference_lz4(block, size) == meaning:
                raise Violation("drt_lz4_decompress refused a block the reference decodes")
        if HAVE_REFERENCE and meaning is not None and reference_lz4(block, size) == meaning:
            return "conforming"
        return "decoded" if decoded is not None else "refused"

    # ---- building mutated caches ----------------------------------------------

    def _reseal(self, variant: Variant, files: dict[str, bytes | None], path: str) -> None:
        """Makes the manifest (and records.crc32c) vouch for the mutated file again."""
        data = files[path]
        if data is None:
            return
        manifest = copy.deepcopy(variant.manifest)
        if path == INDEX:
            manifest["index_sha256"] = sha256_hex(data)
        elif path == METADATA:
            manifest["metadata_sha256"] = sha256_hex(data)
        elif path == CHECKSUMS:
            manifest["record_checksums"].update(byte_len=len(data), sha256=sha256_hex(data))
        else:
            shard_id = int(path.split("/")[1].split(".")[0])
            manifest["shards"][shard_id].update(byte_len=len(data), sha256=sha256_hex(data))
            if variant.checksums:
                checksums = bytearray(variant.files[CHECKSUMS])
                for sample_id, (shard, offset, length) in enumerate(variant.rows):
                    if shard == shard_id and offset + length <= len(data):
                        record = data[offset : offset + length]
                        reference.set_record_checksum(checksums, sample_id, record_crc32c(record))
                files[CHECKSUMS] = bytes(checksums)
                manifest["record_checksums"]["sha256"] = sha256_hex(bytes(checksums))
        files[MANIFEST] = json.dumps(manifest, indent=2).encode()

    def _relayout(
        self, variant: Variant, sample_id: int, record: bytes, uncompressed_delta: int
    ) -> dict[str, bytes | None]:
        """The variant's files with sample `sample_id`'s record replaced, the records
        after it moved, and every length, checksum and digest made to agree."""
        files: dict[str, bytes | None] = dict(variant.files)
        manifest = copy.deepcopy(variant.manifest)
        shard_id, offset, length = variant.rows[sample_id]
        name = reference.shard_name(shard_id)
        shard = variant.files[name]
        shard = shard[:offset] + record + shard[offset + length :]
        moved = len(record) - length
        rows = [
            (s, o + moved if s == shard_id and o > offset else o, n) for s, o, n in variant.rows
        ]
        rows[sample_id] = (shard_id, offset, len(record))
        index = reference.encode_index(rows)
        files[name] = shard
        files[INDEX] = index
        entry = manifest["shards"][shard_id]
        entry.update(byte_len=len(shard), sha256=sha256_hex(shard))
        entry["uncompressed_byte_len"] = max(0, entry["uncompressed_byte_len"] + uncompressed_delta)
        manifest["index_sha256"] = sha256_hex(index)
        if variant.checksums:
            checksums = bytearray(variant.files[CHECKSUMS])
            reference.set_record_checksum(checksums, sample_id, record_crc32c(record))
            files[CHECKSUMS] = bytes(checksums)
            manifest["record_checksums"]["sha256"] = sha256_hex(bytes(checksums))
        files[MANIFEST] = json.dumps(manifest, indent=2).encode()
        return files

    def _install(self, directory: Path, files: Mapping[str, bytes | None]) -> None:
        shutil.rmtree(directory, ignore_errors=True)
        (directory / "shards").mkdir(parents=True)
        for path, data in files.items():
            if data is not None:
                (directory / path).write_bytes(data)

    # ---- the property -----------------------------------------------------------

    def check_cache(
        self, files: dict[str, bytes | None], *, two_caches: bool, expect_success: bool = False
    ) -> str:
        """Reads the cache `files` both ways and judges each outcome; returns a summary."""
        self._install(self.mutated, files)
        manifest = parse_manifest(files.get(MANIFEST))
        paths = [self.other, self.mutated] if two_caches else [self.mutated]
        expect_success = expect_success or self._is_seed(files, manifest)
        summaries = []
        reads: dict[bool, Read | Failure] = {}
        for validate in (False, True):
            result = self.read(paths, validate)
            reads[validate] = result
            if isinstance(result, Failure):
                if expect_success:
                    raise Violation(
                        f"a valid cache was refused (validate_cache={validate}, "
                        f"{result.stage}): {result.error}"
                    )
                summaries.append(self._failure_summary(result))
                continue
            if isinstance(manifest, reference.JsonTooDeep):
                summaries.append("ok-unjudged")  # no crash and no undocumented error
                continue
            if isinstance(manifest, reference.StrictJsonError):
                raise Violation(f"a manifest that is not strict JSON was accepted: {manifest}")
            problems = reference.manifest_problems(manifest)
            if problems:
                raise Violation(f"a manifest breaking documented rules was accepted: {problems}")
            model = Model(files, manifest)
            models = [self.other_model, model] if two_caches else [model]
            ids = reference.cache_ids([m.manifest for m in models])
            if len(set(ids)) != len(ids):
                raise Violation(f"caches with one cache_id were opened together: {ids}")
            self._check_read(result, models, ids, validate)
            summaries.append("ok" if self._same_as_seed(result, models) else "ok-changed")
        refused = reads[False]
        if isinstance(reads[True], Read) and isinstance(refused, Failure):
            raise Violation(
                f"validate_cache=True read the cache, validate_cache=False refused it: "
                f"{refused.error}"
            )
        summaries.append(self._check_verify(isinstance(reads[True], Read)))
        return " / ".join(summaries)

    def _check_verify(self, validated: bool) -> str:
        """`verify` scrubs what a validate_cache=True read checks: it must find a problem
        exactly when that read failed, and name each one."""
        try:
            report = verify(self.mutated, num_workers=1, show_progress=False)
        except DatasetRtError as error:
            raise Violation(f"verify raised {type(error).__name__}: {error}") from error
        if report.ok != validated:
            found = [problem.message for problem in report.problems[:3]]
            raise Violation(
                f"verify found {report.problems_total} problems {found}, but a "
                f"validate_cache=True read {'succeeded' if validated else 'failed'}"
            )
        if any(not problem.message for problem in report.problems):
            raise Violation("verify reported a problem without a message")
        return f"verify: {report.problems_total and 'problems'}"

    def _is_seed(self, files: dict[str, bytes | None], manifest: Any) -> bool:
        """Whether `files` are a seed cache's, its manifest possibly respelled."""
        for variant in self.variants:
            same_files = files.keys() == variant.files.keys() and all(
                files[path] == variant.files[path] for path in files if path != MANIFEST
            )
            if same_files and reference.same_value(manifest, variant.manifest):
                return True
        return False

    def read(self, paths: list[Path], validate: bool) -> Read | Failure:
        """Opens `paths`, reads every sample, the metadata table and every sample again by
        identity; a documented failure is returned, anything else raised."""
        stage = "open"
        config = ReaderConfig(seed=0, shuffle=False, validate_cache=validate)
        try:
            dataset = self.runtime.cached_dataset(paths, reader_config=config)
            stage = "iterate"
            # Payloads are `bytes` (ReaderConfig's default), which `bytes()` returns as they are.
            samples = [sample_of(s) for s in dataset]
            stage = "get_metadata"
            rows = dataset.get_metadata().to_dicts()
            stage = "get_many"
            pairs = [(cache_id, sample_id) for cache_id, sample_id, _, _ in reversed(samples)]
            again = [sample_of(s) for s in dataset.get_many(pairs)]
        except DatasetRtError as error:
            if error.status not in ALLOWED_STATUSES:
                raise Violation(
                    f"{stage}: {type(error).__name__} with status {error.status}: {error}"
                ) from error
            # Every failure names the cache it is about (SPEC, section 8; storage-format.md).
            if not any(str(path) in str(error) for path in paths):
                raise Violation(f"{stage}: the error names no cache path: {error}") from error
            return Failure(stage, error)
        except Exception as error:
            raise Violation(f"{stage}: unexpected {type(error).__name__}: {error}") from error
        return Read(samples, rows, again)

    def _check_read(self, read: Read, models: list[Model], ids: list[int], validate: bool) -> None:
        """Everything a successful read returned against what the files mean; the
        caches' cache_ids are `ids` (format 3: the manifest's, format 2: the position)."""
        expected = [
            (c, k) for c, model in zip(ids, models, strict=True) for k in range(model.count)
        ]
        got = [(c, k) for c, k, _, _ in read.samples]
        if got != expected:
            raise Violation(f"identities {got[:8]}... differ from the table order {expected[:8]}")
        by_id = dict(zip(ids, models, strict=True))
        for cache_id, sample_id, payload, metadata in read.samples:
            model = by_id[cache_id]
            meaning = model.sample(sample_id)
            where = f"cache {cache_id} sample {sample_id}"
            if isinstance(meaning, str):
                raise Violation(f"{where} was returned, but its record means nothing: {meaning}")
            if payload != meaning.payload:
                raise Violation(f"{where}: the payload differs from what its record stores")
            if not reference.same_value(metadata, meaning.metadata):
                raise Violation(f"{where}: metadata {metadata!r} but the record says so")
            self._check_record_checksum(model, sample_id, where)
        self._check_table(read, by_id)
        if read.again != list(reversed(read.samples)):
            raise Violation("get_many returned other samples than iteration did")
        for model in models:
            self._check_sizes(model, validate)

    def _check_record_checksum(self, model: Model, sample_id: int, where: str) -> None:
        if "record_checksums" not in model.manifest:
            return
        record = model.record(sample_id)
        checksums = model.files.get(CHECKSUMS) or b""
        assert isinstance(record, bytes)
        if 4 * sample_id + 4 > len(checksums):
            raise Violation(f"{where} was returned without an entry in records.crc32c")
        listed = reference.record_checksum(checksums, sample_id)
        if record_crc32c(record) != listed:
            raise Violation(f"{where}: its record's CRC-32C differs from records.crc32c")

    def _check_table(self, read: Read, models: dict[int, Model]) -> None:
        if len(read.rows) != len(read.samples):
            raise Violation(f"get_metadata has {len(read.rows)} rows for {len(read.samples)}")
        for row, (cache_id, sample_id, _, metadata) in zip(read.rows, read.samples, strict=True):
            stored = {name: row.get(name) for name in models[cache_id].schema}
            identity = (row.get("cache_id"), row.get("sample_id"), row.get("weight"))
            if identity != (cache_id, sample_id, 1.0) or not reference.same_value(stored, metadata):
                raise Violation(f"get_metadata row {row!r} differs from the sample")

    def _check_sizes(self, model: Model, validate: bool) -> None:
        """Lengths every open checks; with validate, every digest and payload total too."""
        manifest, files = model.manifest, model.files
        listed = [
            (INDEX, None, manifest["index_sha256"]),
            (METADATA, None, manifest["metadata_sha256"]),
        ]
        for position, shard in enumerate(manifest["shards"]):
            listed.append((reference.shard_name(position), shard["byte_len"], shard["sha256"]))
        if "record_checksums" in manifest:
            entry = manifest["record_checksums"]
            listed.append((CHECKSUMS, entry["byte_len"], entry["sha256"]))
        if len(files.get(INDEX) or b"") != 24 * model.count:
            raise Violation(f"index.bin of {len(files.get(INDEX) or b'')} bytes was accepted")
        for path, length, digest in listed:
            data = files.get(path)
            if data is None:
                raise Violation(f"{path} is missing but the cache was accepted")
            if length is not None and len(data) != length:
                raise Violation(f"{path} has {len(data)} bytes, the manifest says {length}")
            if validate and sha256_hex(data) != digest:
                raise Violation(f"validate_cache accepted {path} with another SHA-256")
        if validate:
            totals = Counter[int]()
            for sample_id, (shard_id, _, _) in enumerate(model.rows):
                meaning = model.sample(sample_id)
                assert isinstance(meaning, reference.Sample)  # every sample was read
                totals[shard_id] += len(meaning.payload)
            for shard_id, shard in enumerate(manifest["shards"]):
                if totals[shard_id] != shard["uncompressed_byte_len"]:
                    raise Violation(
                        f"validate_cache accepted shard {shard_id} whose payloads add up to "
                        f"{totals[shard_id]}, not {shard['uncompressed_byte_len']}"
                    )

    def _same_as_seed(self, read: Read, models: list[Model]) -> bool:
        expected = [(payload, metadata) for model in models for payload, metadata in self.samples]
        got = [(payload, metadata) for _, _, payload, metadata in read.samples]
        return len(got) == len(expected) and all(
            a == b and reference.same_value(m, n)
            for (a, m), (b, n) in zip(got, expected, strict=True)
        )

    def _failure_summary(self, failure: Failure) -> str:
        """The failure's kind, its message with paths and numbers taken out."""
        message = str(failure.error).replace(str(self.mutated), "<m>")
        message = message.replace(str(self.other), "<o>")
        message = re.sub(r"[0-9a-f]{16,}", "<hex>", message)
        message = re.sub(r"\d+", "#", message)
        message = re.sub(r"'[^']{12,}'", "'...'", message)
        return f"{failure.stage}: {message[:160]}"


TARGETS: list[tuple[str, Callable[[Harness, Choices], str]]] = [
    ("cache", Harness.target_cache),
    ("cache", Harness.target_cache),
    ("manifest", Harness.target_manifest),
    ("record", Harness.target_record),
    ("lz4_record", Harness.target_lz4_record),
    ("lz4_codec", Harness.target_lz4_codec),
    ("arrow", Harness.target_arrow),
]


# ---- drivers ------------------------------------------------------------------


class Driver:
    """Runs inputs through a harness, keeps findings and prints progress."""

    def __init__(self, harness: Harness, findings: Path, keep_going: bool) -> None:
        self.harness = harness
        self.findings = findings
        self.keep_going = keep_going
        self.started = time.monotonic()
        self.last_report = self.started
        self.executions = 0
        self.violations: Counter[str] = Counter()
        self.last_input = findings / "last-input"
        findings.mkdir(parents=True, exist_ok=True)

    def run(self, data: bytes) -> None:
        self.executions += 1
        # A crash or hang kills the process before anything else could save the input.
        self.last_input.write_bytes(data)
        faulthandler.dump_traceback_later(FILE_TIMEOUT_SECONDS, exit=True)
        try:
            self.harness.run_one(data)
        except Violation as violation:
            kind = re.sub(r"\d+", "#", str(violation))[:120]
            first = self.violations[kind] == 0
            self.violations[kind] += 1
            if first:
                path = save_finding(self.findings, data, str(violation))
                print(f"\nFINDING ({path}): {violation}", file=sys.stderr, flush=True)
            if not self.keep_going:
                raise
        finally:
            faulthandler.cancel_dump_traceback_later()
        if time.monotonic() - self.last_report > 60:
            self.report()

    def report(self) -> None:
        self.last_report = time.monotonic()
        elapsed = self.last_report - self.started
        stats = {
            "executions": self.executions,
            "seconds": round(elapsed, 1),
            "executions_per_second": round(self.executions / max(elapsed, 1e-9), 1),
            "violations": dict(self.violations),
            "outcomes": dict(self.harness.stats.most_common()),
        }
        (self.findings / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
        print(
            f"[fuzz] {self.executions} executions in {elapsed:.0f} s "
            f"({stats['executions_per_second']}/s), {sum(self.violations.values())} violations",
            file=sys.stderr,
            flush=True,
        )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, help="run this many seeded random inputs")
    parser.add_argument("--seed", type=int, default=1, help="seed of --iterations")
    parser.add_argument("--replay", nargs="+", type=Path, help="run these input files")
    parser.add_argument("--keep-going", action="store_true", help="record findings, go on")
    parser.add_argument("--findings", type=Path, default=Path("fuzz/findings"))
    options, libfuzzer_arguments = parser.parse_known_args(argv[1:])
    work = work_directory()
    try:
        runtime = DatasetRuntime(num_workers=2)
        harness = Harness(runtime, work)
        if options.replay:
            return replay(harness, options.replay)
        driver = Driver(harness, options.findings, options.keep_going)
        if options.iterations is not None:
            for data in random_inputs(options.seed, options.iterations):
                driver.run(data)
            driver.report()
            return 1 if driver.violations else 0
        return fuzz_with_atheris(harness, driver, [argv[0], *libfuzzer_arguments])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def replay(harness: Harness, paths: list[Path]) -> int:
    failed = 0
    for path in paths:
        try:
            print(f"{path}: {harness.run_one(path.read_bytes())}")
        except Violation as violation:
            failed += 1
            print(f"{path}: VIOLATION {violation}")
    return 1 if failed else 0


def fuzz_with_atheris(harness: Harness, driver: Driver, argv: list[str]) -> int:
    try:
        import atheris
    except ImportError:
        print("atheris is not installed: python -m pip install atheris", file=sys.stderr)
        return 2
    harness.feedback = feedback_function()
    # The reference decoders' branches follow the structure of the mutated bytes too.
    for name, function in list(vars(reference).items()):
        if inspect.isfunction(function) and function.__module__ == reference.__name__:
            setattr(reference, name, atheris.instrument_func(function))
    atheris.Setup(argv, driver.run)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
