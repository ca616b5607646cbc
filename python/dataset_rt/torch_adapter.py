"""The PyTorch view of a `CachedDataset` (torch is imported only when asked for)."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import import_module
from typing import TYPE_CHECKING, Any

from dataset_rt.records import CachedSample

if TYPE_CHECKING:
    from dataset_rt.dataset import CachedDataset


_WORKERS_REFUSED = (
    "DatasetRT streams cannot be split across DataLoader worker processes: "
    "each worker would read its own copy of the stream. "
    "Use DataLoader(num_workers=0) "
    "and DatasetRuntime(num_workers=N) for parallel reads."
)


def make_torch_iterable_dataset(dataset: CachedDataset) -> Any:
    """Wrap `dataset` in a sized `torch.utils.data.IterableDataset`."""
    try:
        torch_data = import_module("torch.utils.data")
    except ImportError as error:
        raise ImportError(
            "CachedDataset.to_torch_iterable_dataset requires PyTorch; install torch to use it"
        ) from error

    class DatasetRTIterableDataset(torch_data.IterableDataset):  # type: ignore[misc, name-defined]
        """Yields the `CachedDataset`'s stream; `len()` is its epoch length."""

        def __iter__(self) -> Iterator[CachedSample]:
            if torch_data.get_worker_info() is not None:
                raise RuntimeError(_WORKERS_REFUSED)
            return iter(dataset)

        def __reduce__(self) -> Any:
            # Workers started by spawn/forkserver receive the dataset pickled:
            # refuse them here with the same message (the class is local and
            # the native handles cannot be pickled anyway).
            raise RuntimeError(_WORKERS_REFUSED)

        # Copies within the process are fine (`copy` would otherwise go through
        # `__reduce__`): another adapter over the same dataset.
        def __copy__(self) -> Any:
            return type(self)()

        def __deepcopy__(self, memo: dict[int, Any]) -> Any:
            return type(self)()

        def __len__(self) -> int:
            return len(dataset)

    return DatasetRTIterableDataset()
