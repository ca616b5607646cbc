"""A short look at a payload for `head`: the kind of file where that can be told,
else its start as text or hex."""

from __future__ import annotations

import ast
import struct
from typing import Any

_PREVIEW_HEX_BYTES = 16
_PREVIEW_TEXT_BYTES = 40
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_COLOR_TYPES = {0: "grayscale", 2: "RGB", 3: "palette", 4: "grayscale+alpha", 6: "RGBA"}
_NPY_MAGIC = b"\x93NUMPY"
_NPY_HEADER_MAX = 65_536
_NPY_KINDS = {"f": "float", "i": "int", "u": "uint", "c": "complex"}


def _png(data: bytes) -> dict[str, Any] | None:
    if not data.startswith(_PNG_SIGNATURE):
        return None
    if len(data) < 26 or data[12:16] != b"IHDR":
        return {"preview_kind": "png", "preview": "PNG image", "width": None, "height": None}
    width, height = struct.unpack(">II", data[16:24])
    color = _PNG_COLOR_TYPES.get(data[25], f"color type {data[25]}")
    return {
        "preview_kind": "png",
        "preview": f"PNG image, {width} x {height}, {color}",
        "width": width,
        "height": height,
    }


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a JPEG's first start-of-frame marker, if one is found."""
    position = 2
    while position + 9 <= len(data):
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            position += 2
            continue
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height = int.from_bytes(data[position + 5 : position + 7], "big")
            width = int.from_bytes(data[position + 7 : position + 9], "big")
            return width, height
        if marker == 0xDA or length < 2:  # image data: no frame header before it
            return None
        position += 2 + length
    return None


def _jpeg(data: bytes) -> dict[str, Any] | None:
    if not data.startswith(b"\xff\xd8\xff"):
        return None
    size = _jpeg_size(data)
    width, height = size if size is not None else (None, None)
    preview = "JPEG image" if size is None else f"JPEG image, {width} x {height}"
    return {"preview_kind": "jpeg", "preview": preview, "width": width, "height": height}


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width = int.from_bytes(data[26:28], "little") & 0x3FFF
        height = int.from_bytes(data[28:30], "little") & 0x3FFF
        return width, height
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _webp(data: bytes) -> dict[str, Any] | None:
    if len(data) < 16 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    size = _webp_size(data)
    width, height = size if size is not None else (None, None)
    preview = "WebP image" if size is None else f"WebP image, {width} x {height}"
    return {"preview_kind": "webp", "preview": preview, "width": width, "height": height}


def _npy_dtype(descr: object) -> str:
    """A NumPy dtype description ('<f4') in words ('float32'); others as they are."""
    if not isinstance(descr, str):
        return "structured"
    order, code = (descr[0], descr[1:]) if descr[:1] in ("<", ">", "|", "=") else ("", descr)
    kind, size = code[:1], code[1:]
    if kind in _NPY_KINDS and size.isdigit():
        name = f"{_NPY_KINDS[kind]}{int(size) * 8}"
    elif code in ("b1", "?"):
        name = "bool"
    else:
        return descr
    return f"{name} big-endian" if order == ">" and size != "1" else name


def _npy(data: bytes) -> dict[str, Any] | None:
    if not data.startswith(_NPY_MAGIC) or len(data) < 10:
        return None
    unknown = {"preview_kind": "npy", "preview": "NumPy array", "dtype": None, "shape": None}
    major = data[6]
    if major == 1:
        length, start = int.from_bytes(data[8:10], "little"), 10
    else:
        length, start = int.from_bytes(data[8:12], "little"), 12
    if length > _NPY_HEADER_MAX or start + length > len(data):
        return unknown
    try:
        header = ast.literal_eval(data[start : start + length].decode("latin-1"))
        dtype, shape = _npy_dtype(header["descr"]), tuple(int(n) for n in header["shape"])
    except (ValueError, TypeError, SyntaxError, KeyError, MemoryError, RecursionError):
        return unknown
    return {
        "preview_kind": "npy",
        "preview": f"NumPy array, {dtype}, shape {shape}",
        "dtype": dtype,
        "shape": list(shape),
    }


def _text_or_hex(payload: bytes) -> dict[str, Any]:
    """Its start as text when that is printable UTF-8, else its first bytes in hex."""
    data = payload[: max(_PREVIEW_HEX_BYTES, _PREVIEW_TEXT_BYTES)]
    hex_bytes = data[:_PREVIEW_HEX_BYTES]
    hex_preview = {
        "preview_kind": "hex",
        "preview": hex_bytes.hex(" "),
        "preview_bytes": len(hex_bytes),
    }
    start = data[:_PREVIEW_TEXT_BYTES]
    try:
        text = start.decode("utf-8")
    except UnicodeDecodeError as error:
        # A character cut by the preview's end is not a reason to call it binary.
        if error.reason != "unexpected end of data" or error.start < len(start) - 3:
            return hex_preview
        text = start[: error.start].decode("utf-8")
    if not all(c.isprintable() or c in "\t\n\r" for c in text):
        return hex_preview
    return {"preview_kind": "text", "preview": text, "preview_bytes": len(text.encode())}


def _preview(payload: bytes | memoryview) -> dict[str, Any]:
    """A short look at a payload: what kind of file it is where that can be told (PNG,
    JPEG, WebP, NumPy .npy, with their size or shape), else its start as text or hex.

    The keys: preview_kind, preview, preview_bytes (the payload bytes a text or hex
    preview shows; None for a described kind) and, for images, width and height, for
    .npy, dtype and shape.
    """
    data = bytes(payload)
    for describe in (_png, _jpeg, _webp, _npy):
        described = describe(data)
        if described is not None:
            return {**described, "preview_bytes": None}
    return _text_or_hex(data)
