"""The entries of a mix as the core takes them: `CachedDataset.set_mix`'s mapping
checked for shape, with each key resolved to its cache's position.

The core computes the counts and refuses what cannot be mixed (the sampling, the
weights, the values' ranges against the table); this module only turns keys into
positions with messages that name the key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from dataset_rt import errors
from dataset_rt._binding import native as _native
from dataset_rt._config import Mix

MixSpec = Mapping[int, Mix] | Mapping[str, Mix] | Mapping[int | str, Mix]
"""`CachedDataset.set_mix`'s argument: `Mix` by cache id or folder name."""

Entry = tuple[int, int, float, int]
"""(cache position, form, value, count): one `drt_mix_entry`."""


def mix_entries(
    mix: MixSpec, cache_paths: Sequence[object], cache_ids: Sequence[int]
) -> list[Entry]:
    """The core's entries of `mix`, keyed by cache id or folder name, in key order."""
    if not isinstance(mix, Mapping):
        raise TypeError(
            f"set_mix takes a dict of cache id -> Mix (or None), got {type(mix).__name__}"
        )
    if not mix:
        raise errors.InvalidArgumentError(
            "set_mix needs at least one cache; set_mix(None) goes back to the plain table"
        )
    entries: list[Entry] = []
    for key, part in mix.items():
        if not isinstance(part, Mix):
            raise TypeError(
                f"set_mix: the value for {key!r} must be a Mix, got {type(part).__name__}"
            )
        entries.append((_position(key, cache_paths, cache_ids), *_form(part)))
    positions = [entry[0] for entry in entries]
    for position in positions:
        if positions.count(position) > 1:
            raise errors.InvalidArgumentError(
                f"set_mix names cache {cache_ids[position]} ({cache_paths[position]}) twice"
            )
    return entries


def _form(part: Mix) -> tuple[int, float, int]:
    if part.proportion is not None:
        return _native.MIX_PROPORTION, part.proportion, 0
    if part.repeat is not None:
        return _native.MIX_REPEAT, part.repeat, 0
    assert part.choose is not None
    return _native.MIX_CHOOSE, 0.0, part.choose


def _position(key: object, cache_paths: Sequence[object], cache_ids: Sequence[int]) -> int:
    """The position of the cache that `key` names: its cache id, or its folder name."""
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise TypeError(
            f"set_mix keys are cache ids (int) or folder names (str), got {type(key).__name__}"
        )
    if isinstance(key, int):
        if key not in cache_ids:
            raise errors.InvalidArgumentError(
                f"set_mix: no cache has cache_id {key}; this dataset's are {list(cache_ids)}"
            )
        return list(cache_ids).index(key)
    matches = [i for i, path in enumerate(cache_paths) if _folder_name(path) == key]
    if len(matches) != 1:
        names = [_folder_name(path) for path in cache_paths]
        found = "no cache" if not matches else f"{len(matches)} caches"
        raise errors.InvalidArgumentError(
            f"set_mix: {found} named {key!r} (names: {names}); use the cache id instead"
        )
    return matches[0]


def _folder_name(path: object) -> str:
    return PurePosixPath(str(path).replace("\\", "/").rstrip("/")).name
