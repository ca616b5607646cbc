"""`HFDatasetSource`: the rows of a Hugging Face dataset."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from typing import Any

from dataset_rt._records import CacheInput
from dataset_rt.sources._columns import (
    _BATCH_ROWS_DEFAULT,
    _check_batch_rows,
    _column_names,
    _plan,
    _samples,
)

_DATASETS_MISSING = (
    "HFDatasetSource requires the Hugging Face datasets package: pip install datasets"
)


class HFDatasetSource:
    """The rows of a Hugging Face ``datasets.Dataset``, one sample per row.

    The payload comes from ``data_column``: a binary column (``Value("binary")``)
    as stored, or an ``Image`` feature as the image's encoded bytes (PNG,
    JPEG... exactly as the dataset holds them, or read from the file it points
    to); images are never decoded. Metadata columns are as in `ParquetSource`
    (a ``ClassLabel`` is stored as its int). Rows come in the dataset's order,
    after any ``shuffle``, ``select`` or ``filter`` applied to it, read through
    its Arrow format ``batch_rows`` rows at a time.

    Requires the ``datasets`` package (``pip install datasets``), which
    DatasetRT does not depend on.

    Args:
        dataset: a ``datasets.Dataset`` (one split: ``load_dataset(...)["train"]``).
        data_column: the binary or ``Image`` column holding the payloads.
        metadata_columns: the columns to store as metadata; by default every
            primitive column but ``data_column``.
        name: the cache's name; by default ``<dataset name>-<split>`` from the
            dataset's info (``mnist-train``); required when the dataset has no name.
        batch_rows: rows converted to Python objects at a time.

    Raises:
        ImportError: ``datasets`` is not installed.
        TypeError: ``dataset`` is not a ``datasets.Dataset`` (a ``DatasetDict``:
            choose a split; an ``IterableDataset`` is not supported).
        ValueError: as `ParquetSource` for columns (an ``Image`` column is
            accepted only as the data column); no name given or known.

    Examples:
        >>> import datasets  # pip install datasets
        >>> digits = datasets.Dataset.from_dict(
        ...     {"image": [{"bytes": b"\\x89PNG...", "path": None}], "label": [7]},
        ...     features=datasets.Features(
        ...         {"image": datasets.Image(), "label": datasets.ClassLabel(num_classes=10)}
        ...     ),
        ... )
        >>> source = HFDatasetSource(digits, data_column="image", name="digits")
        >>> [result] = runtime.write_cache(source, "caches")
        >>> [(s.data, s.metadata) for s in source]  # the encoded image, not decoded
        [(b'\\x89PNG...', {'label': 7})]

        With a dataset from the Hub (``load_dataset("ylecun/mnist", split="train")``)
        the name defaults to ``mnist-train``.
    """

    name: str
    """The cache's name."""

    def __init__(
        self,
        dataset: Any,
        *,
        data_column: str,
        metadata_columns: str | Iterable[str] | None = None,
        name: str | None = None,
        batch_rows: int = _BATCH_ROWS_DEFAULT,
    ) -> None:
        owner = "HFDatasetSource"
        datasets = _import_datasets()
        if isinstance(dataset, datasets.DatasetDict):
            splits = ", ".join(repr(split) for split in dataset)
            raise TypeError(
                f"HFDatasetSource: got a DatasetDict; pass one of its splits ({splits}), "
                "e.g. dataset['train']"
            )
        if not isinstance(dataset, datasets.Dataset):
            raise TypeError(
                f"HFDatasetSource: dataset must be a datasets.Dataset, got {type(dataset).__name__}"
            )
        self._batch_rows = _check_batch_rows(owner, batch_rows)
        features = dataset.features
        images = frozenset(
            column for column, feature in features.items() if isinstance(feature, datasets.Image)
        )
        schema = features.arrow_schema
        plan = _plan(
            owner,
            schema,
            data_column,
            _column_names(owner, metadata_columns),
            "the dataset",
            images,
        )
        self._plan = plan
        self._dataset = dataset.select_columns(plan.columns()).with_format("arrow")
        self.name = name if name is not None else _dataset_name(dataset)

    @property
    def metadata_schema(self) -> dict[str, type]:
        """Each metadata column's name and Python type, as the cache will store them.

        Examples:
            >>> import datasets
            >>> clips = datasets.Dataset.from_dict(
            ...     {"audio": [b"RIFF"], "speaker": ["ana"], "seconds": [1.5]}
            ... )
            >>> source = HFDatasetSource(clips, data_column="audio", name="clips")
            >>> source.metadata_schema
            {'speaker': <class 'str'>, 'seconds': <class 'float'>}
        """
        return dict(self._plan.metadata_schema)

    def __iter__(self) -> Iterator[CacheInput]:
        """Yield the rows in the dataset's order, ``batch_rows`` at a time."""
        tables = self._dataset.iter(batch_size=self._batch_rows)
        batches = (batch for table in tables for batch in table.to_batches())
        return _samples(batches, self._plan, f"HFDatasetSource {self.name!r}", self._batch_rows)


def _import_datasets() -> Any:
    try:
        return importlib.import_module("datasets")
    except ImportError:
        raise ImportError(_DATASETS_MISSING) from None


def _dataset_name(dataset: Any) -> str:
    """``<dataset name>-<split>`` from the dataset's info, or just the name without a split."""
    dataset_name = dataset.info.dataset_name
    if not dataset_name:
        raise ValueError("HFDatasetSource: the dataset has no name in its info; pass name=...")
    split = dataset.split
    return f"{dataset_name}-{split}" if split is not None else str(dataset_name)
