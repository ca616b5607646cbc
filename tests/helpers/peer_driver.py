"""Drive whichever `dataset_rt` this interpreter imports from a JSON plan; dump results as JSON.

Used by tests/test_interop_peer*.py against BOTH implementations: run with the
peer's virtual environment (dataset-rt==0.2.4, the Rust/PyO3 package) it drives
the peer; run with this project's interpreter it drives DatasetRT. It only uses
the public API the two share, so it is also a check that code written for
dataset-rt 0.2.4 runs unchanged here.

    python peer_driver.py PLAN.json OUT.json

PLAN.json is a list of operations; OUT.json receives one result per operation:

- ``{"op": "write", "base": DIR, "sources": [{"name", "samples": [[data, metadata], ...]}],
  "writer": {"algo": "none"|"lz4", "ratio": float, "max_shard_bytes": int|null}}``
  -> ``{"results": [["success", name, path] | ["error", name, message], ...]}``
- ``{"op": "read", "paths": [...], "validate_cache": bool, "seed": int}`` (shuffle=False)
  -> ``{"len", "samples": [[cache_id, sample_id, data, metadata], ...], "table"}``
  or ``{"error": [type name, message]}``; with ``"pairs": [[cache_id, sample_id], ...]``
  also ``"get"``: those samples read by identity (`get` here, `get_item` in dataset-rt
  0.4.8) or the error; with ``"keep_cache_ids": [...]`` also ``"kept"``: the
  identities iterated after `set_samples_metadata` keeps only those caches' rows.
- ``{"op": "update_manifests", "paths": [...]}`` -> ``{"entries": [[manifest path,
  cache_id, status], ...]}`` or ``{"error": ...}`` (dataset-rt 0.4.8 and DatasetRT; the
  former returns a result object, the latter raises).
- ``{"op": "user_script", "workdir": DIR}`` -> what `user_script` observed.
- ``{"op": "environment"}`` -> the implementation's file and version.

Encodings (exact in both directions): payload bytes as base64; a metadata value
as ``[kind, value]`` with kind ``bool``/``int``/``float``/``str`` and a float as
``float.hex()``, so -0.0, subnormals and every bit of a float survive JSON.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the interpreter's own dataset_rt, ours or the peer's
    from dataset_rt import (
        CachedDataset,
        CacheInput,
        CacheSource,
        CacheWriteResult,
        DatasetRuntime,
        ReaderConfig,
        WriterConfig,
    )

# --- encodings (shared with the tests, which import this module) -----------------------------


def encode_bytes(data: bytes) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def decode_bytes(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))


def encode_value(value: Any) -> list[Any]:
    """One metadata (or table) value as ``[kind, value]``; bool is checked before int."""
    if value is None:
        return ["null", None]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", value]
    if isinstance(value, float):
        return ["float", value.hex()]
    if isinstance(value, str):
        return ["str", value]
    return ["other", f"{type(value).__name__}: {value!r}"]


def decode_value(encoded: list[Any]) -> Any:
    kind, value = encoded
    if kind == "float":
        return float.fromhex(value)
    if kind in ("bool", "int", "str", "null"):
        return value
    raise ValueError(f"cannot decode metadata value {encoded!r}")


def encode_metadata(metadata: Any) -> dict[str, list[Any]]:
    return {str(key): encode_value(metadata[key]) for key in metadata}


def decode_metadata(encoded: dict[str, list[Any]]) -> dict[str, Any]:
    return {key: decode_value(value) for key, value in encoded.items()}


def encode_table(frame: Any) -> dict[str, Any]:
    """A polars DataFrame as column names, dtype names and encoded column values."""
    return {
        "columns": [[name, str(dtype)] for name, dtype in frame.schema.items()],
        "values": [
            [encode_value(v) for v in frame.get_column(name).to_list()] for name in frame.columns
        ],
    }


def encode_samples(samples: Any) -> list[list[Any]]:
    return [
        [
            encode_value(sample.cache_id),
            encode_value(sample.sample_id),
            encode_bytes(sample.data),
            encode_metadata(sample.metadata),
        ]
        for sample in samples
    ]


# --- operations ----------------------------------------------------------------------------------


class ListSource:
    """A named source over decoded ``(payload, metadata)`` pairs."""

    def __init__(self, name: str, samples: list[tuple[bytes, dict[str, Any]]]) -> None:
        self.name = name
        self.samples = samples
        self.iterations = 0

    def __iter__(self) -> Iterator[CacheInput]:
        from dataset_rt import CacheInput

        self.iterations += 1
        for data, metadata in self.samples:
            yield CacheInput(data=data, metadata=metadata)


def writer_config(spec: dict[str, Any]) -> WriterConfig:
    from dataset_rt import ShardCompression, WriterConfig

    options: dict[str, Any] = {
        "show_progress": False,
        "shard_compression": ShardCompression(
            algo=spec.get("algo", "none"), ratio=spec.get("ratio", 1.0)
        ),
    }
    if spec.get("max_shard_bytes") is not None:
        options["max_shard_bytes"] = spec["max_shard_bytes"]
    if "format_version" in spec:  # DatasetRT only: dataset-rt writes its one format
        options["format_version"] = spec["format_version"]
    return WriterConfig(**options)


def op_write(plan: dict[str, Any]) -> dict[str, Any]:
    from dataset_rt import CacheWriteError, CacheWriteSuccess, DatasetRuntime

    sources: list[CacheSource] = [
        ListSource(
            source["name"],
            [
                (decode_bytes(data), decode_metadata(metadata))
                for data, metadata in source["samples"]
            ],
        )
        for source in plan["sources"]
    ]
    runtime = DatasetRuntime(num_workers=plan.get("num_workers", 2))
    results = runtime.write_cache(
        sources, plan["base"], writer_config=writer_config(plan.get("writer", {}))
    )
    encoded = []
    for result in results:
        match result:
            case CacheWriteSuccess(source_name=name, path=path):
                encoded.append(["success", name, str(path)])
            case CacheWriteError(source_name=name, message=message):
                encoded.append(["error", name, message])
            case _:
                encoded.append(["unknown", repr(result), ""])
    return {"results": encoded}


def op_read(plan: dict[str, Any]) -> dict[str, Any]:
    from dataset_rt import DatasetRuntime, ReaderConfig

    runtime = DatasetRuntime(num_workers=plan.get("num_workers", 2))
    config = ReaderConfig(
        seed=plan.get("seed", 0),
        prefetch_size=plan.get("prefetch_size", 8),
        shuffle=False,
        validate_cache=plan["validate_cache"],
    )
    try:
        dataset = runtime.cached_dataset(plan["paths"], reader_config=config)
        length = len(dataset)
        samples = encode_samples(dataset)
        table = dataset.samples_metadata()
    except Exception as error:  # noqa: BLE001 - reported to the test, which decides
        return {"error": [type(error).__name__, str(error)]}
    read: dict[str, Any] = {"len": length, "samples": samples, "table": encode_table(table)}
    if "pairs" in plan:
        read["get"] = read_by_identity(dataset, plan["pairs"])
    if "keep_cache_ids" in plan:
        import polars as pl

        kept = table.filter(pl.col("cache_id").is_in(plan["keep_cache_ids"]))
        dataset.set_samples_metadata(kept)
        read["kept"] = [[s.cache_id, s.sample_id] for s in dataset]
    return read


def read_by_identity(dataset: Any, pairs: list[list[int]]) -> Any:
    """The samples `pairs` name, one call each (`get` here, `get_item` in dataset-rt 0.4.8)."""
    get = getattr(dataset, "get", None) or dataset.get_item
    try:
        return encode_samples([get(cache_id, sample_id) for cache_id, sample_id in pairs])
    except IndexError as error:  # the class both raise (DatasetRT's derives from it)
        return {"error": ["IndexError", str(error)]}
    except Exception as error:  # noqa: BLE001 - reported to the test, which decides
        return {"error": [type(error).__name__, str(error)]}


def op_update_manifests(plan: dict[str, Any]) -> dict[str, Any]:
    """Migrate the caches of a dataset opened from `paths` to format 3."""
    from dataset_rt import DatasetRuntime, ReaderConfig

    runtime = DatasetRuntime(num_workers=plan.get("num_workers", 2))
    try:
        dataset = runtime.cached_dataset(plan["paths"], reader_config=ReaderConfig(seed=0))
        # dataset-rt 0.4.8 returns Ok(report) or Err(error), DatasetRT the report: typed
        # as either implementation's, whichever this interpreter imports.
        outcome: Any = dataset.update_manifests(3)
    except Exception as error:  # noqa: BLE001 - reported to the test, which decides
        return {"error": [type(error).__name__, str(error)]}
    if hasattr(outcome, "error"):
        return {"error": [type(outcome.error).__name__, str(outcome.error)]}
    report = getattr(outcome, "value", outcome)
    return {"entries": [[str(e.path), e.cache_id, e.status] for e in report.entries]}


def op_environment(plan: dict[str, Any]) -> dict[str, Any]:
    import dataset_rt

    try:
        from importlib.metadata import version

        installed = version("dataset-rt")
    except Exception:  # noqa: BLE001 - a source checkout has no distribution metadata
        installed = None
    return {"file": dataset_rt.__file__, "distribution_version": installed}


# --- the user script ------------------------------------------------------------------------------
#
# Written the way a dataset-rt 0.2.4 user writes code (its README quickstart):
# everything it records must come out the same on both implementations. Parts
# that 0.2.4 lacks (get_metadata / update_metadata / set_epoch_len) run only
# where they exist and are recorded under "extensions". Each part below records
# into `session.out` and runs in the order `user_script` gives.

PUBLIC_NAMES = [
    "CacheInput",
    "CachedSample",
    "CacheSource",
    "DatasetRuntime",
    "CachedDataset",
    "ReaderConfig",
    "WriterConfig",
    "WriterProfilerConfig",
    "ShardCompression",
    "CacheWriteSuccess",
    "CacheWriteError",
    "CacheWriteResult",
    "CacheSourcesDatasetSuccess",
    "CacheSourcesDatasetError",
    "CacheSourcesDatasetResult",
]


class Images:
    """The quickstart's source: six images, every third of a rare class."""

    name = "train_images"

    def __init__(self) -> None:
        self.iterations = 0

    def __iter__(self) -> Iterator[CacheInput]:
        from dataset_rt import CacheInput

        self.iterations += 1
        for sample_id in range(6):
            image_bytes = bytes([sample_id]) * (10 + sample_id)
            label = "rare_class" if sample_id % 3 == 0 else "common"
            yield CacheInput(data=image_bytes, metadata={"index": sample_id, "label": label})


class Extra:
    """Payloads given as a bytearray and a memoryview."""

    name = "extra"

    def __iter__(self) -> Iterator[CacheInput]:
        from dataset_rt import CacheInput

        yield CacheInput(bytearray(b"bytearray payload"), {"index": 100, "label": "extra"})
        yield CacheInput(memoryview(b"memoryview payload"), {"index": 101, "label": "extra"})


class Broken:
    """A source that fails after its first sample."""

    name = "broken"

    def __iter__(self) -> Iterator[CacheInput]:
        from dataset_rt import CacheInput

        yield CacheInput(b"ok", {"index": 0, "label": "x"})
        raise RuntimeError("broken source")


class BadName:
    """A source whose name is not one plain path segment."""

    name = "not/plain"

    def __iter__(self) -> Iterator[CacheInput]:
        from dataset_rt import CacheInput

        yield CacheInput(b"x", {"index": 0, "label": "x"})


class UserSession:
    """What the parts of the user script share: its runtime, configurations and source,
    what it records (`out`), and the paths of the caches written (compared on their own).
    (Not a dataclass: `dataclass` needs the module in sys.modules, which a test's
    `load_script` does not do.)"""

    def __init__(
        self, runtime: DatasetRuntime, reader_config: ReaderConfig, writer: WriterConfig
    ) -> None:
        self.runtime = runtime
        self.reader_config = reader_config
        self.writer = writer
        self.images = Images()
        self.out: dict[str, Any] = {}
        self.result_paths: list[str] = []

    def describe_results(self, results: Iterable[CacheWriteResult]) -> list[Any]:
        from dataset_rt import CacheWriteError, CacheWriteSuccess

        described: list[Any] = []
        for result in results:
            match result:
                case CacheWriteSuccess(source_name=source_name, path=path):
                    self.result_paths.append(str(path))
                    described.append(["success", source_name, Path(path).name, Path(path).is_dir()])
                case CacheWriteError(source_name=source_name, message=message):
                    described.append(
                        ["error", source_name, isinstance(message, str) and bool(message)]
                    )
                case _:
                    described.append(["unmatched", repr(result)])
        return described


def describe_errors(results: Iterable[CacheWriteResult]) -> list[Any]:
    """Errors by message content the two implementations share."""
    from dataset_rt import CacheWriteError

    described = []
    for result in results:
        match result:
            case CacheWriteError(name, message):  # positional pattern
                described.append(
                    [name, "cache path already exists" in message, "broken source" in message]
                )
    return described


def user_script(plan: dict[str, Any]) -> dict[str, Any]:
    """Run the parts of the user script in order, in `plan["workdir"]`; what they recorded."""
    from dataset_rt import DatasetRuntime, ReaderConfig, ShardCompression, WriterConfig

    os.chdir(plan["workdir"])  # the quickstart uses a relative Path("cache")
    session = UserSession(
        runtime=DatasetRuntime(num_workers=2),
        reader_config=ReaderConfig(seed=42, prefetch_size=64, shuffle=False, validate_cache=False),
        writer=WriterConfig(
            prefetch_size=64,
            shard_compression=ShardCompression(algo="none", ratio=1.0),
            show_progress=False,
            validate_cache=False,
        ),
    )
    session.out["result_paths"] = session.result_paths
    record_public_names(session.out)
    session.out["num_workers"] = session.runtime.num_workers
    quickstart_and_reuse(session)
    write_several_sources(session)
    record_shapes(session.out)
    dataset = two_caches(session)
    samples_metadata(session.out, dataset)
    shuffled_reading(session, dataset)
    errors_a_user_catches(session)
    session.out["extensions"] = extensions(dataset)
    return session.out


def record_public_names(out: dict[str, Any]) -> None:
    """The public names, in `dataset_rt` and in `dataset_rt.api`, and the same objects."""
    import dataset_rt
    import dataset_rt.api

    out["public_names"] = {
        name: [hasattr(dataset_rt, name), hasattr(dataset_rt.api, name)] for name in PUBLIC_NAMES
    }
    out["api_same_objects"] = all(
        getattr(dataset_rt, name) is getattr(dataset_rt.api, name)
        for name in PUBLIC_NAMES
        if hasattr(dataset_rt, name) and hasattr(dataset_rt.api, name)
    )


def quickstart_and_reuse(session: UserSession) -> None:
    """1. the quickstart: from_cache_sources with the two-branch match; 2. reuse: a second
    from_cache_sources does not iterate the source again."""
    from dataset_rt import CacheSourcesDatasetError, CacheSourcesDatasetSuccess
    from dataset_rt.api import CachedSample  # code that imports the api module directly

    runtime, images, out = session.runtime, session.images, session.out
    reader_config, writer = session.reader_config, session.writer
    result = runtime.from_cache_sources(
        images, Path("cache"), reader_config=reader_config, writer_config=writer
    )
    match result:
        case CacheSourcesDatasetSuccess(dataset, results):
            out["quickstart"] = ["success", session.describe_results(results)]
        case CacheSourcesDatasetError(results, message):
            raise RuntimeError(message)
    samples = []
    for sample in dataset:
        samples.append([sample.data.hex(), sample.metadata["label"], sample.metadata["index"]])
        assert isinstance(sample, CachedSample)
    out["quickstart_samples"] = samples
    out["quickstart_len"] = len(dataset)
    out["quickstart_iterations"] = images.iterations

    again = runtime.from_cache_sources(
        images, Path("cache"), reader_config=reader_config, writer_config=writer
    )
    match again:
        case CacheSourcesDatasetSuccess(dataset=reused, results=reused_results):
            described = session.describe_results(reused_results)
            out["reuse"] = [described, images.iterations, len(reused)]
        case _:
            out["reuse"] = ["unexpected", repr(again)]


def write_several_sources(session: UserSession) -> None:
    """3. write_cache with several sources, one failing, one with a bad name, one existing."""
    out = session.out
    sources: list[CacheSource] = [Extra(), Broken(), BadName(), session.images]
    results = session.runtime.write_cache(sources, Path("cache"), writer_config=session.writer)
    out["write_cache"] = [type(r).__name__ for r in results]
    out["write_cache_described"] = [
        r for r in session.describe_results(results) if r[0] == "success"
    ]
    out["write_cache_errors"] = describe_errors([results[0], results[1], results[3]])
    # the source_name reported for a source whose name is not one plain path segment
    out["invalid_name_label"] = [type(results[2]).__name__, results[2].source_name]
    out["broken_not_published"] = Path("cache", "broken").exists()


def record_shapes(out: dict[str, Any]) -> None:
    """4. the positional record shapes and NamedTuple fields."""
    from dataset_rt import (
        CacheInput,
        CacheSourcesDatasetError,
        CacheSourcesDatasetSuccess,
        CacheWriteError,
        CacheWriteSuccess,
    )
    from dataset_rt.api import CachedSample

    out["fields"] = {
        cls.__name__: list(cls._fields)
        for cls in (
            CacheInput,
            CachedSample,
            CacheWriteSuccess,
            CacheWriteError,
            CacheSourcesDatasetSuccess,
            CacheSourcesDatasetError,
        )
    }


def two_caches(session: UserSession) -> CachedDataset:
    """5. cached_dataset over two caches: cache_id follows the order of paths."""
    from dataset_rt import ReaderConfig
    from dataset_rt.api import CachedSample

    out = session.out
    dataset = session.runtime.cached_dataset(
        [Path("cache") / "extra", Path("cache") / "train_images"],
        reader_config=ReaderConfig(seed=1, shuffle=False),
    )
    out["two_caches"] = [
        [
            s.cache_id,
            s.sample_id,
            bytes(s.data).decode("latin-1"),
            dict(s.metadata),
            type(s.data).__name__,
        ]
        for s in dataset
    ]
    out["two_caches_len"] = len(dataset)
    first = next(iter(dataset))
    match first:
        case CachedSample(data, metadata, cache_id, sample_id):
            out["sample_match"] = [data.hex(), sorted(metadata), cache_id, sample_id]
    out["metadata_mapping"] = [
        first.metadata == {"label": "extra", "index": 100},
        "label" in first.metadata,
        len(first.metadata),
        sorted(first.metadata.items()),
        first.metadata.get("missing", "default"),
    ]
    return dataset


def samples_metadata(out: dict[str, Any], dataset: CachedDataset) -> None:
    """6. samples_metadata / set_samples_metadata (the README's weighting example)."""
    import polars as pl

    table = dataset.samples_metadata()
    out["samples_metadata"] = encode_table(table)
    rare = table.with_columns(
        pl.when(pl.col("label") == "rare_class").then(5.0).otherwise(1.0).alias("weight")
    )
    dataset.set_samples_metadata(rare)
    out["samples_metadata_after_set"] = encode_table(dataset.samples_metadata())
    out["order_after_set"] = [[s.cache_id, s.sample_id] for s in dataset]
    bad = table.with_columns(pl.lit(-1.0).alias("weight"))
    try:
        dataset.set_samples_metadata(bad)
        out["negative_weight"] = "accepted"
    except ValueError:
        out["negative_weight"] = "ValueError"
    out["table_unchanged_after_rejection"] = (
        encode_table(dataset.samples_metadata()) == out["samples_metadata_after_set"]
    )


def shuffled_reading(session: UserSession, dataset: CachedDataset) -> None:
    """7. shuffled reading: streams differ between implementations, their shape does not."""
    from dataset_rt import ReaderConfig

    paths = [Path("cache") / "extra", Path("cache") / "train_images"]
    shuffled = session.runtime.cached_dataset(
        paths, reader_config=ReaderConfig(seed=7, shuffle=True)
    )
    by_identity = {(s.cache_id, s.sample_id): s.data for s in dataset}
    epoch = list(shuffled)
    session.out["shuffled"] = [
        len(shuffled),
        len(epoch),
        all(by_identity[(s.cache_id, s.sample_id)] == s.data for s in epoch),
    ]
    replay = session.runtime.cached_dataset(paths, reader_config=ReaderConfig(seed=7, shuffle=True))
    session.out["shuffled_reproducible"] = [(s.cache_id, s.sample_id) for s in replay] == [
        (s.cache_id, s.sample_id) for s in epoch
    ]


def errors_a_user_catches(session: UserSession) -> None:
    """8. errors a user may catch."""
    from dataset_rt import CachedDataset, CacheSourcesDatasetError, DatasetRuntime

    runtime, reader_config, writer = session.runtime, session.reader_config, session.writer
    errors: dict[str, Any] = {}
    try:
        DatasetRuntime(num_workers=0)
    except ValueError as error:
        errors["num_workers"] = str(error)
    try:
        CachedDataset()
    except TypeError:
        errors["construct"] = "TypeError"
    try:
        runtime.cached_dataset([Path("cache") / "missing"], reader_config=reader_config)
    except ValueError:
        errors["missing_cache"] = "ValueError"
    nothing = runtime.from_cache_sources(
        [Broken()], Path("cache"), reader_config=reader_config, writer_config=writer
    )
    match nothing:
        case CacheSourcesDatasetError(results=failed, message=message):
            errors["no_caches"] = [
                message.startswith("no caches were written: broken: "),
                session.describe_results(failed),
            ]
        case _:
            errors["no_caches"] = repr(nothing)
    empty = runtime.from_cache_sources(
        [], Path("cache"), reader_config=reader_config, writer_config=writer
    )
    match empty:
        case CacheSourcesDatasetError(results, message):
            errors["no_sources"] = [results, message]
    try:
        runtime.write_cache([Extra(), Extra()], Path("cache2"), writer_config=writer)
    except ValueError as error:
        errors["duplicate"] = str(error).startswith("duplicate generated cache path")
    session.out["errors"] = errors


def extensions(dataset: CachedDataset) -> dict[str, Any]:
    """9. extensions of this project; absent in dataset-rt 0.2.4."""
    import polars as pl

    found: dict[str, Any] = {}
    if hasattr(dataset, "get_metadata") and hasattr(dataset, "update_metadata"):
        table = dataset.get_metadata()
        found["get_equals_samples_metadata"] = table.equals(dataset.samples_metadata())
        subset = table.filter(pl.col("label") != "common").with_columns(
            pl.lit("note").alias("note")
        )
        dataset.update_metadata(subset)
        found["after_update"] = [[s.cache_id, s.sample_id] for s in dataset]
        found["extra_column_kept"] = "note" in dataset.get_metadata().columns
    if hasattr(dataset, "set_epoch_len"):
        dataset.set_epoch_len(3)
        found["epoch_len"] = [len(dataset), [[s.cache_id, s.sample_id] for s in dataset]]
    return found


OPERATIONS = {
    "write": op_write,
    "read": op_read,
    "update_manifests": op_update_manifests,
    "user_script": user_script,
    "environment": op_environment,
}


def run_plan(plan: list[dict[str, Any]]) -> list[Any]:
    return [OPERATIONS[step["op"]](step) for step in plan]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: peer_driver.py PLAN.json OUT.json", file=sys.stderr)
        return 2
    plan = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    try:
        results = run_plan(plan)
    except Exception:  # noqa: BLE001 - any failure is printed for the test to report
        traceback.print_exc()
        return 1
    Path(argv[2]).write_text(json.dumps(results), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
