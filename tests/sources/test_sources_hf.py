"""HFDatasetSource (dataset_rt.sources): a Hugging Face dataset's rows in its order, images
as their encoded bytes; without `datasets` installed it names the pip command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dataset_rt import DatasetRuntime
from dataset_rt.sources import HFDatasetSource
from source_helpers import pixels, png_bytes, read_back


def test_hf_dataset_source_without_datasets_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` now fails
    with pytest.raises(ImportError, match="pip install datasets"):
        HFDatasetSource(object(), data_column="image")


def test_hf_dataset_source_writes_images_as_their_encoded_bytes(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    datasets = pytest.importorskip("datasets")
    images = [png_bytes(seed) for seed in range(6)]
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "label": datasets.ClassLabel(names=["even", "odd"]),
            "caption": datasets.Value("string"),
        }
    )
    dataset = datasets.Dataset.from_dict(
        {
            "image": [{"bytes": data, "path": None} for data in images],
            "label": [seed % 2 for seed in range(6)],
            "caption": [f"picture {seed}" for seed in range(6)],
        },
        features=features,
    )
    source = HFDatasetSource(dataset, data_column="image", name="pictures", batch_rows=4)
    assert source.metadata_schema == {"label": int, "caption": str}
    samples = read_back(runtime, source, tmp_path / "caches")
    assert samples == [
        (images[seed], {"label": seed % 2, "caption": f"picture {seed}"}) for seed in range(6)
    ]
    assert pixels(samples[5][0]) == pixels(png_bytes(5))

    # The dataset's order after a shuffle, and only the columns asked for.
    shuffled = dataset.shuffle(seed=1)
    order = shuffled["label"], [int(caption.split()[1]) for caption in shuffled["caption"]]
    source = HFDatasetSource(shuffled, data_column="image", metadata_columns=["caption"], name="s")
    samples = read_back(runtime, source, tmp_path / "caches")
    assert [data for data, _ in samples] == [images[seed] for seed in order[1]]
    assert all(set(metadata) == {"caption"} for _, metadata in samples)


def test_hf_dataset_source_reads_images_stored_as_file_paths(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    datasets = pytest.importorskip("datasets")
    paths = []
    for seed in range(3):
        paths.append(str(tmp_path / f"{seed}.png"))
        Path(paths[-1]).write_bytes(png_bytes(seed, size=9))
    dataset = datasets.Dataset.from_dict({"image": paths, "index": [0, 1, 2]}).cast_column(
        "image", datasets.Image()
    )
    samples = read_back(
        runtime, HFDatasetSource(dataset, data_column="image", name="files"), tmp_path / "caches"
    )
    assert samples == [(Path(paths[i]).read_bytes(), {"index": i}) for i in range(3)]


def test_hf_dataset_source_takes_a_binary_column_and_the_dataset_name(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    info = datasets.DatasetInfo(dataset_name="blobs")
    dataset = datasets.Dataset.from_dict(
        {"blob": [b"\x00\x01", b"\x02"], "size": [2, 1]}, info=info, split="train"
    )
    source = HFDatasetSource(dataset, data_column="blob")
    assert source.name == "blobs-train"
    assert list(source) == [(b"\x00\x01", {"size": 2}), (b"\x02", {"size": 1})]


def test_hf_dataset_source_rejects_what_it_cannot_read() -> None:
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_dict({"text": ["a"], "label": [1], "blob": [b"x"]})
    with pytest.raises(ValueError, match="data column 'text' has type string; .*Image feature"):
        HFDatasetSource(dataset, data_column="text", name="x")
    with pytest.raises(ValueError, match="data column 'image' is not in the dataset"):
        HFDatasetSource(dataset, data_column="image", name="x")
    with pytest.raises(TypeError, match="got a DatasetDict; pass one of its splits \\('train'\\)"):
        HFDatasetSource(datasets.DatasetDict({"train": dataset}), data_column="blob")
    with pytest.raises(TypeError, match="must be a datasets.Dataset, got list"):
        HFDatasetSource([], data_column="blob")
    with pytest.raises(ValueError, match="no name in its info; pass name="):
        HFDatasetSource(dataset, data_column="blob")
