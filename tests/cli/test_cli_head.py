"""`dataset-rt head`: the first samples of a cache, with a preview of each payload that
tells common kinds (images, NumPy arrays, text) and never fails."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_helpers import SAMPLES, TEXT_SAMPLES, invoke, invoke_json, write
from conftest import flip_last_byte_of_record
from dataset_rt import DatasetRuntime


def test_head_shows_the_first_samples_with_a_preview(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path)
    shown = invoke_json("head", cache, "-n", "3")
    assert shown["path"] == str(cache)
    assert [s["sample_id"] for s in shown["samples"]] == [0, 1, 2]
    for sample, (data, metadata) in zip(shown["samples"], SAMPLES, strict=False):
        assert sample["cache_id"] == 0
        assert sample["metadata"] == metadata
        assert sample["payload_bytes"] == len(data)
        assert sample["preview_kind"] == "hex"
        assert bytes.fromhex(sample["preview"]) == data[: sample["preview_bytes"]]
    assert len(invoke_json("head", cache)["samples"]) == 10  # the default
    assert len(invoke_json("head", cache, "-n", "1000")["samples"]) == len(SAMPLES)
    text = invoke("head", cache, "-n", "2", code=0).stdout
    assert "00 01 02 03" in text and '"label": "l1"' in text


def test_head_previews_text_payloads_as_text(runtime: DatasetRuntime, tmp_path: Path) -> None:
    cache = write(runtime, tmp_path, samples=TEXT_SAMPLES)
    [first, *_] = invoke_json("head", cache)["samples"]
    assert (first["preview_kind"], first["preview"]) == ("text", "line 0: hello")
    assert "'line 0: hello'" in invoke("head", cache, code=0).stdout


def test_head_rejects_a_negative_count(runtime: DatasetRuntime, tmp_path: Path) -> None:
    cache = write(runtime, tmp_path)
    invoke("head", cache, "-n", "-1", code=2)


def test_head_of_a_corrupt_record_exits_1_with_the_readers_message(
    runtime: DatasetRuntime, tmp_path: Path
) -> None:
    cache = write(runtime, tmp_path)
    flip_last_byte_of_record(cache, 1)
    result = invoke("head", cache, code=1)
    assert result.stderr.startswith("dataset-rt: ") and result.stderr.count("\n") == 1
    assert "record checksum mismatch" in result.stderr


def image_bytes(
    size: tuple[int, int], image_format: str, mode: str = "RGB", **options: Any
) -> bytes:
    image_module = pytest.importorskip("PIL.Image")
    buffer = io.BytesIO()
    image_module.new(mode, size).save(buffer, image_format, **options)
    return buffer.getvalue()


def npy_bytes(array: Any) -> bytes:
    numpy = pytest.importorskip("numpy")
    buffer = io.BytesIO()
    numpy.save(buffer, numpy.asarray(array))
    return buffer.getvalue()


def test_head_tells_common_payload_kinds(runtime: DatasetRuntime, tmp_path: Path) -> None:
    numpy = pytest.importorskip("numpy")
    payloads = [
        (image_bytes((32, 24), "PNG"), "png", "PNG image, 32 x 24, RGB"),
        (image_bytes((7, 5), "PNG", "LA"), "png", "PNG image, 7 x 5, grayscale+alpha"),
        (image_bytes((40, 30), "JPEG"), "jpeg", "JPEG image, 40 x 30"),
        (image_bytes((50, 20), "WEBP"), "webp", "WebP image, 50 x 20"),  # VP8
        (image_bytes((51, 21), "WEBP", lossless=True), "webp", "WebP image, 51 x 21"),  # VP8L
        (image_bytes((52, 22), "WEBP", "RGBA"), "webp", "WebP image, 52 x 22"),  # VP8X
        (
            npy_bytes(numpy.zeros((3, 4), numpy.float32)),
            "npy",
            "NumPy array, float32, shape (3, 4)",
        ),
        (
            npy_bytes(numpy.arange(5, dtype=">i8")),
            "npy",
            "NumPy array, int64 big-endian, shape (5,)",
        ),
        (npy_bytes(numpy.ones(2, bool)), "npy", "NumPy array, bool, shape (2,)"),
        ("grüße, 世界".encode(), "text", "grüße, 世界"),
        (b"\x89PNG but cut", "hex", "89 50 4e 47 20 62 75 74 20 63 75 74"),
    ]
    cache = write(
        runtime, tmp_path, samples=[(data, {"i": i}) for i, (data, _, _) in enumerate(payloads)]
    )
    shown = invoke_json("head", cache, "-n", "20")["samples"]
    assert [(s["preview_kind"], s["preview"]) for s in shown] == [
        (kind, preview) for _, kind, preview in payloads
    ]
    assert (shown[0]["width"], shown[0]["height"]) == (32, 24)
    assert (shown[6]["dtype"], shown[6]["shape"]) == ("float32", [3, 4])
    assert [s["preview_bytes"] for s in shown[:9]] == [None] * 9
    text = invoke("head", cache, "-n", "20", code=0).stdout
    assert "PNG image, 32 x 24, RGB" in text and "'grüße, 世界'" in text


@settings(max_examples=300, deadline=None)
@given(
    prefix=st.sampled_from(
        [
            b"",
            b"\x89PNG\r\n\x1a\n",
            b"\xff\xd8\xff",
            b"RIFF\x00\x00\x00\x00WEBPVP8X",
            b"\x93NUMPY\x01\x00",
        ]
    ),
    rest=st.binary(max_size=64),
)
def test_a_payload_preview_never_fails(prefix: bytes, rest: bytes) -> None:
    from dataset_rt.cli import _preview

    preview = _preview(prefix + rest)
    assert preview["preview_kind"] in ("png", "jpeg", "webp", "npy", "text", "hex")
    assert isinstance(preview["preview"], str)
