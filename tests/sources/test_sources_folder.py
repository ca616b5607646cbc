"""FolderSource (dataset_rt.sources): every file under a folder, in sorted order,
labelled by its parent folder as torchvision's and Hugging Face's image folders label it;
bad arguments are refused when the source is made, naming the bad value."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import QUIET
from dataset_rt import CacheSourcesDatasetSuccess, CacheWriteSuccess, DatasetRuntime
from dataset_rt.sources import FolderSource
from source_helpers import IN_ORDER, PROPERTY, make_tree, pixels, png_bytes, read_back

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
