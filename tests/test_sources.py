"""The ready-made sources write what their input holds, in a fixed order, and
refuse bad arguments when made, naming the bad value."""

from __future__ import annotations

import io
import os
import random
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import QUIET
from dataset_rt import (
    CacheInput,
    CacheSource,
    CacheSourcesDatasetSuccess,
    CacheWriteError,
    CacheWriteSuccess,
    DatasetRuntime,
    ReaderConfig,
    ShardCompression,
    WriterConfig,
)
from dataset_rt.sources import ArrowSource, FolderSource, HFDatasetSource, ParquetSource

IN_ORDER = ReaderConfig(seed=0, shuffle=False)

PROPERTY = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def read_back(runtime: DatasetRuntime, source: CacheSource, base: Path) -> list[tuple[bytes, dict]]:
    """Write `source` to a cache under `base` and read it back in stored order."""
    [result] = runtime.write_cache(source, base, writer_config=QUIET)
    assert isinstance(result, CacheWriteSuccess), result
    dataset = runtime.cached_dataset([result.path], reader_config=IN_ORDER)
    return [(sample.data, dict(sample.metadata)) for sample in dataset]


def write_error(runtime: DatasetRuntime, source: CacheSource, base: Path) -> str:
    [result] = runtime.write_cache(source, base, writer_config=QUIET)
    assert isinstance(result, CacheWriteError), result
    return result.message


def png_bytes(seed: int, size: int = 6) -> bytes:
    """A small PNG, different for each seed, encoded by Pillow."""
    Image = pytest.importorskip("PIL.Image")
    image = Image.new("RGB", (size, size))
    image.putdata([((seed * 7 + i) % 256, (seed + 3 * i) % 256, i % 256) for i in range(size**2)])
    encoded = io.BytesIO()
    image.save(encoded, format="PNG")
    return encoded.getvalue()


def pixels(encoded: bytes) -> tuple[str, tuple[int, int], bytes]:
    """The decoded image: mode, size and raw pixels."""
    Image = pytest.importorskip("PIL.Image")
    with Image.open(io.BytesIO(encoded)) as image:
        return image.mode, image.size, image.tobytes()


# ---- FolderSource ----------------------------------------------------------------

folder_names = st.sampled_from(["cat", "dog", "Zebra", "a b", "é", "cat-2", "cat_2"])
file_names = st.text(alphabet="abzAZ09-_ é", min_size=1, max_size=8).map(lambda text: text + ".bin")
folder_trees = st.dictionaries(
    st.tuples(st.lists(folder_names, min_size=1, max_size=3), file_names).map(
        lambda parts: "/".join([*parts[0], parts[1]])
    ),
    st.binary(max_size=300),
    min_size=1,
    max_size=20,
)


@PROPERTY
@given(tree=folder_trees)
def test_folder_source_round_trips_every_file_in_sorted_order(
    runtime: DatasetRuntime, tree: dict[str, bytes]
) -> None:
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary) / "train"
        for relative_path, data in tree.items():  # created in hypothesis' order, not sorted
            (root / relative_path).parent.mkdir(parents=True, exist_ok=True)
            (root / relative_path).write_bytes(data)
        source = FolderSource(root)
        samples = read_back(runtime, source, Path(temporary) / "caches")
    classes = sorted({path.split("/")[-2] for path in tree})
    expected = [
        (
            tree[path],
            {
                "path": path,
                "size_bytes": len(tree[path]),
                "label": classes.index(path.split("/")[-2]),
                "label_name": path.split("/")[-2],
            },
        )
        for path in sorted(tree)
    ]
    assert samples == expected
    assert source.name == "train"
    assert source.relative_paths == sorted(tree)
    assert source.classes == classes
    assert source.class_to_idx == {name: index for index, name in enumerate(classes)}


def make_image_folder(root: Path) -> dict[str, bytes]:
    """An ImageFolder layout with PNGs (one with an upper-case suffix) and a stray text file."""
    files = {
        "dog/2.png": png_bytes(2),
        "cat/1.PNG": png_bytes(1),
        "cat/0.png": png_bytes(0),
        "dog/3.png": png_bytes(3),
    }
    for relative_path, data in files.items():
        (root / relative_path).parent.mkdir(parents=True, exist_ok=True)
        (root / relative_path).write_bytes(data)
    (root / "cat" / "notes.txt").write_text("not an image")
    return files


def test_folder_source_writes_images_with_labels_and_filters_extensions(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    files = make_image_folder(tmp_path / "pets")
    source = FolderSource(tmp_path / "pets", name="pets-png", extensions=["png"])
    samples = read_back(runtime, source, tmp_path / "caches")

    assert [metadata for _, metadata in samples] == [
        {"path": path, "size_bytes": len(files[path]), "label": label, "label_name": name}
        for path, label, name in [
            ("cat/0.png", 0, "cat"),
            ("cat/1.PNG", 0, "cat"),
            ("dog/2.png", 1, "dog"),
            ("dog/3.png", 1, "dog"),
        ]
    ]
    for data, metadata in samples:
        assert data == files[str(metadata["path"])]
        assert pixels(data) == pixels(png_bytes(int(str(metadata["path"])[-5])))
    assert (tmp_path / "caches" / "pets-png").is_dir()


def test_folder_source_without_labels_has_no_label_column(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    make_image_folder(tmp_path / "pets")
    (tmp_path / "pets" / "top.png").write_bytes(b"at the root")
    source = FolderSource(tmp_path / "pets", label_from=None, extensions=".png")
    samples = read_back(runtime, source, tmp_path / "caches")

    assert source.metadata_schema == {"path": str, "size_bytes": int}
    assert [metadata["path"] for _, metadata in samples] == [
        "cat/0.png",
        "cat/1.PNG",
        "dog/2.png",
        "dog/3.png",
        "top.png",
    ]
    assert all(set(metadata) == {"path", "size_bytes"} for _, metadata in samples)
    assert samples[-1][0] == b"at the root"
    assert source.classes == [] and source.class_to_idx == {}


def make_tree(root: Path, relative_paths: list[str]) -> None:
    """Files created in the order given (payload: the path), so creation order is not sort order."""
    for relative_path in relative_paths:
        (root / relative_path).parent.mkdir(parents=True, exist_ok=True)
        (root / relative_path).write_bytes(relative_path.encode())


# Created in this order; code point order is "10" < "7" < "Zebu" < "cat" < "zebra" < "émeu" < "狗".
UNSORTED_CLASSES = ["zebra", "狗", "émeu", "cat", "Zebu", "7", "10"]


def test_folder_source_numbers_classes_in_code_point_order_not_creation_order(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    make_tree(tmp_path / "zoo", [f"{name}/{i}.png" for name in UNSORTED_CLASSES for i in (1, 0)])
    source = FolderSource(tmp_path / "zoo")

    assert source.classes == ["10", "7", "Zebu", "cat", "zebra", "émeu", "狗"]
    assert source.class_to_idx == {name: i for i, name in enumerate(source.classes)}
    assert source.metadata_schema == {
        "path": str,
        "size_bytes": int,
        "label": int,
        "label_name": str,
    }
    samples = read_back(runtime, source, tmp_path / "caches")
    assert [(m["label"], m["label_name"], m["path"]) for _, m in samples] == [
        (index, name, f"{name}/{i}.png")
        for index, name in enumerate(source.classes)
        for i in (0, 1)
    ]
    # The payload, the path and the label all describe the same file.
    assert all(data == str(metadata["path"]).encode() for data, metadata in samples)


def test_folder_source_classes_follow_image_folders_rule_on_a_flat_tree(tmp_path: Path) -> None:
    """torchvision's ImageFolder: classes = sorted names of root's sub-folders, index = position."""
    make_tree(tmp_path / "zoo", [f"{name}/a.jpg" for name in UNSORTED_CLASSES])
    image_folder_classes = sorted(e.name for e in os.scandir(tmp_path / "zoo") if e.is_dir())
    source = FolderSource(tmp_path / "zoo")
    assert source.classes == image_folder_classes
    assert [sample.metadata["label"] for sample in source] == [
        image_folder_classes.index(path.split("/")[0]) for path in source.relative_paths
    ]


def test_folder_source_labels_equal_hugging_face_imagefolder_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    datasets = pytest.importorskip("datasets")
    Image = pytest.importorskip("PIL.Image")
    root = tmp_path / "zoo"
    for name in UNSORTED_CLASSES:
        for i in (1, 0):
            (root / name).mkdir(parents=True, exist_ok=True)
            Image.new("L", (2, 2), i).save(root / name / f"{i}.png")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    hf = datasets.load_dataset(
        "imagefolder", data_dir=str(root), split="train", cache_dir=str(tmp_path / "hf")
    ).cast_column("image", datasets.Image(decode=False))
    hf_labels = {
        Path(row["image"]["path"]).relative_to(root).as_posix(): row["label"] for row in hf
    }

    source = FolderSource(root)
    assert source.classes == hf.features["label"].names
    assert {
        str(sample.metadata["path"]): sample.metadata["label"] for sample in source
    } == hf_labels


def test_folder_source_label_kind_name_keeps_the_parent_folders_name(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    make_tree(tmp_path / "pets", ["dog/1.png", "cat/2.png", "wild/cat/3.png", "wild/lynx/4.png"])
    source = FolderSource(tmp_path / "pets", label_kind="name")

    assert source.metadata_schema == {"path": str, "size_bytes": int, "label": str}
    assert source.classes == ["cat", "dog", "lynx"]  # the same classes as label_kind="index"
    samples = read_back(runtime, source, tmp_path / "caches")
    assert [metadata for _, metadata in samples] == [
        {"label": "cat", "path": "cat/2.png", "size_bytes": 9},
        {"label": "dog", "path": "dog/1.png", "size_bytes": 9},
        {"label": "cat", "path": "wild/cat/3.png", "size_bytes": 14},
        {"label": "lynx", "path": "wild/lynx/4.png", "size_bytes": 15},
    ]


def test_folder_source_class_of_a_nested_file_is_its_parent_folder(tmp_path: Path) -> None:
    """As Hugging Face's imagefolder (torchvision's ImageFolder would say 'wild')."""
    make_tree(tmp_path / "pets", ["dog/1.png", "cat/2.png", "wild/cat/3.png", "wild/lynx/4.png"])
    source = FolderSource(tmp_path / "pets")
    assert source.classes == ["cat", "dog", "lynx"]
    assert [
        (s.metadata["path"], s.metadata["label"], s.metadata["label_name"]) for s in source
    ] == [
        ("cat/2.png", 0, "cat"),
        ("dog/1.png", 1, "dog"),
        ("wild/cat/3.png", 0, "cat"),
        ("wild/lynx/4.png", 2, "lynx"),
    ]


def test_folder_source_mapping_is_recovered_from_the_metadata_table(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    make_tree(tmp_path / "zoo", [f"{name}/{i}.bin" for name in UNSORTED_CLASSES for i in range(3)])
    source = FolderSource(tmp_path / "zoo")
    [result] = runtime.write_cache(source, tmp_path / "caches", writer_config=QUIET)
    assert isinstance(result, CacheWriteSuccess), result
    table = runtime.cached_dataset([result.path], reader_config=IN_ORDER).get_metadata()

    mapping = table.select("label", "label_name").unique().sort("label")  # as docs/sources.md
    assert mapping["label_name"].to_list() == source.classes
    assert mapping["label"].to_list() == list(range(len(source.classes)))
    assert dict(zip(mapping["label_name"], mapping["label"], strict=True)) == source.class_to_idx


def test_folder_source_numbers_with_given_classes(runtime: DatasetRuntime, tmp_path: Path) -> None:
    make_tree(tmp_path / "train", ["cat/1.png", "dog/2.png", "owl/3.png"])
    make_tree(tmp_path / "val", ["dog/4.png", "owl/5.png"])  # no cat
    train = FolderSource(tmp_path / "train")
    alone = FolderSource(tmp_path / "val")
    val = FolderSource(tmp_path / "val", classes=train.classes)

    assert alone.class_to_idx == {"dog": 0, "owl": 1}  # numbered on its own: shifted
    assert val.classes == ["cat", "dog", "owl"]
    assert [(s.metadata["label"], s.metadata["label_name"]) for s in val] == [
        (1, "dog"),
        (2, "owl"),
    ]
    # The order given is the index order, sorted or not.
    custom = FolderSource(tmp_path / "val", classes=("owl", "dog", "cat"), label_kind="name")
    assert custom.class_to_idx == {"owl": 0, "dog": 1, "cat": 2}
    assert [s.metadata["label"] for s in custom] == ["dog", "owl"]
    samples = read_back(runtime, val, tmp_path / "caches")
    assert [metadata["label"] for _, metadata in samples] == [1, 2]


def test_from_cache_sources_reuses_a_folder_cache_without_reading_the_files(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    (tmp_path / "docs" / "a").mkdir(parents=True)
    (tmp_path / "docs" / "a" / "1.txt").write_bytes(b"first")
    first = runtime.from_cache_sources(
        FolderSource(tmp_path / "docs"),
        tmp_path / "caches",
        reader_config=IN_ORDER,
        writer_config=QUIET,
    )
    assert isinstance(first, CacheSourcesDatasetSuccess), first
    (tmp_path / "docs" / "a" / "1.txt").write_bytes(b"second")
    again = runtime.from_cache_sources(
        FolderSource(tmp_path / "docs"),
        tmp_path / "caches",
        reader_config=IN_ORDER,
        writer_config=QUIET,
    )
    assert isinstance(again, CacheSourcesDatasetSuccess), again
    assert [sample.data for sample in again.dataset] == [b"first"]


def test_folder_source_reads_a_file_only_when_the_writer_reaches_it(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "1").write_bytes(b"one")
    (tmp_path / "a" / "2").write_bytes(b"two")
    source = FolderSource(tmp_path)
    samples = iter(source)
    assert next(samples).data == b"one"
    (tmp_path / "a" / "2").write_bytes(b"changed")
    assert next(samples).data == b"changed"


def test_folder_source_does_not_enter_symlinked_folders(tmp_path: Path) -> None:
    (tmp_path / "root" / "real").mkdir(parents=True)
    (tmp_path / "root" / "real" / "x").write_bytes(b"x")
    os.symlink(tmp_path / "root" / "real", tmp_path / "root" / "link")
    os.symlink(tmp_path / "root" / "real" / "x", tmp_path / "root" / "real" / "y")
    assert FolderSource(tmp_path / "root").relative_paths == ["real/x", "real/y"]


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        (
            {"label_from": "grandparent"},
            ValueError,
            "label_from must be 'parent' or None, got 'grandparent'",
        ),
        (
            {"label_kind": "int"},
            ValueError,
            "label_kind must be 'index' or 'name', got 'int'",
        ),
        (
            {"label_from": None, "label_kind": "name"},
            ValueError,
            "label_kind='name' needs label_from='parent'; with label_from=None there is no label",
        ),
        (
            {"label_from": None, "classes": ["cat"]},
            ValueError,
            "classes needs label_from='parent'",
        ),
        ({"classes": "cat"}, TypeError, "classes must be a list of class names, got str 'cat'"),
        ({"classes": {"cat"}}, TypeError, "classes must be a list of class names, got set"),
        ({"classes": ["cat", 1]}, TypeError, "classes must hold str, got int 1"),
        ({"classes": []}, ValueError, "classes is empty; pass None to use the folders' names"),
        ({"classes": ["cat", "dog", "cat"]}, ValueError, "classes names 'cat' more than once"),
        (
            {"classes": ["dog", "Cat"]},
            ValueError,
            "'cat/0.png' is in folder 'cat', which is not in classes (2: 'dog', 'Cat')",
        ),
        ({"extensions": [".jpg"]}, ValueError, "no files with extensions ['.jpg'] under"),
        ({"extensions": [""]}, ValueError, "extension '' is empty"),
        ({"extensions": []}, ValueError, "extensions is empty"),
        ({"extensions": [3]}, TypeError, "extensions must be str, got int 3"),
    ],
)
def test_folder_source_rejects_bad_arguments(
    tmp_path: Path, arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "0.png").write_bytes(b"png")
    with pytest.raises(error) as raised:
        FolderSource(tmp_path, **arguments)  # type: ignore[arg-type]
    assert message in str(raised.value)
    assert str(raised.value).startswith("FolderSource: ")


def test_folder_source_rejects_missing_empty_and_non_folder_roots(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such folder: .*missing"):
        FolderSource(tmp_path / "missing")
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(NotADirectoryError, match="not a folder: .*file"):
        FolderSource(tmp_path / "file")
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(ValueError, match="no files under .*empty"):
        FolderSource(tmp_path / "empty")


def test_folder_source_refuses_a_file_with_no_folder_to_label_it(tmp_path: Path) -> None:
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "0.png").write_bytes(b"png")
    (tmp_path / "stray.png").write_bytes(b"png")
    with pytest.raises(ValueError, match="'stray.png' lies directly in the root folder"):
        FolderSource(tmp_path)
    assert FolderSource(tmp_path, label_from=None).relative_paths == ["cat/0.png", "stray.png"]


def file_sizes(cache: Path) -> dict[str, int]:
    """Each file's size, shards summed as "shards"."""
    sizes: dict[str, int] = {"shards": 0}
    for path in cache.rglob("*"):
        if path.is_file():
            name = path.relative_to(cache).as_posix()
            key = "shards" if name.startswith("shards/") else name
            sizes[key] = sizes.get(key, 0) + path.stat().st_size
    return sizes


class SmallSamples:
    """docs/storage-format.md's overhead example: 100 random bytes, label and a 20-char path."""

    def __init__(self, name: str, count: int) -> None:
        self.name = name
        self.count = count

    def __iter__(self) -> Iterator[CacheInput]:
        payloads = random.Random(0)
        for i in range(self.count):
            path = f"train/{i % 10}/{i:06d}.png__"
            yield CacheInput(payloads.randbytes(100), {"label": i % 10, "path": path})


@pytest.mark.parametrize(("compression", "stored_payload"), [("none", 100), ("lz4", 106)])
def test_per_sample_overhead_is_the_documented_figure(
    runtime: DatasetRuntime, tmp_path: Path, compression: str, stored_payload: int
) -> None:
    count = 2_000
    config = WriterConfig(
        show_progress=False, shard_compression=ShardCompression(algo=compression, ratio=1.0)
    )
    [result] = runtime.write_cache(SmallSamples("small", count), tmp_path, writer_config=config)
    assert isinstance(result, CacheWriteSuccess), result
    sizes = file_sizes(result.path)
    # header 8 + JSON 41 + payload; index row 24; CRC 4; Arrow int64 8 + offset 4 + 20 bytes.
    assert sizes["shards"] == count * (8 + 41 + stored_payload)
    assert sizes["index.bin"] == count * 24
    assert sizes["records.crc32c"] == count * 4
    assert 0 < sizes["metadata.arrow"] - count * 32 < 1024
    assert 0 < sizes["manifest.json"] < 1024


@pytest.mark.parametrize(
    ("arguments", "json_bytes", "arrow_bytes"),
    [({}, 71, 41), ({"label_kind": "name"}, 56, 33), ({"label_from": None}, 42, 26)],
)
def test_folder_source_overhead_is_the_documented_figure(
    runtime: DatasetRuntime,
    tmp_path: Path,
    arguments: dict[str, object],
    json_bytes: int,
    arrow_bytes: int,
) -> None:
    """docs/sources.md: a 100-byte file at cat/000123.png."""
    make_tree(
        tmp_path / "files", [f"{name}/{i:06d}.png" for name in ("cat", "dog") for i in range(50)]
    )
    for path in (tmp_path / "files").rglob("*.png"):
        path.write_bytes(bytes(100))
    source = FolderSource(tmp_path / "files", **arguments)  # type: ignore[arg-type]
    [result] = runtime.write_cache(source, tmp_path / "caches", writer_config=QUIET)
    assert isinstance(result, CacheWriteSuccess), result
    sizes = file_sizes(result.path)
    assert sizes["shards"] == 100 * (8 + json_bytes + 100)
    assert 0 < sizes["metadata.arrow"] - 100 * arrow_bytes < 2048  # + schema and footer


# ---- ParquetSource ---------------------------------------------------------------

rows = st.lists(
    st.tuples(
        st.binary(max_size=64),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.text(st.characters(exclude_categories=("Cs",)), max_size=6),
    ),
    min_size=1,
    max_size=60,
)


def rows_table(part: list[tuple[bytes, int, float, bool, str]], binary: pa.DataType) -> pa.Table:
    data, number, score, flag, text = zip(*part, strict=True) if part else ([],) * 5
    return pa.table(
        {
            "data": pa.array(data, binary),
            "number": pa.array(number, pa.int64()),
            "score": pa.array(score, pa.float64()),
            "flag": pa.array(flag, pa.bool_()),
            "text": pa.array(text, pa.string()).dictionary_encode(),
        }
    )


@PROPERTY
@given(
    rows=rows,
    files=st.integers(1, 4),
    row_group_rows=st.integers(1, 20),
    batch_rows=st.integers(1, 16),
    binary=st.sampled_from([pa.binary(), pa.large_binary()]),
)
def test_parquet_source_round_trips_rows_in_file_then_row_order(
    runtime: DatasetRuntime,
    rows: list[tuple[bytes, int, float, bool, str]],
    files: int,
    row_group_rows: int,
    batch_rows: int,
    binary: pa.DataType,
) -> None:
    with tempfile.TemporaryDirectory() as temporary:
        size = -(-len(rows) // files)
        parts = [rows[start : start + size] for start in range(0, len(rows), size)]
        # Named so that sorting the names would reverse them: the order given must win.
        paths = [Path(temporary) / f"part-{len(parts) - i}.parquet" for i in range(len(parts))]
        for part, path in zip(parts, paths, strict=True):
            pq.write_table(rows_table(part, binary), path, row_group_size=row_group_rows)
        source = ParquetSource(paths, data_column="data", name="rows", batch_rows=batch_rows)
        samples = read_back(runtime, source, Path(temporary) / "caches")
    assert samples == [
        (data, {"number": number, "score": score, "flag": flag, "text": text})
        for data, number, score, flag, text in rows
    ]
    assert source.metadata_schema == {"number": int, "score": float, "flag": bool, "text": str}


def test_parquet_source_keeps_the_chosen_columns_and_converts_their_types(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    images = [png_bytes(seed) for seed in range(5)]
    table = pa.table(
        {
            "label": pa.array([0, 1, 2, 3, 250], pa.uint8()),
            "jpeg": pa.array(images, pa.binary()),
            "score": pa.array([0.5, 1.5, -2.0, 0.25, 8.0], pa.float32()),
            "split": pa.array(["train"] * 5, pa.large_string()),
            "tags": pa.array([["a"], [], ["b", "c"], [], []], pa.list_(pa.string())),
        }
    )
    pq.write_table(table, tmp_path / "train.parquet")

    everything = ParquetSource(tmp_path / "train.parquet", data_column="jpeg")
    assert everything.name == "train"
    assert everything.metadata_schema == {"label": int, "score": float, "split": str}
    samples = read_back(runtime, everything, tmp_path / "caches")
    assert [data for data, _ in samples] == images
    assert [metadata for _, metadata in samples] == [
        {"label": label, "score": score, "split": "train"}
        for label, score in zip([0, 1, 2, 3, 250], [0.5, 1.5, -2.0, 0.25, 8.0], strict=True)
    ]
    assert pixels(samples[3][0]) == pixels(png_bytes(3))

    chosen = ParquetSource(
        str(tmp_path / "train.parquet"), data_column="jpeg", metadata_columns="label", name="l"
    )
    assert [metadata for _, metadata in read_back(runtime, chosen, tmp_path / "caches")] == [
        {"label": label} for label in [0, 1, 2, 3, 250]
    ]


def parquet_file(path: Path, **columns: pa.Array) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


@pytest.mark.parametrize(
    ("columns", "arguments", "message"),
    [
        (
            {"data": pa.array([b"x"]), "label": pa.array([1])},
            {"data_column": "image"},
            "data column 'image' is not in ",
        ),
        (
            {"data": pa.array(["text"]), "label": pa.array([1])},
            {"data_column": "data"},
            "data column 'data' has type string; it must be binary",
        ),
        (
            {"data": pa.array([b"x"]), "tags": pa.array([[1, 2]])},
            {"data_column": "data", "metadata_columns": ["tags"]},
            "metadata column 'tags' has nested type list<",
        ),
        (
            {"data": pa.array([b"x"]), "box": pa.array([{"x": 1}])},
            {"data_column": "data", "metadata_columns": ["box"]},
            "metadata column 'box' has nested type struct<x: int64>",
        ),
        (
            {"data": pa.array([b"x"]), "when": pa.array([0], pa.timestamp("us"))},
            {"data_column": "data", "metadata_columns": ["when"]},
            "metadata column 'when' has type timestamp[us]",
        ),
        (
            {"data": pa.array([b"x"]), "label": pa.array([1])},
            {"data_column": "data", "metadata_columns": ["label", "split"]},
            "metadata column 'split' is not in ",
        ),
        (
            {"data": pa.array([b"x"]), "tags": pa.array([[1, 2]])},
            {"data_column": "data"},
            "no metadata column besides data column 'data'",
        ),
        (
            {"data": pa.array([b"x"]), "label": pa.array([1])},
            {"data_column": "data", "metadata_columns": ["label", "label"]},
            "metadata_columns names 'label' more than once",
        ),
        (
            {"data": pa.array([b"x"]), "label": pa.array([1])},
            {"data_column": "data", "metadata_columns": ["data", "label"]},
            "data column 'data' cannot also be a metadata column",
        ),
        (
            {"data": pa.array([b"x"]), "label": pa.array([1])},
            {"data_column": "data", "batch_rows": 0},
            "batch_rows must be a positive int, got 0",
        ),
    ],
)
def test_parquet_source_rejects_bad_columns_when_made(
    tmp_path: Path, columns: dict[str, pa.Array], arguments: dict[str, object], message: str
) -> None:
    path = parquet_file(tmp_path / "bad.parquet", **columns)
    with pytest.raises(ValueError) as raised:
        ParquetSource(path, **arguments)  # type: ignore[arg-type]
    assert message in str(raised.value)
    assert str(raised.value).startswith("ParquetSource: ")


def test_parquet_source_names_the_columns_a_missing_one_could_be(tmp_path: Path) -> None:
    path = parquet_file(tmp_path / "a.parquet", data=pa.array([b"x"]), label=pa.array([1]))
    with pytest.raises(ValueError) as raised:
        ParquetSource(path, data_column="image")
    assert str(raised.value) == (
        f"ParquetSource: data column 'image' is not in {path}; its columns are 'data', 'label'"
    )


def test_parquet_source_rejects_files_it_cannot_use(tmp_path: Path) -> None:
    good = parquet_file(tmp_path / "good.parquet", data=pa.array([b"x"]), label=pa.array([1]))
    with pytest.raises(FileNotFoundError, match="no such file: .*missing.parquet"):
        ParquetSource(tmp_path / "missing.parquet", data_column="data")
    (tmp_path / "text.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match="text.parquet is not a Parquet file"):
        ParquetSource(tmp_path / "text.parquet", data_column="data")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        ParquetSource(tmp_path, data_column="data")
    with pytest.raises(ValueError, match="pass name=... when reading several files"):
        ParquetSource([good, good], data_column="data")
    with pytest.raises(ValueError, match="paths is empty"):
        ParquetSource([], data_column="data")


def test_parquet_source_refuses_files_whose_columns_differ(tmp_path: Path) -> None:
    ints = parquet_file(tmp_path / "a.parquet", data=pa.array([b"x"]), label=pa.array([1]))
    texts = parquet_file(tmp_path / "b.parquet", data=pa.array([b"x"]), label=pa.array(["1"]))
    more = parquet_file(
        tmp_path / "c.parquet", data=pa.array([b"x"]), label=pa.array([1]), extra=pa.array([1])
    )
    with pytest.raises(ValueError, match="'label' holds int in .*a.parquet but str in .*b.parquet"):
        ParquetSource([ints, texts], data_column="data", name="x")
    with pytest.raises(ValueError, match="different metadata columns .*'extra'"):
        ParquetSource([ints, more], data_column="data", name="x")
    assert ParquetSource([ints, more], data_column="data", metadata_columns=["label"], name="x")


def test_parquet_source_nulls_fail_the_write_naming_column_and_row(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    nulls = parquet_file(
        tmp_path / "nulls.parquet", data=pa.array([b"a", b"b", b"c"]), label=pa.array([1, 2, None])
    )
    message = write_error(runtime, ParquetSource(nulls, data_column="data"), tmp_path / "caches")
    assert "metadata column 'label' contains null at row 2" in message
    assert "nulls.parquet" in message
    empty = parquet_file(
        tmp_path / "empty.parquet", data=pa.array([b"a", None]), label=pa.array([1, 2])
    )
    message = write_error(runtime, ParquetSource(empty, data_column="data"), tmp_path / "caches")
    assert "data column 'data' is null at row 1" in message


def test_parquet_source_streams_a_file_in_bounded_memory(tmp_path: Path) -> None:
    payload_bytes, row_count = 32 * 1024, 1024  # 32 MiB of incompressible payloads
    path = tmp_path / "big.parquet"
    with pq.ParquetWriter(path, pa.schema({"data": pa.binary(), "row": pa.int64()})) as writer:
        for start in range(0, row_count, 64):
            data = [os.urandom(payload_bytes) for _ in range(64)]
            writer.write_table(pa.table({"data": data, "row": range(start, start + 64)}))
    assert path.stat().st_size > 32 * 1024 * 1024
    source = ParquetSource(path, data_column="data", batch_rows=64)
    arrow_bytes_max = 0
    for position, sample in enumerate(source):
        assert sample.metadata == {"row": position}
        arrow_bytes_max = max(arrow_bytes_max, pa.total_allocated_bytes())
    assert position == row_count - 1
    # A few copies of one row group (2 MiB: the file's pages, decoded, a batch), not
    # the file: pyarrow's default pre-buffering would hold all 16 row groups.
    assert arrow_bytes_max < 12 * 1024 * 1024


# ---- ArrowSource -------------------------------------------------------------------


def test_arrow_source_writes_a_table_a_batch_and_a_list_of_batches(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    table = pa.table({"data": [b"a", b"bc", b"", b"def"], "label": [3, 1, 4, 1]})
    expected = [
        (b"a", {"label": 3}),
        (b"bc", {"label": 1}),
        (b"", {"label": 4}),
        (b"def", {"label": 1}),
    ]
    batches = table.to_batches(max_chunksize=3)
    assert len(batches) == 2
    for name, rows in [("table", table), ("batch", table.to_batches()[0]), ("list", batches)]:
        source = ArrowSource(rows, data_column="data", name=name, batch_rows=3)
        assert read_back(runtime, source, tmp_path / "caches") == expected
        assert list(source) == list(source)  # a table or a list can be read again


def test_arrow_source_pulls_a_reader_one_batch_at_a_time_and_only_once(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    schema = pa.schema({"data": pa.binary(), "row": pa.int64()})
    pulled: list[int] = []

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, 40, 10):
            pulled.append(start)
            yield pa.record_batch(
                {
                    "data": [b"%d" % i for i in range(start, start + 10)],
                    "row": range(start, start + 10),
                },
                schema=schema,
            )

    source = ArrowSource(
        pa.RecordBatchReader.from_batches(schema, batches()), data_column="data", name="stream"
    )
    samples = iter(source)
    assert next(samples) == (b"0", {"row": 0})
    assert pulled == [0]
    assert [sample.metadata["row"] for sample in samples] == list(range(1, 40))
    assert pulled == [0, 10, 20, 30]
    with pytest.raises(RuntimeError, match="RecordBatchReader, which can be read once"):
        iter(source)

    fresh = pa.RecordBatchReader.from_batches(schema, batches())
    samples_read = read_back(runtime, ArrowSource(fresh, data_column="data", name="s"), tmp_path)
    assert samples_read == [(b"%d" % i, {"row": i}) for i in range(40)]


def test_arrow_source_rejects_what_it_cannot_read() -> None:
    batch = pa.record_batch({"data": [b"x"], "label": [1]})
    other = pa.record_batch({"data": [b"x"], "label": ["1"]})
    with pytest.raises(TypeError, match="must be a pyarrow Table, .* got dict"):
        ArrowSource({"data": [b"x"]}, data_column="data", name="x")
    with pytest.raises(ValueError, match="the list of record batches is empty"):
        ArrowSource([], data_column="data", name="x")
    with pytest.raises(ValueError, match="record batch 1 has schema"):
        ArrowSource([batch, other], data_column="data", name="x")
    with pytest.raises(TypeError, match="item 1 of the list is a Table"):
        ArrowSource([batch, pa.table(batch)], data_column="data", name="x")
    with pytest.raises(ValueError, match="ArrowSource: data column 'label' has type int64"):
        ArrowSource(batch, data_column="label", name="x")


# ---- HFDatasetSource -------------------------------------------------------------


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
