"""Resume states as plain dicts, and their conversion to and from the core's struct.

A state is one global stream position plus the fingerprint of the data the stream
is a function of. The core produces states and decides whether one may be loaded
(`drt_dataset_load_state`); this module only checks a dict's shape, so a mistyped
checkpoint gets a message about the dict instead of a ctypes error.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from typing import Any

from dataset_rt import errors
from dataset_rt._binding import native as _native

STATE_VERSION = 1
"""The layout of the dicts `state_dict()` returns; bumped if a key changes meaning."""

_INTEGER_KEYS = ("seed", "epoch_len", "epoch", "epoch_start", "position")


def to_dict(state: _native.StreamState, cache_sha256s: list[bytes]) -> dict[str, Any]:
    """The dict form of a core state: primitives only, so it survives
    ``torch.save``, JSON and pickling alike."""
    return {
        "version": STATE_VERSION,
        "algorithm": state.algorithm.decode("ascii"),
        "seed": state.seed,
        "shuffle": bool(state.shuffle),
        "epoch_len": state.at.epoch_len,
        "caches": [digest.hex() for digest in cache_sha256s],
        "table": bytes(state.table_sha256).hex(),
        "epoch": state.at.epoch,
        "epoch_start": state.at.epoch_start,
        "position": state.at.position,
    }


def from_dict(state: Mapping[str, Any]) -> tuple[_native.StreamState, bytes]:
    """The core struct of a state dict and its cache digests joined; raises
    `TypeError` / `ValueError` naming the key that is missing or malformed."""
    if not isinstance(state, Mapping):
        raise TypeError(f"a DatasetRT state must be a dict, got {type(state).__name__}")
    missing = [key for key in _KEYS if key not in state]
    if missing:
        raise errors.InvalidArgumentError(
            f"not a DatasetRT state: missing {', '.join(map(repr, missing))} "
            "(pass what state_dict() returned)"
        )
    if state["version"] != STATE_VERSION:
        raise errors.InvalidArgumentError(
            f"DatasetRT state version {state['version']!r} is not supported "
            f"(this version reads {STATE_VERSION})"
        )
    for key in _INTEGER_KEYS:
        _check_u64(key, state[key])
    if not isinstance(state["shuffle"], bool):
        raise TypeError(f"state['shuffle'] must be a bool, got {type(state['shuffle']).__name__}")
    algorithm = state["algorithm"]
    if not isinstance(algorithm, str) or not algorithm.isascii():
        raise TypeError(f"state['algorithm'] must be an ASCII str, got {algorithm!r}")
    if len(algorithm) >= _native.ALGORITHM_NAME_BYTES:
        raise errors.InvalidArgumentError(
            f"state['algorithm'] is too long to be an algorithm name: {algorithm!r}"
        )
    caches = state["caches"]
    if isinstance(caches, (str, bytes)) or not isinstance(caches, (list, tuple)):
        raise TypeError("state['caches'] must be a list of manifest SHA-256s in hex")
    digests = b"".join(_digest(f"state['caches'][{i}]", text) for i, text in enumerate(caches))
    native = _native.StreamState(
        at=_native.StreamPosition(
            epoch=state["epoch"],
            epoch_start=state["epoch_start"],
            epoch_len=state["epoch_len"],
            position=state["position"],
        ),
        seed=state["seed"],
        shuffle=int(state["shuffle"]),
        cache_count=len(caches),
        algorithm=algorithm.encode("ascii"),
    )
    ctypes.memmove(native.table_sha256, _digest("state['table']", state["table"]), 32)
    return native, digests


_KEYS = (
    "version",
    "algorithm",
    "seed",
    "shuffle",
    "epoch_len",
    "caches",
    "table",
    "epoch",
    "epoch_start",
    "position",
)


def _check_u64(key: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"state[{key!r}] must be an int, got {type(value).__name__}")
    if not 0 <= value <= _native.U64_MAX:
        raise errors.InvalidArgumentError(
            f"state[{key!r}] must be between 0 and 2**64 - 1, got {value}"
        )


def _digest(where: str, text: object) -> bytes:
    try:
        if not isinstance(text, str) or len(text) != 64:
            raise ValueError
        return bytes.fromhex(text)
    except ValueError:
        raise errors.InvalidArgumentError(
            f"{where} must be a SHA-256 in hex (64 characters), got {text!r}"
        ) from None
