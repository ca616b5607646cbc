"""Configuration models: frozen pydantic models that reject unknown fields.

Python validates shapes for friendly messages; the core validates again.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

_FROZEN = ConfigDict(frozen=True, extra="forbid")
# Widths of the C ABI fields these values travel in.
_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1
# A bound on `WriterConfig.num_processes`: far above any machine's useful count.
_PROCESSES_MAX = 4096


class ShardCompression(BaseModel):
    """How payloads are stored in shards.

    ``algo="none"`` stores raw bytes and requires ``ratio == 1.0``; ``algo="lz4"``
    stores one LZ4 block per record and takes a positive, finite ``ratio``, an
    advisory figure recorded in the manifest.

    Examples:
        >>> ShardCompression(algo="lz4", ratio=2.0)
        ShardCompression(algo='lz4', ratio=2.0)
        >>> ShardCompression(algo="none", ratio=2.0)
        Traceback (most recent call last):
        pydantic_core._pydantic_core.ValidationError: 1 validation error for ShardCompression
        ...
    """

    model_config = _FROZEN

    algo: Literal["none", "lz4"] = "none"
    """The payload codec."""

    ratio: float = 1.0
    """Expected compression ratio (advisory, recorded in the manifest)."""

    @model_validator(mode="after")
    def _ratio_fits_algo(self) -> ShardCompression:
        from dataset_rt._binding import native as _native  # the core owns the rule

        _native.check_compression(self.algo, self.ratio)
        return self


class WriterProfilerConfig(BaseModel):
    """Where to write the writer's per-stage timing profile (JSON), if at all.

    The profile is also written when a write is interrupted.

    Examples:
        >>> import json
        >>> profiler = WriterProfilerConfig(enabled=True, path="profile.json")
        >>> config = WriterConfig(profiler=profiler)
        >>> _ = runtime.write_cache(Squares(10), "caches", writer_config=config)
        >>> with open("profile.json") as file:
        ...     profile = json.load(file)
        >>> sorted(profile), profile["sources"][0]["source_name"]
        (['format_version', 'sources'], 'squares')
    """

    model_config = _FROZEN

    enabled: bool = False
    """Whether to collect and write the profile."""

    path: Path = Path("dataset_rt_profile.json")
    """The JSON file to write."""

    @field_validator("path")
    @classmethod
    def _path_names_a_file(cls, path: Path) -> Path:
        # Checked here, not when the profile is written after the caches are
        # published, where a failure could only be a warning.
        try:
            encodable = "\x00" not in str(path) and bool(os.fsencode(path))
        except UnicodeEncodeError:
            encodable = False
        if path.name in ("", ".", "..") or not encodable:
            raise ValueError(
                f"path must name a file (no NUL byte, encodable as a file name), got {str(path)!r}"
            )
        return path


class WriterConfig(BaseModel):
    """How caches are written.

    Examples:
        >>> config = WriterConfig(
        ...     max_shard_bytes=256 << 20,
        ...     shard_compression=ShardCompression(algo="lz4", ratio=2.0),
        ...     show_progress=False,
        ... )
        >>> [result] = runtime.write_cache(Squares(10), "caches", writer_config=config)
        >>> sorted(path.name for path in result.path.iterdir())
        ['index.bin', 'manifest.json', 'metadata.arrow', 'records.crc32c', 'shards']
    """

    model_config = _FROZEN

    prefetch_size: int = Field(default=64, gt=0, le=_U32_MAX)
    """Samples handed to the core per batch is at least this; it also caps the
    batches in flight, which bounds the writer's memory."""

    max_shard_bytes: int = Field(default=64 * 1024 * 1024, gt=0, le=_U64_MAX)
    """A shard rotates before a record would push it past this size; a larger
    single record gets a shard of its own."""

    shard_compression: ShardCompression = Field(default_factory=ShardCompression)
    """The payload codec."""

    show_progress: bool = True
    """Show committed samples/s and MB/s (and sources done with ETA) on stderr."""

    validate_cache: bool = False
    """In `from_cache_sources`, verify every SHA-256 of a reused cache first."""

    profiler: WriterProfilerConfig = Field(default_factory=WriterProfilerConfig)
    """Optional per-stage timing profile."""

    page_cache: Literal["auto", "keep", "drop"] = "auto"
    """Which written shards stay in the page cache once hashed and on disk (Linux):
    ``"auto"`` keeps them while the cache is at most half of the memory available
    when the write starts and drops the rest, so the first read after writing a
    cache that fits comes from memory and a much larger write does not fill it;
    ``"keep"`` keeps every shard, ``"drop"`` none."""

    format_version: Literal[2, 3] = 2
    """The storage format of new caches. 2 (the default) is read by dataset-rt 0.2.4
    and 0.4.8; 3 is read by dataset-rt 0.4.8 and not 0.2.4, and stores each cache's
    ``cache_id`` (derived from its source name) in its manifest, so samples keep
    their ids whatever the order of the caches a dataset is opened with."""

    num_processes: int = 0
    """Source-writing processes (0 <= N <= 4096). 0 (the default) writes every source
    in the calling process, one after the other. N > 0 writes up to N sources at
    once, each in a process of its own started with the ``"spawn"`` method (the
    sources must pickle, and a script needs ``if __name__ == "__main__":``), with the
    same writer and the same bytes on disk; results stay in source order. For
    sources whose Python work (decoding, encoding, augmenting) is the bottleneck."""

    process_timeout_seconds: float = 3600.0
    """With ``num_processes > 0``: the seconds (positive, finite) a writer process may
    take to start and to write one source (unpickling it included). A source that
    takes longer becomes a `CacheWriteError` naming it and the limit; its process is
    stopped and its staging directory removed, and the other sources go on. Unused
    with ``num_processes=0``."""

    @field_validator("num_processes", mode="before")
    @classmethod
    def _processes_count(cls, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(
                f"num_processes must be an int (0 writes in this process), got {value!r}"
            )
        if not 0 <= value <= _PROCESSES_MAX:
            raise ValueError(
                f"num_processes must be between 0 (write in this process) and "
                f"{_PROCESSES_MAX}, got {value}"
            )
        return value

    @field_validator("process_timeout_seconds", mode="before")
    @classmethod
    def _timeout_is_positive(cls, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"process_timeout_seconds must be a number, got {value!r}")
        if not 0 < value < math.inf:  # NaN fails too
            raise ValueError(
                f"process_timeout_seconds must be a positive, finite number of seconds, "
                f"got {value!r}"
            )
        return float(value)


class ReaderConfig(BaseModel):
    """How caches are read and sampled.

    Examples:
        >>> config = ReaderConfig(seed=42, replacement=False)  # every epoch a permutation
        >>> permuted = runtime.cached_dataset([cache_path], reader_config=config)
        >>> sorted(s.sample_id for s in permuted) == list(range(100))
        True
        >>> ReaderConfig(seed=0, shuffle=False, on_corrupt="skip").on_corrupt
        'skip'
        >>> ReaderConfig(shuffle=False)
        Traceback (most recent call last):
        pydantic_core._pydantic_core.ValidationError: 1 validation error for ReaderConfig
          Field required: ReaderConfig needs a seed, e.g. ReaderConfig(seed=0). ...
    """

    model_config = _FROZEN

    seed: int = Field(ge=0, lt=2**64)
    """Seed of the deterministic sample stream (0 <= seed < 2**64). Required, also
    with ``shuffle=False``: it keys the shuffled stream and is part of every resume
    state's fingerprint, so it is never chosen implicitly."""

    prefetch_size: int = Field(default=64, gt=0, le=_U32_MAX)
    """Samples read ahead of the consumer; bounds the reader's memory."""

    shuffle: bool = True
    """Random order (True) or table order (False)."""

    validate_cache: bool = False
    """Verify every SHA-256 (metadata, index, shards) while loading."""

    replacement: bool = True
    """With ``shuffle=True``: weighted draws with replacement (True), or every epoch a
    fresh random permutation of the active table's rows, each row once (False; the
    table's weights must all be equal)."""

    payload: Literal["bytes", "memoryview"] = "bytes"
    """How payloads are handed out: as ``bytes`` (the default), or as read-only
    ``memoryview`` objects. With ``"memoryview"``, an uncompressed payload of 64 KiB
    or more is a view of its shard's bytes, mapped into memory and checked against
    its record's checksum by the read-ahead workers: no copy is made. A view stays
    valid while it is referenced, also after the dataset is gone (it keeps its
    shard mapped). Smaller and compressed payloads are views of a copy. Views
    cannot be pickled: decode them in the process that reads them (in a DataLoader
    worker, before collate). A shard file shortened on disk while it is mapped ends
    the process (SIGBUS) when the missing bytes are read."""

    on_corrupt: Literal["raise", "skip"] = "raise"
    """What iteration does with a sample whose record fails its checks (checksum,
    placement, framing, embedded metadata, LZ4): ``"raise"`` a ``ValueError`` naming
    it, or ``"skip"`` it. Skipping changes the stream: the sample is left out but
    keeps its stream position, so resume states are unchanged; each iterator lists
    what it skipped (``skipped``) and the first skip of each cache is warned about
    (``RuntimeWarning``). With ``"skip"`` large payloads are read with their batch
    (one more copy). ``get`` and ``get_many`` always raise."""

    @model_validator(mode="before")
    @classmethod
    def _seed_is_given(cls, data: Any) -> Any:
        # pydantic's own message for a missing field ("Field required") says neither
        # why the seed is required nor what to pass; its phrase and error type stay,
        # for code written against dataset-rt 0.2.4, which requires the seed too.
        if isinstance(data, dict) and "seed" not in data:
            raise PydanticCustomError(
                "missing",
                "Field required: ReaderConfig needs a seed, e.g. ReaderConfig(seed=0). "
                "The seed keys the shuffled sample stream and the fingerprint of every "
                "resume state, so it is never chosen implicitly (also with shuffle=False)",
            )
        return data


class Mix(BaseModel):
    """One cache's part of a mix (`CachedDataset.set_mix`): its exact count of
    samples per epoch, given by exactly one of three fields.

    With ``n`` active rows, ``repeat=r`` gives ``floor(r * n + 1/2)`` samples
    (``repeat=2.0``: every row twice; ``repeat=0.5``: half of the rows, a fresh
    half each epoch), ``choose=k`` gives ``k``, and ``proportion=p`` gives that
    share of the epoch length set with ``set_epoch_len`` (every cache then needs
    a proportion, summing to 1).

    Examples:
        >>> Mix(repeat=2.0)
        Mix(proportion=None, repeat=2.0, choose=None)
        >>> Mix(choose=75).choose
        75
        >>> Mix(repeat=1.0, choose=3)
        Traceback (most recent call last):
        pydantic_core._pydantic_core.ValidationError: 1 validation error for Mix
        ...
    """

    model_config = _FROZEN

    proportion: float | None = Field(default=None, gt=0, le=1)
    """The cache's share of the epoch (0 < p <= 1)."""

    repeat: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """How many times the cache's rows are read per epoch (finite, > 0; fractions
    take a fresh subset without replacement each epoch)."""

    choose: int | None = Field(default=None, ge=1, le=2**53)
    """Exactly this many samples of the cache per epoch (>= 1)."""

    @model_validator(mode="after")
    def _one_form(self) -> Mix:
        forms = ("proportion", "repeat", "choose")
        given = [name for name in forms if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "Mix takes exactly one of proportion, repeat or choose, got "
                + (", ".join(given) if given else "none")
            )
        return self


# The sub-folder of the user cache directory that holds DatasetRT's local copies.
_CACHE_SUBDIR = "dataset-rt"
# The environment variable that names the local directory when `RemoteConfig.local_dir`
# is None.
CACHE_DIR_ENV = "DATASET_RT_CACHE_DIR"


def platform_cache_dir(platform: str, environ: Mapping[str, str], home: Path) -> Path:
    """The user cache directory of a platform (``sys.platform``): on Windows
    ``%LOCALAPPDATA%`` (else ``~/AppData/Local``), on macOS ``~/Library/Caches``,
    elsewhere ``$XDG_CACHE_HOME`` when it is an absolute path (the XDG rule) and
    ``~/.cache`` otherwise."""
    if platform == "win32":
        local_app_data = environ.get("LOCALAPPDATA", "")
        return Path(local_app_data) if local_app_data else home / "AppData" / "Local"
    if platform == "darwin":
        return home / "Library" / "Caches"
    xdg = environ.get("XDG_CACHE_HOME", "")
    return Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".cache"


class RemoteConfig(BaseModel):
    """How caches in object storage (``s3://``, ``http(s)://``) are fetched and kept
    locally, and where caches written to ``s3://`` are staged. Every field is optional.

    Pass it as ``remote=`` to `DatasetRuntime.cached_dataset` and `dataset_rt.verify`,
    and to `DatasetRuntime.write_cache` and `DatasetRuntime.from_cache_sources` for an
    ``s3://`` base (`docs/remote.md`).

    Examples:
        >>> remote = RemoteConfig(local_dir="remote-copies", budget_bytes=10 << 30, retries=3)
        >>> remote.resolved_local_dir().name
        'remote-copies'
        >>> RemoteConfig(max_in_flight=0)
        Traceback (most recent call last):
        pydantic_core._pydantic_core.ValidationError: 1 validation error for RemoteConfig
        ...
    """

    model_config = _FROZEN

    local_dir: str | Path | None = None
    """Where fetched files are kept, and caches written to ``s3://`` are staged
    (``staging/``) until they are uploaded (a ``str`` is stored as a ``Path``). None:
    ``$DATASET_RT_CACHE_DIR`` when set and not empty, else the platform's user cache
    directory + ``dataset-rt`` (`resolved_local_dir`)."""

    budget_bytes: int | None = Field(default=None, ge=1, le=_U64_MAX, strict=True)
    """The most bytes of fetched shards kept in ``local_dir`` (>= 1); None: no limit.

    Counts the shard files of every cache folder in ``local_dir`` and the downloads
    under way, never the index, metadata and manifest files. Shared by every process
    that reads with the same ``local_dir`` (give them the same budget). A shard no
    reader will use again is evicted first, then the one whose next use is farthest;
    a shard being read or downloaded never is. Opening a cache refuses a budget below
    its two largest shards. Affects reading only (`docs/remote.md`, "The byte
    budget")."""

    retries: int = Field(default=5, ge=0, le=_U32_MAX, strict=True)
    """Retries of a failed download after its first attempt (>= 0), with exponential
    backoff and full jitter between attempts."""

    timeout_s: float = 60.0
    """Seconds (positive, finite) a connection may take to open, and a response may
    stall without a byte, before the attempt is abandoned (and retried)."""

    max_in_flight: int = Field(default=4, ge=1, le=_U32_MAX, strict=True)
    """The most shard downloads at once for a dataset in one process (>= 1): shards
    are fetched ahead of the reads, in the order the stream reads them, and a read
    that needs a shard now takes the next free download."""

    revalidate: bool = Field(default=True, strict=True)
    """Whether every open of a remote cache fetches its ``manifest.json`` to learn
    which version the URL holds (True, the default). False: a cache whose version
    last fetched into ``local_dir`` is still there opens from it without a request,
    as fast as a local cache; shards it lacks are still fetched. With False, a cache
    written again under the same URL is not seen until an open with True (`docs/remote.md`,
    "Opening without a request"). Either way, a dataset reopened in a DataLoader worker
    or another process opens the version it first read without a request, while
    ``local_dir`` holds it."""

    @field_validator("local_dir", mode="before")
    @classmethod
    def _local_dir_is_a_path(cls, value: object) -> Path | None:
        if value is None:
            return None
        if not isinstance(value, (str, os.PathLike)):
            raise ValueError(f"local_dir must be a str, a Path or None, got {value!r}")
        text = os.fspath(value)
        if not isinstance(text, str) or not text or "\x00" in text:
            raise ValueError(
                f"local_dir must name a directory (not empty, no NUL byte), got {value!r}"
            )
        return Path(text)

    @field_validator("timeout_s", mode="before")
    @classmethod
    def _timeout_is_positive(cls, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"timeout_s must be a number of seconds, got {value!r}")
        if not 0 < value < math.inf:  # NaN fails too
            raise ValueError(
                f"timeout_s must be a positive, finite number of seconds, got {value!r}"
            )
        return float(value)

    def resolved_local_dir(self) -> Path:
        """The local directory in use: ``local_dir`` (``~`` expanded), else
        ``$DATASET_RT_CACHE_DIR`` when set and not empty, else the platform's user
        cache directory + ``dataset-rt``: ``$XDG_CACHE_HOME/dataset-rt`` or
        ``~/.cache/dataset-rt`` on Linux, ``~/Library/Caches/dataset-rt`` on macOS,
        ``%LOCALAPPDATA%\\dataset-rt`` on Windows. Not created here.

        Examples:
            >>> import os
            >>> os.environ["DATASET_RT_CACHE_DIR"] = "/scratch/copies"
            >>> RemoteConfig().resolved_local_dir().as_posix()
            '/scratch/copies'
            >>> RemoteConfig(local_dir="/data/copies").resolved_local_dir().as_posix()
            '/data/copies'
            >>> del os.environ["DATASET_RT_CACHE_DIR"]
        """
        if self.local_dir is not None:
            return Path(self.local_dir).expanduser()
        from_env = os.environ.get(CACHE_DIR_ENV, "")
        if from_env:
            return Path(from_env).expanduser()
        return platform_cache_dir(sys.platform, os.environ, Path.home()) / _CACHE_SUBDIR
