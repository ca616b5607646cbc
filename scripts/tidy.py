"""The tidy check: the rules the project keeps, checked in one command (CONTRIBUTING.md).

Runs, in order, and reports every finding as `path:line: rule: detail`:

1. `ruff check` (with RUF100: a `noqa` that silences nothing) and `ruff format --check` over
   every Python file;
2. `mypy` (strict, configured in pyproject.toml) over the package, tests, scripts,
   benchmarks, examples, fuzz and setup.py;
3. `zig fmt --check` of build.zig and zig/;
4. the limits, on Zig and Python alike: functions at most 70 lines, files at most 800 lines,
   Zig lines at most 100 columns (ruff holds Python's), no unused Zig declaration and no
   unused private module-level name in the package.

A finding may be excepted by an entry of scripts/tidy_exceptions.toml, and every entry says
why. An entry that no longer matches what it excepts (the function now fits, the name is now
used, fewer errors are left than it allows) is a finding itself: the list only shrinks.
Exits 1 when there is any finding.

    python scripts/tidy.py [--skip STEP ...]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXCEPTIONS = ROOT / "scripts" / "tidy_exceptions.toml"
PYTHON_PATHS = ("python", "tests", "benchmarks", "scripts", "examples", "fuzz", "setup.py")
MYPY_PATHS = ("python/dataset_rt", *PYTHON_PATHS[1:])
ZIG_PATHS = ("build.zig", "zig")
PACKAGE = "python/dataset_rt"
STEPS = ("ruff", "mypy", "zig-fmt", "limits")

FUNCTION_LINES_MAX = 70
FILE_LINES_MAX = 800
ZIG_COLUMNS_MAX = 100

# What an exception entry names besides its path (a file, or a directory for the files under
# it), per rule. A counted rule's entry allows exactly `count` findings there; a `mypy` entry
# lets a file (or directory) not yet strict keep its errors until it has none.
EXCEPTION_KEYS: dict[str, tuple[str, ...]] = {
    "ruff": ("code",),
    "mypy": (),
    "function-length": ("name",),
    "file-length": (),
    "line-length": (),
    "unused-zig": ("name",),
    "unused-private": ("name",),
}
COUNTED_RULES = {"ruff", "line-length"}
RULES_OF_STEP = {
    "ruff": {"ruff", "ruff-format"},
    "mypy": {"mypy"},
    "zig-fmt": {"zig-fmt"},
    "limits": {"function-length", "file-length", "line-length", "unused-zig", "unused-private"},
}

# Declarations the compiler or std reaches by name, never through our own source.
ZIG_IMPLICIT_NAMES = {"std_options", "panic", "main", "build", "format"}


@dataclass(frozen=True)
class Finding:
    """One breach of a rule. `name` and `code` are what an exception entry must match."""

    path: str
    line: int
    rule: str
    detail: str
    name: str = ""
    code: str = ""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.detail}"


@dataclass(frozen=True)
class Entry:
    """One entry of the exception list."""

    rule: str
    path: str
    reason: str
    line: int
    name: str = ""
    code: str = ""
    count: int | None = None

    def matches(self, finding: Finding) -> bool:
        inside = finding.path == self.path or finding.path.startswith(self.path.rstrip("/") + "/")
        return (
            finding.rule == self.rule
            and inside
            and finding.name == self.name
            and finding.code == self.code
        )

    def describe(self) -> str:
        return " ".join(filter(None, (f"[{self.rule}]", self.path, self.name, self.code)))


# --- The exception list ---------------------------------------------------------------------


def load_exceptions(path: Path) -> tuple[list[Entry], list[Finding]]:
    """The entries of the exception list, and a finding for each malformed entry."""
    text = path.read_text()
    shown = display_path(path)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return [], [Finding(shown, 1, "exceptions", f"not valid TOML: {error}")]
    header_lines = table_header_lines(text)
    entries: list[Entry] = []
    problems: list[Finding] = []
    for rule, table in document.items():
        lines = header_lines.get(rule, [])
        if rule not in EXCEPTION_KEYS or not isinstance(table, list):
            known = ", ".join(f"[[{name}]]" for name in EXCEPTION_KEYS)
            detail = f"unknown table {rule!r}; the tables are {known}"
            problems.append(Finding(shown, (lines or [1])[0], "exceptions", detail))
            continue
        for index, raw in enumerate(table):
            line = lines[index] if index < len(lines) else 1
            entry, problem = parse_exception(rule, raw, line)
            if problem:
                problems.append(Finding(shown, line, "exceptions", problem))
            elif entry is not None:
                entries.append(entry)
    seen: set[str] = set()
    for entry in entries:
        if entry.describe() in seen:
            problems.append(Finding(shown, entry.line, "exceptions", "duplicate entry"))
        seen.add(entry.describe())
    return entries, problems


def table_header_lines(text: str) -> dict[str, list[int]]:
    """The line of each `[[table]]` header, per table, in order: where each entry starts."""
    found: dict[str, list[int]] = {}
    for number, text_line in enumerate(text.splitlines(), 1):
        header = re.match(r"\s*\[\[\s*([\w-]+)\s*\]\]", text_line)
        if header:
            found.setdefault(header.group(1), []).append(number)
    return found


def parse_exception(rule: str, raw: dict[str, object], line: int) -> tuple[Entry | None, str]:
    """One entry of table `rule`, or why it is malformed."""
    required = {"path", "reason", *EXCEPTION_KEYS[rule]} | (
        {"count"} if rule in COUNTED_RULES else set()
    )
    missing = sorted(required - raw.keys())
    unknown = sorted(raw.keys() - required)
    if missing or unknown:
        wrong = f"missing {missing}" if missing else f"unknown {unknown}"
        return None, f"[{rule}] entry: {wrong}; it takes exactly {sorted(required)}"
    strings = {key: value for key, value in raw.items() if key != "count"}
    if not all(isinstance(value, str) and value.strip() for value in strings.values()):
        return None, f"[{rule}] entry: {', '.join(sorted(strings))} must be non-empty strings"
    count = raw.get("count")
    if count is not None and (not isinstance(count, int) or count < 1):
        return None, f"[{rule}] entry: count must be a positive integer, not {count!r}"
    entry = Entry(
        rule=rule,
        path=str(raw["path"]),
        reason=str(raw["reason"]),
        line=line,
        name=str(raw.get("name", "")),
        code=str(raw.get("code", "")),
        count=count if isinstance(count, int) else None,
    )
    return entry, ""


def apply_exceptions(
    findings: Iterable[Finding], entries: Sequence[Entry], checked_rules: set[str], shown: str
) -> tuple[list[Finding], int]:
    """The findings no entry excepts, then one finding per entry that is no longer needed
    (only for rules whose check ran); and how many findings the entries excepted."""
    left: list[Finding] = []
    covered: list[list[Finding]] = [[] for _ in entries]
    for finding in findings:
        index = next((i for i, entry in enumerate(entries) if entry.matches(finding)), None)
        if index is None:
            left.append(finding)
        else:
            covered[index].append(finding)
    for entry, excepted in zip(entries, covered, strict=True):
        if entry.rule not in checked_rules:
            continue
        found = len(excepted)
        if entry.count is None:
            if found == 0:
                detail = f"{entry.describe()}: nothing to except any more; remove the entry"
                left.append(Finding(shown, entry.line, "stale-exception", detail))
        elif found > entry.count:
            note = f" (the exception list allows {entry.count} here, found {found})"
            left.extend(
                Finding(f.path, f.line, f.rule, f.detail + note, f.name, f.code) for f in excepted
            )
        elif found < entry.count:
            action = f"lower count to {found}" if found else "remove the entry"
            detail = f"{entry.describe()}: {found} left of the {entry.count} allowed; {action}"
            left.append(Finding(shown, entry.line, "stale-exception", detail))
    return left, sum(map(len, covered))


# --- Files ----------------------------------------------------------------------------------


def display_path(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def source_files(paths: Sequence[str], suffix: str) -> list[Path]:
    """The files under `paths` ending in `suffix` that git tracks or would track (so ignored
    build output stays out), sorted."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if listed.returncode == 0:
        names = {name for name in listed.stdout.split("\0") if name.endswith(suffix)}
        return sorted(ROOT / name for name in names if (ROOT / name).is_file())
    found: set[Path] = set()
    for name in paths:
        path = ROOT / name
        candidates = [path] if path.is_file() else path.rglob(f"*{suffix}")
        found.update(p for p in candidates if p.name.endswith(suffix) and ".venv" not in p.parts)
    return sorted(found)


# --- External tools: ruff, mypy, zig fmt ----------------------------------------------------


def run_tool(arguments: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *arguments], cwd=ROOT, capture_output=True, text=True
    )


def tool_failure(rule: str, result: subprocess.CompletedProcess[str]) -> Finding:
    """A tool that could not check: its first error line (or last line) as a finding."""
    output = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
    shown = next((line for line in output if "error" in line.lower()), output[-1])
    command = " ".join(str(part) for part in result.args[2:4])
    return Finding(".", 0, rule, f"`{command}` failed (exit {result.returncode}): {shown}")


def ruff_findings() -> list[Finding]:
    """`ruff check` and `ruff format --check` over all Python, as findings."""
    findings: list[Finding] = []
    for rule, command in (
        ("ruff", ["ruff", "check", "--no-fix", "--output-format", "json", *PYTHON_PATHS]),
        ("ruff-format", ["ruff", "format", "--check", "--output-format", "json", *PYTHON_PATHS]),
    ):
        result = run_tool(command)
        try:
            diagnostics = json.loads(result.stdout)
        except json.JSONDecodeError:
            findings.append(tool_failure(rule, result))
            continue
        for item in diagnostics:
            path = display_path(Path(item["filename"]))
            line = (item.get("location") or {}).get("row") or 1
            code = item.get("code") or "syntax-error"
            if rule == "ruff":
                detail = f"{code} {item['message']}"
            else:
                detail = "not formatted; run `python -m ruff format` on it"
            findings.append(Finding(path, line, rule, detail, code=code if rule == "ruff" else ""))
    return findings


def mypy_findings() -> list[Finding]:
    """mypy's errors over MYPY_PATHS (its notes belong to an error and are left out)."""
    result = run_tool(["mypy", "--output", "json", "--no-error-summary", *MYPY_PATHS])
    findings: list[Finding] = []
    for output in result.stdout.splitlines():
        try:
            item = json.loads(output)
        except json.JSONDecodeError:
            findings.append(Finding(".", 0, "mypy", output))
            continue
        if item.get("severity") != "error":
            continue
        detail = f"{item['message']} [{item.get('code') or 'error'}]"
        findings.append(Finding(item["file"], int(item["line"]), "mypy", detail))
    if result.returncode not in (0, 1) or (result.returncode == 1 and not findings):
        findings.append(tool_failure("mypy", result))
    return findings


def zig_fmt_findings() -> list[Finding]:
    """The files `zig fmt --check` would change; a file it cannot parse fails it too."""
    result = run_tool(["ziglang", "fmt", "--check", *ZIG_PATHS])
    detail = "not formatted; run `python -m ziglang fmt` on it"
    findings = [Finding(name, 1, "zig-fmt", detail) for name in result.stdout.split()]
    if result.returncode != 0 and (result.stderr.strip() or not findings):
        findings.append(tool_failure("zig-fmt", result))
    return findings


# --- Zig: a scanner that knows strings, characters and comments -----------------------------


@dataclass(frozen=True)
class Token:
    """A Zig token: `ident` (keywords included, `@"x"` unquoted), `builtin` (`@name`),
    `string` (a multiline string's line too), `char`, `number` or `punct` (one character)."""

    kind: str
    text: str
    line: int


IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NUMBER = re.compile(r"[0-9][0-9A-Za-z_]*(?:\.[0-9][0-9A-Za-z_]*)?(?:(?<=[eEpP])[-+][0-9_]+)?")


def quoted_end(source: str, start: int, quote: str) -> int:
    """The index after the closing `quote` of a literal whose text starts at `start` (escapes
    skipped); an unterminated literal ends at its line's end."""
    index = start
    while index < len(source):
        character = source[index]
        if character == "\\":
            index += 2
        elif character == quote:
            return index + 1
        elif character == "\n":
            return index
        else:
            index += 1
    return len(source)


def zig_tokens(source: str) -> list[Token]:
    """The tokens of a Zig source, without comments; each with its 1-based line."""
    tokens: list[Token] = []
    index, line = 0, 1
    while index < len(source):
        character = source[index]
        if character in " \t\r\n":
            line += character == "\n"
            index += 1
        elif source.startswith(("//", "\\\\"), index):
            end = source.find("\n", index)
            end = len(source) if end < 0 else end
            if character == "\\":
                tokens.append(Token("string", source[index + 2 : end], line))
            index = end
        elif character in "\"'" or source.startswith('@"', index):
            opening = index + (2 if character == "@" else 1)
            end = quoted_end(source, opening, source[opening - 1])
            kind = {"@": "ident", '"': "string", "'": "char"}[character]
            tokens.append(Token(kind, source[opening : max(opening, end - 1)], line))
            index = end
        elif character == "@" and (builtin := IDENTIFIER.match(source, index + 1)):
            tokens.append(Token("builtin", "@" + builtin.group(), line))
            index = builtin.end()
        elif word := IDENTIFIER.match(source, index):
            tokens.append(Token("ident", word.group(), line))
            index = word.end()
        elif number := NUMBER.match(source, index):
            tokens.append(Token("number", number.group(), line))
            index = number.end()
        else:
            tokens.append(Token("punct", character, line))
            index += 1
    return tokens


@dataclass(frozen=True)
class ZigFunction:
    name: str  # qualified by the named containers and functions around it: `Reader.init`
    line: int
    end_line: int


@dataclass(frozen=True)
class ZigDeclaration:
    name: str
    line: int
    token: int  # index of the name's token
    public: bool
    exported: bool
    # Occurrences of the name after a `.` in its own one-expression initializer: the
    # second `X` of an alias `const X = y.X;`, which is no use of the alias.
    own_mentions: int = 0


CONTAINER_KEYWORDS = {"struct", "enum", "union", "opaque"}
DECLARATION_KEYWORDS = {"const", "var", "fn"}
DECLARATION_MODIFIERS = {"pub", "export", "extern", "inline", "noinline", "threadlocal"}
STATEMENT_STARTS = {";", "{", "}", ","}


def brace_kind(tokens: Sequence[Token], index: int, openers: dict[int, int]) -> str:
    """What the `{` at `index` opens: a `container` (struct, enum, union, opaque), an
    `error-set`, or a `block` (a function body, a test, a comptime block, a literal, ...)."""
    before = index - 1
    if before >= 0 and tokens[before].text == ")" and before in openers:
        before = openers[before] - 1
    keyword = tokens[before].text if before >= 0 else ""
    if keyword in CONTAINER_KEYWORDS:
        return "container"
    return "error-set" if keyword == "error" else "block"


def container_label(tokens: Sequence[Token], index: int, openers: dict[int, int]) -> str | None:
    """The name of `const Name = [packed|extern] struct... {` whose `{` is at `index`."""
    before = index - 1
    if tokens[before].text == ")" and before in openers:
        before = openers[before] - 1
    before -= 1  # the container keyword
    while before >= 0 and tokens[before].text in {"packed", "extern"}:
        before -= 1
    if before >= 2 and tokens[before].text == "=" and tokens[before - 2].text in {"const", "var"}:
        return tokens[before - 1].text
    return None


def declaration_at(tokens: Sequence[Token], index: int) -> ZigDeclaration | None:
    """The container-level declaration whose `const`, `var` or `fn` is at `index`, if it is
    one (not a pointer's `const`, not a function type)."""
    if index + 2 >= len(tokens) or tokens[index + 1].kind != "ident":
        return None
    follower = tokens[index + 2].text
    if follower not in ({"("} if tokens[index].text == "fn" else {"=", ":"}):
        return None
    start = index - 1
    while start >= 0 and (
        tokens[start].text in DECLARATION_MODIFIERS
        or (tokens[start].kind == "string" and start > 0 and tokens[start - 1].text == "extern")
    ):
        start -= 1
    if start >= 0 and tokens[start].text not in STATEMENT_STARTS:
        return None
    modifiers = {token.text for token in tokens[start + 1 : index]}
    name = tokens[index + 1]
    own = alias_mentions(tokens, index + 2, name.text) if follower == "=" else 0
    public, exported = "pub" in modifiers, "export" in modifiers
    return ZigDeclaration(name.text, name.line, index + 1, public, exported, own)


def alias_mentions(tokens: Sequence[Token], start: int, name: str) -> int:
    """How often `name` follows a `.` in the initializer that starts at `start`, when that
    initializer is one expression without a block (up to its `;`); 0 otherwise."""
    count = 0
    for index in range(start, len(tokens)):
        text = tokens[index].text if tokens[index].kind == "punct" else None
        if text == ";":
            return count
        if text == "{":
            return 0
        if tokens[index].kind == "ident" and tokens[index].text == name:
            count += tokens[index - 1].text == "."
    return 0


def test_name(tokens: Sequence[Token], index: int) -> str | None:
    """`test "name"`, `test name` or `test` when the `{` at `index` opens a test block."""
    if index >= 1 and tokens[index - 1].kind == "ident" and tokens[index - 1].text == "test":
        return "test"
    if index >= 2 and tokens[index - 2].kind == "ident" and tokens[index - 2].text == "test":
        named = tokens[index - 1]
        return f'test "{named.text}"' if named.kind == "string" else f"test {named.text}"
    return None


def zig_outline(tokens: Sequence[Token]) -> tuple[list[ZigFunction], list[ZigDeclaration]]:
    """The functions (with their closing brace's line) and the container-level declarations
    of a file's tokens."""
    functions: list[ZigFunction] = []
    declarations: list[ZigDeclaration] = []
    openers: dict[int, int] = {}  # a `)` or `]`'s index -> its opener's
    open_parens: list[int] = []
    stack: list[tuple[str, str | None, int]] = []  # (brace kind, label, line)
    pending: tuple[str, int, int] | None = None  # a function's name, line, paren depth
    for index, token in enumerate(tokens):
        text = token.text if token.kind == "punct" else None
        if text in {"(", "["}:
            open_parens.append(index)
        elif text in {")", "]"} and open_parens:
            openers[index] = open_parens.pop()
        elif text == ";" and pending and pending[2] == len(open_parens):
            pending = None  # a prototype: `extern fn f() void;`
        elif text == "{":
            kind, label, line = brace_kind(tokens, index, openers), None, token.line
            if kind == "container":
                label = container_label(tokens, index, openers)
            elif kind == "block" and pending and pending[2] == len(open_parens):
                kind, label, line, pending = "fn", pending[0], pending[1], None
            elif kind == "block" and (test := test_name(tokens, index)):
                kind, label, line = "fn", test, tokens[index - 1].line
            stack.append((kind, label, line))
        elif text == "}" and stack:
            kind, label, line = stack.pop()
            if kind == "fn" and label is not None:
                names = [entry[1] for entry in stack if entry[1] and entry[0] != "block"]
                functions.append(ZigFunction(".".join([*names, label]), line, token.line))
        elif token.kind == "ident" and token.text in DECLARATION_KEYWORDS:
            at_container_level = not stack or stack[-1][0] == "container"
            declaration = declaration_at(tokens, index) if at_container_level else None
            if declaration:
                declarations.append(declaration)
            if token.text == "fn" and index + 1 < len(tokens) and tokens[index + 1].kind == "ident":
                pending = (tokens[index + 1].text, token.line, len(open_parens))
    return functions, declarations


@dataclass
class ZigReferences:
    """How often each name occurs in a file: anywhere, and after a `.` (or as the name a
    `@field`, `@hasDecl` or `@hasField` gives as a string), as other files reach a `pub`
    declaration."""

    anywhere: Counter[str] = field(default_factory=Counter)
    dotted: Counter[str] = field(default_factory=Counter)


def zig_references(tokens: Sequence[Token]) -> ZigReferences:
    references = ZigReferences()
    by_name = {"@field", "@hasDecl", "@hasField"}
    for index, token in enumerate(tokens):
        if token.kind == "ident":
            references.anywhere[token.text] += 1
            if index > 0 and tokens[index - 1].text == ".":
                references.dotted[token.text] += 1
        elif token.kind == "builtin" and token.text in by_name:
            named = next((t for t in tokens[index + 1 : index + 12] if t.kind == "string"), None)
            if named and IDENTIFIER.fullmatch(named.text):
                references.anywhere[named.text] += 1
                references.dotted[named.text] += 1
    return references


def zig_findings(files: Sequence[Path]) -> list[Finding]:
    """Function length, line width, file length and unused declarations of Zig files."""
    findings: list[Finding] = []
    outlines: dict[str, tuple[list[ZigFunction], list[ZigDeclaration]]] = {}
    references: dict[str, ZigReferences] = {}
    for file in files:
        path, source = display_path(file), file.read_text()
        lines = source.splitlines()
        findings.extend(length_findings(path, len(lines)))
        for number, line in enumerate(lines, 1):
            if len(line) > ZIG_COLUMNS_MAX:
                detail = f"{len(line)} columns (limit {ZIG_COLUMNS_MAX})"
                findings.append(Finding(path, number, "line-length", detail))
        tokens = zig_tokens(source)
        outlines[path] = zig_outline(tokens)
        references[path] = zig_references(tokens)
        for function in outlines[path][0]:
            findings.extend(
                function_findings(path, function.name, function.line, function.end_line)
            )
    for path, (_, declarations) in outlines.items():
        own_names = Counter(declaration.name for declaration in declarations)
        for declaration in declarations:
            name = declaration.name
            if declaration.exported or name in ZIG_IMPLICIT_NAMES:
                continue
            if references[path].anywhere[name] > own_names[name] + declaration.own_mentions:
                continue
            if declaration.public and any(
                other != path and refs.dotted[name] for other, refs in references.items()
            ):
                continue
            where = "this file or any other" if declaration.public else "this file"
            detail = f"`{name}` is declared but never used in {where}"
            findings.append(Finding(path, declaration.line, "unused-zig", detail, name=name))
    return findings


def length_findings(path: str, line_count: int) -> list[Finding]:
    if line_count <= FILE_LINES_MAX:
        return []
    detail = f"{line_count} lines (limit {FILE_LINES_MAX})"
    return [Finding(path, FILE_LINES_MAX + 1, "file-length", detail)]


def function_findings(path: str, name: str, line: int, end_line: int) -> list[Finding]:
    length = end_line - line + 1
    if length <= FUNCTION_LINES_MAX:
        return []
    detail = f"`{name}` is {length} lines (limit {FUNCTION_LINES_MAX})"
    return [Finding(path, line, "function-length", detail, name=name)]


# --- Python ---------------------------------------------------------------------------------


def python_functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int, int]]:
    """Every function and method (nested ones too): qualified name, `def` line, last line."""
    found: list[tuple[str, int, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = prefix + node.name
            if not isinstance(node, ast.ClassDef):
                found.append((name, node.lineno, node.end_lineno or node.lineno))
            found.extend(python_functions(node, name + "."))
        else:
            found.extend(python_functions(node, prefix))
    return found


def module_private_names(tree: ast.Module) -> list[tuple[str, int]]:
    """The private names (`_name`, not dunders) a module binds at its top level, in `if`,
    `try` and `with` blocks included."""
    found: list[tuple[str, int]] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop(0)
        names: list[str] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.asname or alias.name.split(".")[0] for alias in node.names]
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    pending.append(child)
                elif isinstance(child, ast.ExceptHandler):
                    pending.extend(child.body)
        found += [
            (name, node.lineno)
            for name in names
            if name.startswith("_") and not name.startswith("__") and name != "_"
        ]
    return found


@dataclass
class PythonReferences:
    """Where a file mentions names: read (`name`), as an attribute (`x.name`), imported
    (`from m import name`), or as an identifier-like string (`"m.name"`, `getattr`)."""

    read: Counter[str] = field(default_factory=Counter)
    attribute: Counter[str] = field(default_factory=Counter)
    imported: Counter[str] = field(default_factory=Counter)
    strings: Counter[str] = field(default_factory=Counter)


def python_references(tree: ast.AST) -> PythonReferences:
    references = PythonReferences()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            references.read[node.id] += 1
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            references.read[node.target.id] += 1
        elif isinstance(node, ast.Attribute):
            references.attribute[node.attr] += 1
        elif isinstance(node, ast.ImportFrom):
            references.imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"[A-Za-z_][\w.:]*", node.value):
                references.strings.update(re.split(r"[.:]", node.value))
    return references


def python_findings(files: Sequence[Path], package: Path = ROOT / PACKAGE) -> list[Finding]:
    """Function and file length of every Python file, and the unused privates of the files
    under `package`."""
    findings: list[Finding] = []
    trees: dict[str, ast.Module] = {}
    package_paths = {display_path(file) for file in files if file.is_relative_to(package)}
    for file in files:
        path, source = display_path(file), file.read_text()
        findings.extend(length_findings(path, len(source.splitlines())))
        try:
            trees[path] = ast.parse(source, filename=path)
        except SyntaxError:
            continue  # ruff reports it
        for name, line, end_line in python_functions(trees[path]):
            findings.extend(function_findings(path, name, line, end_line))
    references = {path: python_references(tree) for path, tree in trees.items()}
    for path, tree in trees.items():
        if path not in package_paths:
            continue
        for name, line in module_private_names(tree):
            own = references[path]
            if own.read[name] or own.attribute[name] or own.strings[name]:
                continue
            if any(
                refs.attribute[name] or refs.imported[name] or refs.strings[name]
                for other, refs in references.items()
                if other != path
            ):
                continue
            detail = f"`{name}` is never used in any Python file of the project"
            findings.append(Finding(path, line, "unused-private", detail, name=name))
    return findings


def limit_findings() -> list[Finding]:
    zig = zig_findings(source_files(ZIG_PATHS, ".zig"))
    return zig + python_findings(source_files(PYTHON_PATHS, ".py"))


# --- Driver ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--skip", action="append", choices=STEPS, default=[], help="skip a step (repeatable)"
    )
    parser.add_argument("--exceptions", type=Path, default=EXCEPTIONS, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    entries, findings = load_exceptions(arguments.exceptions)
    steps: dict[str, Callable[[], list[Finding]]] = {
        "ruff": ruff_findings,
        "mypy": mypy_findings,
        "zig-fmt": zig_fmt_findings,
        "limits": limit_findings,
    }
    checked_rules: set[str] = set()
    raw: list[Finding] = []
    for step, check in steps.items():
        if step in arguments.skip:
            print(f"tidy: {step}: skipped", flush=True)
            continue
        started = time.monotonic()
        step_findings = check()
        raw.extend(step_findings)
        checked_rules |= RULES_OF_STEP[step]
        elapsed = time.monotonic() - started
        print(f"tidy: {step}: {len(step_findings)} raw findings, {elapsed:.1f} s", flush=True)
    shown = display_path(arguments.exceptions)
    left, excepted = apply_exceptions(raw, entries, checked_rules, shown)
    findings += left
    for finding in sorted(findings, key=lambda f: (f.path, f.line, f.rule, f.detail)):
        print(finding)
    if findings:
        counts = Counter(finding.rule for finding in findings)
        summary = ", ".join(f"{count} {rule}" for rule, count in sorted(counts.items()))
        print(f"tidy: FAILED: {summary} ({excepted} excepted by {shown})")
        return 1
    print(f"tidy: clean ({excepted} findings excepted by {shown})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
