"""Mutations of a file's bytes, chosen by the fuzzer's input.

`Choices` reads the input as a stream of small decisions (it never runs out:
past its end every decision reads 0), so any byte string is a valid input and
the fuzzer's own mutations of it change which file, position and value the
harness picks. `mutate_bytes` applies binary edits; `mutate_json` applies edits
that know JSON's tokens (numbers, strings, members, nesting), which reach the
manifest's and the record metadata's checks past the syntax.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence

# Values a length, an offset or a count is most likely to be mishandled at.
INTERESTING_INTEGERS = (
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    12,
    15,
    16,
    23,
    24,
    25,
    127,
    128,
    255,
    256,
    4095,
    4096,
    65535,
    65536,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**32,
    2**53,
    2**63 - 1,
    2**63,
    2**64 - 1,
    -1,
    -2,
)

NUMBER_TEXTS = (
    b"0",
    b"-0",
    b"1",
    b"2",
    b"3",
    b"5",
    b"-1",
    b"1.0",
    b"2.0",
    b"-0.0",
    b"0.0",
    b"0.5",
    b"1e0",
    b"1E+0",
    b"2e0",
    b"20e-1",
    b"1e400",
    b"-1e400",
    b"1e-400",
    b"4.9e-324",
    b"2.2250738585072011e-308",
    b"1.7976931348623157e308",
    b"1.7976931348623159e308",
    b"0.30000000000000004",
    b"0.1",
    b"100.0",
    b"1e+21",
    b"9007199254740993",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551615",
    b"18446744073709551616",
    b"4294967295",
    b"4294967296",
    b"00",
    b"01",
    b"1.",
    b".5",
    b"+1",
    b"1e",
    b"0x10",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1" * 400,
    b"0." + b"0" * 400 + b"1",
    b"1e99999999999999999999",
)

STRING_TEXTS = (
    b'""',
    b'"none"',
    b'"lz4"',
    b'"zstd"',
    b'"bool"',
    b'"int"',
    b'"float"',
    b'"string"',
    b'"crc32c"',
    b'"records.crc32c"',
    b'"index.bin"',
    b'"000000.bin"',
    b'"000001.bin"',
    b'"../000000.bin"',
    b'"."',
    b'".."',
    b'"a/b"',
    b'"a\\\\b"',
    b'"tmp"',
    b'"\\u0000"',
    b'"\\ud800"',
    b'"\\ud83d\\ude00"',
    b'"\\u00e9"',
    b'"\xc3\xa9"',
    b'"\xff"',
    b'"\xed\xa0\x80"',
    b'"\\/"',
    b'"\\x41"',
    b'"\t"',
    b'"' + b"0" * 64 + b'"',
    b'"' + b"A" * 64 + b'"',
    b'"' + b"a" * 63 + b'"',
    b'"' + b"x" * 300 + b'"',
    b'"b"',
    b'"f"',
    b'"i"',
    b'"s"',
)

VALUE_TEXTS = (
    b"true",
    b"false",
    b"null",
    b"{}",
    b"[]",
    b'""',
    b"0",
    b"[1]",
    b'{"a":1}',
    b'{"algo":"lz4","ratio":2.0}',
    b'{"algo":"none","ratio":1.0}',
    b'[{"name":"b","kind":"bool"}]',
)

MEMBER_NAMES = (
    b'"record_checksums"',
    b'"format_version"',
    b'"shards"',
    b'"sample_count"',
    b'"metadata_schema"',
    b'"source_name"',
    b'"x"',
    b'"b"',
    b'"i"',
)

GARBAGE = (
    b",",
    b":",
    b" ",
    b"\t",
    b"\n",
    b"\r",
    b"\x0b",
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b"\\",
    b"\x00",
    b"\xff",
    b"/*x*/",
    b"\xef\xbb\xbf",
    b"\xc2\xa0",
)

NESTING_DEPTHS = (1, 2, 64, 1000, 100_000)

# Text grown past this (by nesting or repeats) gets no further token edits: tokenizing it
# would cost more memory and time than the edits are worth.
JSON_EDIT_BYTES_MAX = 64 * 1024

_TOKEN = re.compile(
    rb'"(?:[^"\\]|\\.)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null'
    rb"|[{}\[\]:,]|[ \t\r\n]+|.",
    re.S,
)


class Choices:
    """Decisions read from the fuzzer's input, little-endian; 0 once it is used up."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def take(self, count: int) -> bytes:
        taken = self.data[self.position : self.position + count]
        self.position += len(taken)
        return taken

    def integer(self, width: int) -> int:
        return int.from_bytes(self.take(width).ljust(width, b"\0"), "little")

    def byte(self) -> int:
        return self.integer(1)

    def below(self, bound: int) -> int:
        """A number in [0, bound), from as few bytes as the bound needs."""
        if bound <= 1:
            return 0
        width = 1 if bound <= 256 else 2 if bound <= 65536 else 4
        return self.integer(width) % bound

    def pick(self, options: Sequence[bytes]) -> bytes:
        return options[self.below(len(options))]

    def flag(self) -> bool:
        return self.byte() & 1 == 1

    def rest(self) -> bytes:
        return self.take(len(self.data))


def position(choices: Choices, length: int, hot: Sequence[int]) -> int:
    """A position in [0, length]: near a structural offset of the file, or anywhere."""
    mode = choices.byte()
    if mode & 1 and hot:
        base = hot[choices.below(len(hot))]
        return min(max(base + (mode >> 1) % 17 - 8, 0), length)
    at = choices.integer(4) % (length + 1)
    # Aligned, as FlatBuffers offsets and the fields of index rows are.
    return at - at % (1, 4, 8, 1)[mode >> 1 & 3]


def _write_integer(buffer: bytearray, at: int, width: int, value: int) -> None:
    encoded = (value % 2 ** (8 * width)).to_bytes(width, "little")
    buffer[at : at + width] = encoded


def mutate_bytes(data: bytes, choices: Choices, hot: Sequence[int]) -> bytes:
    """One to four binary edits of `data`."""
    buffer = bytearray(data)
    for _ in range(1 + choices.byte() % 4):
        operation = choices.byte() % 12
        at = position(choices, len(buffer), hot)
        if operation == 0 and at < len(buffer):
            buffer[at] ^= 1 << choices.byte() % 8
        elif operation == 1 and at < len(buffer):
            buffer[at] = choices.byte()
        elif operation == 2:
            replacement = choices.take(1 + choices.byte() % 16)
            buffer[at : at + len(replacement)] = replacement
        elif operation == 3:
            buffer[at:at] = choices.take(1 + choices.byte() % 32)
        elif operation == 4:
            del buffer[at : at + 1 + choices.byte() % 32]
        elif operation == 5:
            del buffer[at:]
        elif operation == 6:
            width = (1, 2, 4, 8)[choices.byte() % 4]
            value = INTERESTING_INTEGERS[choices.below(len(INTERESTING_INTEGERS))]
            value = value + len(buffer) if choices.flag() else value
            _write_integer(buffer, at, width, value)
        elif operation == 7:
            width = (1, 2, 4, 8)[choices.byte() % 4]
            delta = struct.unpack("b", bytes([choices.byte()]))[0]
            current = int.from_bytes(buffer[at : at + width].ljust(width, b"\0"), "little")
            _write_integer(buffer, at, width, current + delta)
        elif operation in (8, 9, 10):
            source = position(choices, len(buffer), hot)
            piece = bytes(buffer[source : source + 1 + choices.byte() % 64])
            if operation == 8:
                buffer[at : at + len(piece)] = piece
            elif operation == 9:
                buffer[at:at] = piece
            else:
                buffer[at:at] = piece * (2 + choices.byte() % 64)
        elif operation == 11:
            count = 1 + choices.byte() % 64
            buffer[at : at + count] = bytes([choices.byte()]) * count
    return bytes(buffer)


def json_tokens(text: bytes) -> list[tuple[int, int]]:
    """(start, end) of every token of `text`, whitespace runs and stray bytes included."""
    return [match.span() for match in _TOKEN.finditer(text)]


def _value_end(text: bytes, tokens: list[tuple[int, int]], index: int) -> int:
    """End of the value starting at token `index` (through its closing bracket)."""
    first = text[tokens[index][0] : tokens[index][1]]
    if first not in (b"{", b"["):
        return tokens[index][1]
    depth = 0
    for start, end in tokens[index:]:
        token = text[start:end]
        depth += token in (b"{", b"[")
        depth -= token in (b"}", b"]")
        if depth == 0:
            return end
    return len(text)


def mutate_json(text: bytes, choices: Choices) -> bytes:
    """One to three edits of JSON `text` at token level (bytes edits when it has no tokens)."""
    for _ in range(1 + choices.byte() % 3):
        if len(text) > JSON_EDIT_BYTES_MAX:
            break
        tokens = json_tokens(text)
        if not tokens:
            return mutate_bytes(text, choices, [])
        index = choices.below(len(tokens))
        start, end = tokens[index]
        token = text[start:end]
        text = _edit_token(text, tokens, index, token, choices)
    return text


def _edit_token(
    text: bytes, tokens: list[tuple[int, int]], index: int, token: bytes, choices: Choices
) -> bytes:
    start, end = tokens[index]
    operation = choices.byte() % 11
    if operation == 0:
        return text[:start] + choices.pick(NUMBER_TEXTS) + text[end:]
    if operation == 1:
        return text[:start] + _string_variant(token, choices) + text[end:]
    if operation == 2:
        value_end = _value_end(text, tokens, index)
        return text[:start] + choices.pick(VALUE_TEXTS) + text[value_end:]
    if operation == 3:
        return text[:start] + text[end:]
    if operation == 4:
        return text[:end] + token + text[end:]
    if operation == 5:
        return text[:start] + choices.pick(GARBAGE) + text[start:]
    if operation == 6:
        other_start, other_end = tokens[choices.below(len(tokens))]
        if other_start >= end:
            return (
                text[:start]
                + text[other_start:other_end]
                + text[end:other_start]
                + token
                + text[other_end:]
            )
        return text
    member = _member_at(text, tokens, index)
    if operation == 7 and member is not None:  # repeat a member: a duplicate key
        member_start, member_end = member
        return text[:member_end] + b"," + text[member_start:member_end] + text[member_end:]
    if operation == 8 and member is not None:  # drop a member and a comma next to it
        member_start, member_end = member
        after = text[member_end:].lstrip(b" \t\r\n")
        if after.startswith(b","):
            return text[:member_start] + after[1:]
        before = text[:member_start].rstrip(b" \t\r\n")
        return (before[:-1] if before.endswith(b",") else before) + text[member_end:]
    if operation == 9:  # nest a value in brackets, deeply enough to hurt a recursive parser
        depth = NESTING_DEPTHS[choices.below(len(NESTING_DEPTHS))]
        value_end = _value_end(text, tokens, index)
        opening, closing = (b"[", b"]") if choices.flag() else (b'{"a":', b"}")
        nested = opening * depth + text[start:value_end] + closing * depth
        return text[:start] + nested + text[value_end:]
    if operation == 10 and token == b"{":  # add a member, maybe one nested deeply
        value = choices.pick(VALUE_TEXTS)
        if choices.flag():
            depth = NESTING_DEPTHS[choices.below(len(NESTING_DEPTHS))]
            value = b"[" * depth + value + b"]" * depth
        added = choices.pick(MEMBER_NAMES) + b":" + value
        last = text[end:].lstrip(b" \t\r\n").startswith(b"}")
        return text[:end] + added + (b"" if last else b",") + text[end:]
    return text


def _member_at(text: bytes, tokens: list[tuple[int, int]], index: int) -> tuple[int, int] | None:
    """(start, end) of the `"key": value` member whose key is at or after token `index`."""
    for key in range(index, len(tokens)):
        start, end = tokens[key]
        if not text[start:end].startswith(b'"'):
            continue
        colon = _next_significant(text, tokens, key + 1)
        if colon is None or text[slice(*tokens[colon])] != b":":
            continue
        value = _next_significant(text, tokens, colon + 1)
        if value is None:
            return None
        return start, _value_end(text, tokens, value)
    return None


def _next_significant(text: bytes, tokens: list[tuple[int, int]], index: int) -> int | None:
    """The first token at or after `index` that is not whitespace."""
    for candidate in range(index, len(tokens)):
        if text[slice(*tokens[candidate])].strip(b" \t\r\n"):
            return candidate
    return None


def _string_variant(token: bytes, choices: Choices) -> bytes:
    """A string token: one of the interesting ones, or `token` respelled or edited."""
    if not (token.startswith(b'"') and token.endswith(b'"') and len(token) >= 2):
        return choices.pick(STRING_TEXTS)
    inner = token[1:-1]
    variant = choices.byte() % 5
    if variant == 0 and inner:  # the same text, one character as a \u escape
        at = choices.below(len(inner))
        if inner[at : at + 1] not in (b"\\", b'"') and inner[at] < 0x80:
            return b'"' + inner[:at] + b"\\u%04x" % inner[at] + inner[at + 1 :] + b'"'
    if variant == 1:
        return b'"' + inner.upper() + b'"'
    if variant == 2:
        return b'"' + inner[:-1] + b'"'
    if variant == 3:
        return b'"' + inner + choices.take(1) + b'"'
    return choices.pick(STRING_TEXTS)
