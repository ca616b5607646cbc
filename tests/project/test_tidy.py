"""scripts/tidy.py: the Zig scanner, the limits it enforces and its exception list's ratchet."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import tidy


def braces(source: str) -> list[tuple[str, int]]:
    return [
        (token.text, token.line)
        for token in tidy.zig_tokens(source)
        if token.kind == "punct" and token.text in "{}"
    ]


def zig_function(name: str, lines: int) -> str:
    """A Zig function of exactly `lines` lines, from its `fn` line to its closing brace."""
    body = "".join(f'    _ = "{{ line {n} }}"; // {{\n' for n in range(lines - 2))
    return f"fn {name}() void {{\n{body}}}\n"


def python_function(name: str, lines: int) -> str:
    """A Python function of exactly `lines` lines, from its `def` line to its last line."""
    body = "".join(f"    value = {n}\n" for n in range(lines - 2))
    return f"@decorator\ndef {name}() -> int:\n{body}    return value\n"


def rules_and_names(findings: list[tidy.Finding]) -> set[tuple[str, str]]:
    return {(finding.rule, finding.name) for finding in findings}


def test_the_scanner_skips_braces_in_strings_characters_comments_and_multiline_strings() -> None:
    source = "\n".join(
        [
            r'const a = "{ \" }";  // { in a comment',
            r"const b = '{';",
            r"const c = '\'';",
            r"const d = '}';",
            r"const e =",
            r"    \\ a multiline { string",
            r'    \\ with " and } and // too',
            r";",
            r'const f = @"a { name";',
            r"fn g() void { _ = '\\'; }",
        ]
    )
    assert braces(source) == [("{", 10), ("}", 10)]
    names = [token.text for token in tidy.zig_tokens(source) if token.kind == "ident"]
    assert "a { name" in names


def test_the_scanner_counts_lines_across_multiline_strings_and_comments() -> None:
    source = "const s =\n    \\\\ x\n    \\\\ y\n;\n// c\nfn f() void {\n}\n"
    functions, _ = tidy.zig_outline(tidy.zig_tokens(source))
    assert functions == [tidy.ZigFunction("f", 6, 7)]


def test_a_function_ends_at_its_own_closing_brace_not_at_one_of_its_return_type() -> None:
    source = "\n".join(
        [
            "pub fn make(x: u8) error{Bad}!struct { a: u8 } {",
            "    if (x == 0) return error.Bad;",
            "    return .{ .a = x };",
            "}",
            "extern fn prototype(x: *const fn (u8) void) void;",
            "const Tagged = union(enum) {",
            "    a: u8,",
            "    fn method(self: Tagged) void {",
            "        _ = self;",
            "    }",
            "};",
            'test "make" {',
            "    _ = try make(1);",
            "}",
        ]
    )
    functions, _ = tidy.zig_outline(tidy.zig_tokens(source))
    assert functions == [
        tidy.ZigFunction("make", 1, 4),
        tidy.ZigFunction("Tagged.method", 8, 10),
        tidy.ZigFunction('test "make"', 12, 14),
    ]


def test_a_zig_function_of_71_lines_is_flagged_and_one_of_70_is_not(tmp_path: Path) -> None:
    file = tmp_path / "lengths.zig"
    file.write_text(zig_function("fits", 70) + zig_function("tooLong", 71))
    findings = [f for f in tidy.zig_findings([file]) if f.rule == "function-length"]
    assert [(f.name, f.line) for f in findings] == [("tooLong", 71)]
    assert "71 lines" in findings[0].detail


def test_a_python_function_of_71_lines_is_flagged_and_one_of_70_is_not(tmp_path: Path) -> None:
    file = tmp_path / "lengths.py"
    method = "class Holder:\n" + textwrap.indent(python_function("method", 71), "    ")
    file.write_text(python_function("fits", 70) + python_function("too_long", 71) + method)
    findings = tidy.python_findings([file], package=tmp_path / "package")
    assert sorted((f.name, f.line) for f in findings) == [
        ("Holder.method", 146),
        ("too_long", 73),
    ]
    assert all(f.rule == "function-length" and "71 lines" in f.detail for f in findings)


def test_zig_lines_over_100_columns_and_files_over_800_lines_are_flagged(tmp_path: Path) -> None:
    file = tmp_path / "wide.zig"
    lines = ["// " + "x" * 97, "// " + "x" * 98] + ["const a = 1;"] * 799
    file.write_text("\n".join(lines) + "\n")
    findings = tidy.zig_findings([file])
    assert sorted((f.rule, f.line) for f in findings if f.rule != "unused-zig") == [
        ("file-length", 801),
        ("line-length", 2),
    ]


def test_unused_zig_declarations_are_flagged_and_used_ones_are_not(tmp_path: Path) -> None:
    (tmp_path / "lib.zig").write_text(
        "\n".join(
            [
                'const std = @import("std");',
                "const unused_private = 1;",
                "const in_comptime = 2;",
                "const in_test = 3;",
                "const by_field = 4;",
                "pub const UnusedPublic = struct { data: []const u8 };",
                "pub fn usedElsewhere() void {}",
                "pub fn importedByName() void {}",
                "export fn exported() void { _ = std; }",
                "fn privateHelper() void {}",
                "comptime { _ = in_comptime; }",
                'test "t" { _ = in_test; _ = @field(@This(), "by_field"); }',
                "pub const Box = struct {",
                "    fn unusedMethod() void {}",
                "};",
                "const Alias = std.mem.Alias;",
                "const UsedAlias = std.mem.UsedAlias;",
                "fn usesAlias() UsedAlias {}",
                "comptime { _ = usesAlias; }",
            ]
        )
    )
    (tmp_path / "user.zig").write_text(
        'const lib = @import("lib.zig");\n'
        'pub fn main() void { lib.usedElsewhere(); @import("lib.zig").importedByName(); }\n'
    )
    found = tidy.zig_findings([tmp_path / "lib.zig", tmp_path / "user.zig"])
    assert rules_and_names(found) == {
        ("unused-zig", "unused_private"),
        ("unused-zig", "UnusedPublic"),
        ("unused-zig", "privateHelper"),
        ("unused-zig", "Box"),
        ("unused-zig", "unusedMethod"),
        ("unused-zig", "Alias"),
    }


def test_unused_private_python_names_are_flagged(tmp_path: Path) -> None:
    package = tmp_path / "python" / "pkg"
    package.mkdir(parents=True)
    (package / "mod.py").write_text(
        "\n".join(
            [
                "import os as _os",
                "from typing import TypeVar as _TypeVar",
                "_T = _TypeVar('_T')",
                "_UNUSED = 1",
                "_READ_HERE = 2",
                "_READ_BY_A_TEST = 3",
                "_PATCHED_BY_NAME = 4",
                "__all__ = ['public']",
                "try:",
                "    _unused_in_try = 5",
                "except ImportError:",
                "    pass",
                "def _unused_function() -> None: ...",
                "class _UnusedClass: ...",
                "def public(value: _T) -> _T:",
                "    return value if _READ_HERE else _os.sep  # type: ignore[return-value]",
            ]
        )
        + "\n"
    )
    test = tmp_path / "tests" / "test_mod.py"
    test.parent.mkdir()
    test.write_text(
        "from pkg import mod\n"
        "from pkg.mod import _READ_BY_A_TEST\n"
        "def test(monkeypatch) -> None:\n"
        "    monkeypatch.setattr('pkg.mod._PATCHED_BY_NAME', 0)\n"
        "    _UNUSED = 1  # a name of its own: not a use of mod's\n"
    )
    found = tidy.python_findings([package / "mod.py", test], package=tmp_path / "python")
    assert rules_and_names(found) == {
        ("unused-private", "_UNUSED"),
        ("unused-private", "_unused_in_try"),
        ("unused-private", "_unused_function"),
        ("unused-private", "_UnusedClass"),
    }


def exception_list(tmp_path: Path, text: str) -> tuple[list[tidy.Entry], list[tidy.Finding]]:
    file = tmp_path / "exceptions.toml"
    file.write_text(text)
    return tidy.load_exceptions(file)


def test_an_exception_that_no_longer_matches_is_a_finding(tmp_path: Path) -> None:
    entries, problems = exception_list(
        tmp_path,
        "# comment\n"
        '[[function-length]]\npath = "a.zig"\nname = "long"\nreason = "split pending"\n\n'
        '[[function-length]]\npath = "a.zig"\nname = "fixed"\nreason = "split pending"\n',
    )
    assert problems == []
    long = tidy.Finding("a.zig", 3, "function-length", "`long` is 80 lines", name="long")
    left, excepted = tidy.apply_exceptions([long], entries, {"function-length"}, "exceptions.toml")
    assert excepted == 1
    assert [str(finding) for finding in left] == [
        "exceptions.toml:7: stale-exception: [function-length] a.zig fixed:"
        " nothing to except any more; remove the entry"
    ]
    assert tidy.apply_exceptions([long], entries, set(), "exceptions.toml") == ([], 1)


def test_a_counted_exception_fails_when_findings_grow_or_shrink(tmp_path: Path) -> None:
    entries, problems = exception_list(
        tmp_path, '[[line-length]]\npath = "zig"\ncount = 2\nreason = "rewrap pending"\n'
    )
    assert problems == []

    def wide(line: int) -> tidy.Finding:
        return tidy.Finding("zig/a.zig", line, "line-length", "101 columns (limit 100)")

    rules = {"line-length"}
    assert tidy.apply_exceptions([wide(1), wide(2)], entries, rules, "e.toml") == ([], 2)
    grown, _ = tidy.apply_exceptions([wide(1), wide(2), wide(3)], entries, rules, "e.toml")
    assert [finding.line for finding in grown] == [1, 2, 3]
    assert all("allows 2 here, found 3" in finding.detail for finding in grown)
    shrunk, _ = tidy.apply_exceptions([wide(1)], entries, rules, "e.toml")
    assert [finding.detail for finding in shrunk] == [
        "[line-length] zig: 1 left of the 2 allowed; lower count to 1"
    ]


def test_an_exception_without_a_reason_or_of_an_unknown_rule_is_refused(tmp_path: Path) -> None:
    entries, problems = exception_list(
        tmp_path,
        '[[file-length]]\npath = "a.py"\nreason = " "\n\n'
        '[[file-length]]\npath = "b.py"\n\n'
        '[[ruff]]\npath = "c.py"\ncode = "E501"\ncount = 0\nreason = "why"\n\n'
        '[[lenght]]\npath = "d.py"\nreason = "typo"\n',
    )
    assert entries == []
    assert [(problem.line, problem.rule) for problem in problems] == [
        (1, "exceptions"),
        (5, "exceptions"),
        (8, "exceptions"),
        (14, "exceptions"),
    ]
    assert "non-empty" in problems[0].detail
    assert "missing ['reason']" in problems[1].detail
    assert "count must be a positive integer" in problems[2].detail
    assert "unknown table 'lenght'" in problems[3].detail
