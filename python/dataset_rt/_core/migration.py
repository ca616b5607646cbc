"""Migrating caches to format 3 (`CachedDataset.update_manifests`, `dataset-rt
migrate`): the report types and the call into the core, which checks and
rewrites the manifests (`drt_caches_migrate`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal, NamedTuple

from dataset_rt import errors
from dataset_rt._binding import native as _native


class ManifestUpdateEntry(NamedTuple):
    """What a migration did to one cache.

    Examples:
        >>> from pathlib import Path
        >>> entry = ManifestUpdateEntry(Path("/data/c/manifest.json"), 0, "updated")
        >>> entry.status
        'updated'
    """

    path: Path
    """The cache's manifest.json, its path resolved."""

    cache_id: int
    """The cache_id the format 3 manifest persists: the one the cache had."""

    status: Literal["updated", "unchanged"]
    """``"updated"``: the format 2 manifest was replaced by its format 3 form;
    ``"unchanged"``: it already was format 3 with this id."""


class ManifestUpdateReport(NamedTuple):
    """One `ManifestUpdateEntry` per cache, in the dataset's order.

    Examples:
        >>> from pathlib import Path
        >>> report = ManifestUpdateReport((ManifestUpdateEntry(Path("m"), 0, "unchanged"),))
        >>> [entry.status for entry in report.entries]
        ['unchanged']
    """

    entries: tuple[ManifestUpdateEntry, ...]
    """The caches' outcomes, in the order of the dataset's caches."""


def update_manifests(paths: Sequence[Path], cache_ids: Sequence[int]) -> ManifestUpdateReport:
    """Make the caches at `paths` format 3, each with its id from `cache_ids`."""
    outcomes = _native.migrate_caches(list(paths), list(cache_ids))
    entries = []
    for path, cache_id, outcome in zip(paths, cache_ids, outcomes, strict=True):
        assert outcome in ("updated", "unchanged"), outcome  # the core reached every cache
        status: Literal["updated", "unchanged"] = "updated" if outcome == "updated" else "unchanged"
        entries.append(
            ManifestUpdateEntry(Path(path).resolve() / "manifest.json", cache_id, status)
        )
    return ManifestUpdateReport(tuple(entries))


def check_version(version: object) -> None:
    """Refuse a target format other than 3 (the only one caches migrate to)."""
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"version must be the int 3, got {type(version).__name__}")
    if version != 3:
        raise errors.InvalidArgumentError(
            f"caches migrate to format 3 only (format 2 caches are read as they are), "
            f"got version={version}"
        )
