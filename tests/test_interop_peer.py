"""Interoperability with the reference implementation, `dataset-rt==0.2.4` from PyPI.

The reference is a Rust/PyO3 package with the same import name, so it lives in a
virtual environment of its own (one session-scoped fixture creates or reuses it)
and is driven in a subprocess by tests/peer_driver.py. Both directions are
checked on the same inputs (lz4 and none, one shard and several, every metadata
kind, several sources):

- caches written by dataset-rt load here with ``validate_cache=True`` and read
  back identically (payload bytes, metadata type and value, float bit for bit,
  cache_id and sample_id), and so does their samples metadata table;
- caches written here read back identically in dataset-rt, and every SHA-256
  and length in their manifest matches the files (checked with hashlib);
- one "user script" written against dataset-rt's API runs on both and records
  the same observations.

dataset-rt 0.2.4 parses the JSON floats embedded in shard records without
correct rounding, so it misreads a few floats of its OWN caches (and rejects
them with ``validate_cache=True``). Its results are therefore compared on
values it round-trips itself, and, for arbitrary floats, against what it
returns for its own cache of the same input.

When PyPI cannot be reached the tests are skipped with a message saying so.
The environment lives in ``$DATASET_RT_PEER_VENV`` or
``~/.cache/dataset_rt_tests/peer-0.2.4`` and is reused while it works.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cache_reference
import pytest

import dataset_rt
from conftest import load_script, pythonpath_before_inherited
from dataset_rt import DatasetRuntime, ReaderConfig

PEER_VERSION = "0.2.4"
VENV_ENV_VAR = "DATASET_RT_PEER_VENV"
# The environment variable naming each peer version's virtual environment
# (tests/test_interop_peer_048.py drives dataset-rt 0.4.8 the same way).
VENV_ENV_VARS = {PEER_VERSION: VENV_ENV_VAR, "0.4.8": "DATASET_RT_PEER_048_VENV"}
VENV_CREATE_TIMEOUT = 300
PIP_INSTALL_TIMEOUT = 900
DRIVER_TIMEOUT = 300
DRIVER = Path(__file__).with_name("peer_driver.py")

peer_driver = load_script(DRIVER)  # its encodings, and its operations run in-process on DatasetRT

# --- the peer's virtual environment --------------------------------------------------------------

# Substrings of pip's output that mean the package index could not be reached.
NETWORK_FAILURE_MARKERS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Max retries exceeded",
    "connection broken by",
    "Temporary failure in name resolution",
    "Name or service not known",
    "nodename nor servname",
    "Network is unreachable",
    "No route to host",
    "Connection refused",
    "Connection reset",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "Read timed out",
    "ProxyError",
    "SSLError",
    "Could not fetch URL",
    "HTTP error",
)


def pip_could_not_reach_index(output: str) -> bool:
    """Whether a failed ``pip install`` failed only for want of the package index."""
    return any(marker in output for marker in NETWORK_FAILURE_MARKERS)


def default_venv_dir(version: str = PEER_VERSION) -> Path:
    configured = os.environ.get(VENV_ENV_VARS[version])
    if configured:
        return Path(configured).expanduser().absolute()
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache_home / "dataset_rt_tests" / f"peer-{version}"


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def peer_env() -> dict[str, str]:
    """The environment for the peer's interpreter: nothing that makes it import this project."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "DATASET_RT_LIBRARY"):
        env.pop(name, None)
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PIP_NO_INPUT"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


PROBE = (
    "import json, importlib.metadata as m, dataset_rt\n"
    "print(json.dumps({'file': dataset_rt.__file__, 'version': m.version('dataset-rt')}))\n"
)


def probe_peer(venv: Path, version: str = PEER_VERSION) -> str | None:
    """None when `venv` holds a working dataset-rt of `version`, else why not."""
    python = venv_python(venv)
    if not python.exists():
        return f"{python} does not exist"
    try:
        completed = subprocess.run(
            [str(python), "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=120,
            env=peer_env(),
            cwd=venv,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"probe failed: {error}"
    if completed.returncode != 0:
        return f"import dataset_rt failed: {completed.stderr.strip()[-2000:]}"
    try:
        found = json.loads(completed.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"unexpected probe output: {completed.stdout!r}"
    if found["version"] != version:
        return f"installed dataset-rt is {found['version']}, not {version}"
    if not Path(found["file"]).resolve().is_relative_to(venv.resolve()):
        return f"dataset_rt imported from {found['file']}, outside {venv}"
    return None


@contextlib.contextmanager
def venv_lock(venv: Path) -> Iterator[None]:
    """Serialize creation between concurrent test runs (e.g. pytest-xdist workers)."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    lock_path = venv.parent / f"{venv.name}.lock"
    with open(lock_path, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no lock, creation is still checked by the probe
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def run_step(command: list[str], timeout: int, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=peer_env()
        )
    except subprocess.TimeoutExpired as error:
        output = f"{error.stdout or ''}{error.stderr or ''}"
        if isinstance(output, bytes):
            output = output.decode(errors="replace")
        pytest.fail(
            f"{what} did not finish within {timeout} s: {' '.join(command)}\n{output[-3000:]}"
        )


def create_peer_venv(venv: Path, version: str = PEER_VERSION) -> None:
    requirement = f"dataset-rt=={version}"
    if venv.exists():
        shutil.rmtree(venv)
    created = run_step(
        [sys.executable, "-m", "venv", str(venv)],
        VENV_CREATE_TIMEOUT,
        "creating the peer's virtual environment",
    )
    if created.returncode != 0:
        pytest.fail(
            f"could not create a virtual environment for {requirement} at {venv} "
            f"with {sys.executable}:\n"
            f"{created.stdout}{created.stderr}"
        )
    command = [
        str(venv_python(venv)),
        "-m",
        "pip",
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--timeout",
        "30",
        "--retries",
        "2",
        requirement,
    ]
    installed = run_step(command, PIP_INSTALL_TIMEOUT, f"pip install {requirement}")
    if installed.returncode != 0:
        output = f"{installed.stdout}\n{installed.stderr}"
        shutil.rmtree(venv, ignore_errors=True)
        if pip_could_not_reach_index(output):
            said = [
                line.strip()[:300]
                for line in output.splitlines()
                if "ERROR" in line or pip_could_not_reach_index(line)
            ]
            pytest.skip(
                f"PyPI could not be reached to install {requirement}, so the "
                "interoperability tests against it were NOT run. pip said: " + " | ".join(said[-3:])
            )
        pytest.fail(f"pip install {requirement} failed (not a network failure):\n{output[-4000:]}")


def peer_venv_python(version: str) -> Path:
    """The interpreter of a virtual environment with dataset-rt==`version`, created once
    (skipping the test when PyPI cannot be reached), then reused."""
    venv = default_venv_dir(version)
    with venv_lock(venv):
        if probe_peer(venv, version) is not None:
            create_peer_venv(venv, version)
            problem = probe_peer(venv, version)
            if problem is not None:
                pytest.fail(
                    f"dataset-rt=={version} was installed into {venv} but does not work: {problem}"
                )
    return venv_python(venv)


@pytest.fixture(scope="session")
def peer_python() -> Path:
    """The interpreter of a virtual environment with dataset-rt==0.2.4, created once, reused."""
    return peer_venv_python(PEER_VERSION)


def run_driver(
    python: Path | str, plan: list[dict[str, Any]], work: Path, env: dict[str, str]
) -> list[Any]:
    work.mkdir(parents=True, exist_ok=True)
    plan_path = work / "plan.json"
    out_path = work / "out.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    out_path.unlink(missing_ok=True)
    try:
        completed = subprocess.run(
            [str(python), str(DRIVER), str(plan_path), str(out_path)],
            capture_output=True,
            text=True,
            timeout=DRIVER_TIMEOUT,
            env=env,
            cwd=work,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"peer_driver.py under {python} did not finish within {DRIVER_TIMEOUT} s")
    assert completed.returncode == 0, (
        f"peer_driver.py under {python} failed (exit {completed.returncode}):\n"
        f"{completed.stderr[-6000:]}"
    )
    return json.loads(out_path.read_text(encoding="utf-8"))


def run_peer(peer_python: Path, plan: list[dict[str, Any]], work: Path) -> list[Any]:
    return run_driver(peer_python, plan, work, peer_env())


def run_ours_subprocess(plan: list[dict[str, Any]], work: Path) -> list[Any]:
    """The same driver under this interpreter, importing the dataset_rt this test imports."""
    env = dict(os.environ)
    package_parent = Path(dataset_rt.__file__).resolve().parent.parent
    env["PYTHONPATH"] = pythonpath_before_inherited(package_parent)
    return run_driver(sys.executable, plan, work, env)


# --- inputs --------------------------------------------------------------------------------

# Floats dataset-rt 0.2.4 reads back exactly from its own caches (it misreads e.g.
# 0.9999999999999999 and -1.23456e-198: see test_arbitrary_floats_*).
FLOATS = [
    0.1,
    1e21,
    -0.0,
    0.0,
    5e-324,
    1.5,
    100.0,
    -2.5e-8,
    1e-7,
    123456.789,
    2.0**53,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    2.2250738585072014e-308,
    2.225073858507201e-308,
    0.30000000000000004,
    1e22,
    1e23,
    -1e-300,
    3.141592653589793,
    1 / 3,
    1e16,
    12345678901234567890.0,
    4.35,
    0.7,
    1e-5,
    1e15,
    1e17,
    5e-310,
    6.02214076e23,
    1.0000000000000002,
]
INTS = [
    0,
    -1,
    1,
    2**63 - 1,
    -(2**63),
    2**53 + 1,
    -(2**53) - 1,
    4611686018427387904,
    1234567890123456789,
    42,
]
STRINGS = [
    "",
    "plain",
    'with "quotes"',
    "back\\slash",
    "new\nline\ttab\rret",
    "\x00nul\x01\x1f\x7f",
    "é ü ß",
    "😀 emoji",
    "\u2028\u2029 separators",
    "</script>",
    "'single'",
    "\\u0041 not an escape",
    "x" * 300,
]


def payload(rng: random.Random, index: int) -> bytes:
    kind = index % 4
    if kind == 0:
        return b""
    if kind == 1:
        return bytes([index % 256]) * rng.randrange(1, 700)  # compressible
    if kind == 2:
        return rng.randbytes(rng.randrange(1, 1500))  # incompressible
    return (b"the quick brown fox %d " % index) * rng.randrange(1, 40)


def shared_schema_samples(
    count: int, offset: int, rng: random.Random
) -> list[tuple[bytes, dict[str, Any]]]:
    samples = []
    for i in range(count):
        k = i + offset
        samples.append(
            (
                payload(rng, k),
                {
                    "flag": k % 3 == 0,
                    "count": INTS[k % len(INTS)],
                    "score": FLOATS[k % len(FLOATS)],
                    "label": STRINGS[k % len(STRINGS)],
                    "Zeta": FLOATS[(k * 7 + 3) % len(FLOATS)],
                    "a_int": k,
                },
            )
        )
    return samples


def other_schema_samples(rng: random.Random) -> list[tuple[bytes, dict[str, Any]]]:
    """A cache of its own schema: string and bool columns with non-ASCII and quoting names."""
    return [
        (
            payload(rng, i),
            {"é": STRINGS[i % len(STRINGS)], 'q"uote': i % 2 == 1, "~last": STRINGS[-1 - i]},
        )
        for i in range(len(STRINGS))
    ]


def sources_for(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {"name": "alpha", "samples": shared_schema_samples(31, 0, rng)},
        {"name": "beta", "samples": shared_schema_samples(7, 100, rng)},
        {"name": "gamma", "samples": shared_schema_samples(1, 200, rng)},
        {"name": "other", "samples": other_schema_samples(rng)},
    ]


SHARED = ["alpha", "beta", "gamma"]  # loaded together: cache_id 0, 1, 2
VARIANTS = {
    "none-one-shard": {"algo": "none", "ratio": 1.0, "max_shard_bytes": None},
    "none-small-shards": {"algo": "none", "ratio": 1.0, "max_shard_bytes": 900},
    "lz4-one-shard": {"algo": "lz4", "ratio": 2.0, "max_shard_bytes": None},
    "lz4-small-shards": {"algo": "lz4", "ratio": 2.0, "max_shard_bytes": 900},
}
SOURCES = sources_for(2024)


def encode_sources(sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "name": source["name"],
            "samples": [
                [peer_driver.encode_bytes(data), peer_driver.encode_metadata(metadata)]
                for data, metadata in source["samples"]
            ],
        }
        for source in sources
    ]


def expected_read(sources: list[dict[str, Any]], names: list[str]) -> list[list[Any]]:
    """What reading `names` in order with shuffle=False yields, encoded like the driver's output."""
    by_name = {source["name"]: source["samples"] for source in sources}
    return [
        [
            peer_driver.encode_value(cache_id),
            peer_driver.encode_value(sample_id),
            peer_driver.encode_bytes(data),
            peer_driver.encode_metadata(metadata),
        ]
        for cache_id, name in enumerate(names)
        for sample_id, (data, metadata) in enumerate(by_name[name])
    ]


POLARS_DTYPE = {bool: "Boolean", int: "Int64", float: "Float64", str: "String"}


def expected_table(sources: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    by_name = {source["name"]: source["samples"] for source in sources}
    first = by_name[names[0]][0][1]
    stored = sorted(first)
    rows = [
        (cache_id, sample_id, metadata)
        for cache_id, name in enumerate(names)
        for sample_id, (_, metadata) in enumerate(by_name[name])
    ]
    enc = peer_driver.encode_value
    return {
        "columns": [["cache_id", "UInt64"], ["sample_id", "UInt64"]]
        + [[name, POLARS_DTYPE[type(first[name])]] for name in stored]
        + [["weight", "Float64"]],
        "values": [[enc(c) for c, _, _ in rows], [enc(s) for _, s, _ in rows]]
        + [[enc(m[name]) for _, _, m in rows] for name in stored]
        + [[enc(1.0) for _ in rows]],
    }


def read_here(paths: list[Path], *, validate_cache: bool = True) -> dict[str, Any]:
    """Read with this project through the driver's own encoding (in-process)."""
    return peer_driver.op_read(
        {"paths": [str(p) for p in paths], "validate_cache": validate_cache, "seed": 0}
    )


def first_difference(actual: list[Any], expected: list[Any]) -> str:
    if len(actual) != len(expected):
        return f"{len(actual)} items instead of {len(expected)}"
    for position, (got, want) in enumerate(zip(actual, expected, strict=True)):
        if got != want:
            return (
                f"item {position}: got {json.dumps(got)[:600]}, expected {json.dumps(want)[:600]}"
            )
    return "no difference"


def assert_read_matches(
    result: dict[str, Any], sources: list[dict[str, Any]], names: list[str], what: str
) -> None:
    assert "error" not in result, f"{what}: reading failed: {result.get('error')}"
    expected = expected_read(sources, names)
    assert result["samples"] == expected, (
        f"{what}: samples differ: {first_difference(result['samples'], expected)}"
    )
    assert result["len"] == len(expected), (
        f"{what}: len(dataset) is {result['len']}, expected {len(expected)}"
    )
    table = expected_table(sources, names)
    assert result["table"]["columns"] == table["columns"], (
        f"{what}: samples_metadata columns differ"
    )
    for (name, _), got, want in zip(
        table["columns"], result["table"]["values"], table["values"], strict=True
    ):
        assert got == want, (
            f"{what}: samples_metadata column {name!r}: {first_difference(got, want)}"
        )


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


KINDS = {bool: "bool", int: "int", float: "float", str: "string"}


def check_cache_files(
    cache: Path, samples: list[tuple[bytes, dict[str, Any]]], writer: dict[str, Any]
) -> None:
    """Every hash and length in the manifest matches the files; the manifest describes the input."""
    manifest = cache_reference.read_manifest(cache)
    assert manifest["format_version"] == 2
    assert manifest["source_name"] == cache.name
    assert manifest["sample_count"] == len(samples)
    first = samples[0][1]
    assert manifest["metadata_schema"] == [
        {"name": n, "kind": KINDS[type(first[n])]} for n in sorted(first)
    ]
    assert manifest["metadata_sha256"] == sha256_file(cache / "metadata.arrow"), (
        f"{cache}: metadata_sha256"
    )
    assert manifest["index_sha256"] == sha256_file(cache / "index.bin"), f"{cache}: index_sha256"
    assert (cache / "index.bin").stat().st_size == 24 * len(samples)
    assert (cache / "metadata.arrow").read_bytes()[:6] == b"ARROW1"
    names = [shard["name"] for shard in manifest["shards"]]
    assert names == [f"{i:06d}.bin" for i in range(len(names))], f"{cache}: shard names {names}"
    assert sorted(p.name for p in (cache / "shards").iterdir()) == names, (
        f"{cache}: shard files differ from manifest"
    )
    for shard in manifest["shards"]:
        path = cache / "shards" / shard["name"]
        assert shard["sha256"] == sha256_file(path), (
            f"{path}: sha256 in manifest does not match the file"
        )
        assert shard["byte_len"] == path.stat().st_size, f"{path}: byte_len"
        assert shard["compression"] == {"algo": writer["algo"], "ratio": writer["ratio"]}
        assert all(c in "0123456789abcdef" for c in shard["sha256"]) and len(shard["sha256"]) == 64
    assert sum(s["uncompressed_byte_len"] for s in manifest["shards"]) == sum(
        len(d) for d, _ in samples
    )
    check_rotation(cache, manifest, writer["max_shard_bytes"] or 64 * 1024 * 1024)
    if writer["max_shard_bytes"] is not None and len(samples) >= 5:
        assert len(names) > 1, (
            f"{cache}: max_shard_bytes={writer['max_shard_bytes']} gave one shard"
        )


def check_rotation(cache: Path, manifest: dict[str, Any], max_shard_bytes: int) -> None:
    """index.bin places records back to back, starting a shard only when the next record would
    push a non-empty one past max_shard_bytes; shard lengths are the sums of their records."""
    index = (cache / "index.bin").read_bytes()
    shard, offset = 0, 0
    for row, (shard_id, record_offset, length) in enumerate(cache_reference.index_rows(index)):
        if offset > 0 and offset + length > max_shard_bytes:
            shard, offset = shard + 1, 0
        assert (shard_id, record_offset) == (shard, offset), (
            f"{cache}: record {row} at shard {shard_id} offset {record_offset}, "
            f"the rotation rule says {shard}/{offset}"
        )
        offset += length
        assert manifest["shards"][shard]["byte_len"] >= offset
    assert len(manifest["shards"]) == shard + 1, (
        f"{cache}: {len(manifest['shards'])} shards, expected {shard + 1}"
    )
    assert manifest["shards"][shard]["byte_len"] == offset, (
        f"{cache}: last shard has bytes beyond its records"
    )


def embedded_records(cache: Path) -> list[tuple[str, bytes]]:
    """(embedded metadata JSON text, stored payload) per sample, following index.bin."""
    index = (cache / "index.bin").read_bytes()
    records = []
    for shard_id, offset, length in cache_reference.index_rows(index):
        with open(cache / cache_reference.shard_name(shard_id), "rb") as shard:
            shard.seek(offset)
            record = shard.read(length)
        text = cache_reference.record_json(record).decode("utf-8")
        records.append((text, cache_reference.record_stored(record)))
    return records


def check_embedded_json(
    cache: Path, samples: list[tuple[bytes, dict[str, Any]]], algo: str
) -> None:
    """Each record's JSON has sorted keys, parses (correctly rounded) to the sample's values, and
    writes every float with a '.' or an exponent; the payload is raw or one size-prefixed LZ4
    block."""
    records = embedded_records(cache)
    assert len(records) == len(samples)
    for sample_id, ((text, stored), (data, metadata)) in enumerate(
        zip(records, samples, strict=True)
    ):
        parsed = json.loads(
            text, object_pairs_hook=lambda pairs: pairs
        )  # a float token parses to float
        keys = [key for key, _ in parsed]
        assert keys == sorted(metadata), (
            f"{cache} sample {sample_id}: keys {keys} are not the sorted metadata keys"
        )
        for key, value in parsed:
            want = metadata[key]
            assert type(value) is type(want) and peer_driver.encode_value(
                value
            ) == peer_driver.encode_value(want), (
                f"{cache} sample {sample_id}: embedded {key!r} is {value!r}, "
                f"expected {want!r} in {text}"
            )
        outside_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
        assert not re.search(r"\s", outside_strings), (
            f"{cache} sample {sample_id}: JSON is not compact: {text}"
        )
        if algo == "none":
            assert stored == data, f"{cache} sample {sample_id}: stored payload differs"
        else:
            size = cache_reference.lz4_size(stored)
            assert size == len(data), (
                f"{cache} sample {sample_id}: lz4 size prefix {size} != {len(data)}"
            )
            with contextlib.suppress(ImportError):
                import lz4.block

                block = stored[cache_reference.LZ4_SIZE_BYTES :]
                assert lz4.block.decompress(block, uncompressed_size=size) == data


def random_floats(count: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    values: list[float] = []
    while len(values) < count:
        value = struct.unpack("<d", rng.randbytes(8))[0]
        if math.isfinite(value):
            values.append(value)
    return values + [0.9999999999999999, -1.23456e-198, 5e-324, -5e-324, 2.2250738585072009e-308]


def float_sources() -> list[dict[str, Any]]:
    values = random_floats(300, 7)
    return [
        {
            "name": "floats",
            "samples": [(struct.pack("<d", v), {"f": v, "i": i}) for i, v in enumerate(values)],
        }
    ]


FLOAT_SOURCES = float_sources()

# The peer's README quickstart stores a metadata column named "sample_id", like the identity column.
QUICKSTART_SOURCES = [
    {
        "name": "train_images",
        "samples": [
            (
                bytes([i]) * (5 + i),
                {"sample_id": i, "label": "rare_class" if i % 3 == 0 else "common"},
            )
            for i in range(6)
        ],
    }
]


# --- the two directions, computed once ----------------------------------------------------------


@pytest.fixture(scope="module")
def interop(peer_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Write every variant with both implementations, read ours with the peer (two peer runs)."""
    root = tmp_path_factory.mktemp("interop")
    peer_base = root / "peer"
    ours_base = root / "ours"
    writes = [
        {
            "op": "write",
            "base": str(peer_base / name),
            "sources": encode_sources(SOURCES),
            "writer": writer,
        }
        for name, writer in VARIANTS.items()
    ]
    writes.append(
        {"op": "write", "base": str(peer_base / "floats"), "sources": encode_sources(FLOAT_SOURCES)}
    )
    writes.append(
        {
            "op": "write",
            "base": str(peer_base / "quickstart"),
            "sources": encode_sources(QUICKSTART_SOURCES),
        }
    )
    peer_writes = run_peer(peer_python, writes, root / "peer-write")

    our_writes = [
        peer_driver.op_write(step | {"base": step["base"].replace(str(peer_base), str(ours_base))})
        for step in writes
    ]

    def reads(base: Path, validate: bool) -> list[dict[str, Any]]:
        steps = []
        for name in VARIANTS:
            steps.append(
                {
                    "op": "read",
                    "paths": [str(base / name / s) for s in SHARED],
                    "validate_cache": validate,
                }
            )
            steps.append(
                {"op": "read", "paths": [str(base / name / "other")], "validate_cache": validate}
            )
        steps.append(
            {"op": "read", "paths": [str(base / "floats" / "floats")], "validate_cache": validate}
        )
        return steps

    plan = (
        reads(ours_base, False)
        + reads(ours_base, True)
        + reads(peer_base, False)
        + reads(peer_base, True)
    )
    peer_reads = run_peer(peer_python, plan, root / "peer-read")
    size = len(plan) // 4

    def by_variant(results: list[Any]) -> dict[str, Any]:
        named = {}
        for position, name in enumerate(VARIANTS):
            named[name] = {"shared": results[2 * position], "other": results[2 * position + 1]}
        named["floats"] = results[-1]
        return named

    return {
        "peer_base": peer_base,
        "ours_base": ours_base,
        "peer_writes": peer_writes,
        "our_writes": our_writes,
        "peer_reads_ours": by_variant(peer_reads[:size]),
        "peer_reads_ours_validated": by_variant(peer_reads[size : 2 * size]),
        "peer_reads_peer": by_variant(peer_reads[2 * size : 3 * size]),
        "peer_reads_peer_validated": by_variant(peer_reads[3 * size :]),
    }


def assert_all_written(results: list[Any], what: str) -> None:
    for result in results:
        assert result["results"] and all(r[0] == "success" for r in result["results"]), (
            f"{what}: not every source was written: {result['results']}"
        )


def test_both_implementations_write_every_variant(interop: dict[str, Any]) -> None:
    assert_all_written(interop["peer_writes"], "dataset-rt 0.2.4")
    assert_all_written(interop["our_writes"], "DatasetRT")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_cache_written_by_the_peer_reads_here_identically_and_validates(
    interop: dict[str, Any], variant: str
) -> None:
    base = interop["peer_base"] / variant
    for name, source in ((s["name"], s) for s in SOURCES):
        check_cache_files(
            base / name, source["samples"], VARIANTS[variant]
        )  # the harness reads what it thinks
    shared = read_here([base / name for name in SHARED], validate_cache=True)
    assert_read_matches(
        shared, SOURCES, SHARED, f"peer {variant} cache read here (validate_cache=True)"
    )
    other = read_here([base / "other"], validate_cache=True)
    assert_read_matches(other, SOURCES, ["other"], f"peer {variant} 'other' cache read here")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_cache_written_here_has_the_hashes_and_lengths_its_manifest_says(
    interop: dict[str, Any], variant: str
) -> None:
    base = interop["ours_base"] / variant
    for source in SOURCES:
        check_cache_files(base / source["name"], source["samples"], VARIANTS[variant])
        check_embedded_json(base / source["name"], source["samples"], VARIANTS[variant]["algo"])


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_cache_written_here_reads_identically_in_the_peer(
    interop: dict[str, Any], variant: str
) -> None:
    reads = interop["peer_reads_ours"][variant]
    assert_read_matches(
        reads["shared"], SOURCES, SHARED, f"our {variant} cache read by dataset-rt 0.2.4"
    )
    assert_read_matches(
        reads["other"], SOURCES, ["other"], f"our {variant} 'other' cache read by dataset-rt 0.2.4"
    )
    # and the same as the peer reads its own cache of the same input (guards the harness itself)
    own = interop["peer_reads_peer"][variant]
    assert reads == own


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_peer_ignores_our_record_checksums_with_and_without_validation(
    interop: dict[str, Any], variant: str
) -> None:
    # Our caches carry records.crc32c and a manifest key dataset-rt does not know;
    # it reads them, validated or not, exactly as it reads its own.
    for source in SOURCES:
        cache = interop["ours_base"] / variant / source["name"]
        manifest = cache_reference.read_manifest(cache)
        assert manifest["record_checksums"]["file"] == "records.crc32c", manifest
        assert (cache / "records.crc32c").stat().st_size == 4 * len(source["samples"])
    for reads, what in (
        (interop["peer_reads_ours"][variant], "unvalidated"),
        (interop["peer_reads_ours_validated"][variant], "validate_cache=True"),
    ):
        for part in ("shared", "other"):
            assert "error" not in reads[part], (
                f"dataset-rt 0.2.4 ({what}) refuses our {variant} cache: {reads[part]['error']}"
            )
        assert_read_matches(reads["shared"], SOURCES, SHARED, f"our {variant} cache, {what}")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_peer_validates_a_cache_written_here_as_it_validates_its_own(
    interop: dict[str, Any], variant: str
) -> None:
    ours = interop["peer_reads_ours_validated"][variant]
    own = interop["peer_reads_peer_validated"][variant]
    for part in ("shared", "other"):
        assert "error" not in own[part], (
            f"dataset-rt 0.2.4 rejects its own {variant} cache: {own[part]['error']}"
        )
        assert "error" not in ours[part], (
            f"dataset-rt 0.2.4 with validate_cache=True rejects our {variant} cache: "
            f"{ours[part]['error']}"
        )
        assert ours[part] == own[part]


def test_arbitrary_floats_written_by_the_peer_read_here_bit_for_bit(
    interop: dict[str, Any],
) -> None:
    result = read_here([interop["peer_base"] / "floats" / "floats"], validate_cache=True)
    assert_read_matches(
        result, FLOAT_SOURCES, ["floats"], "peer float cache read here (validate_cache=True)"
    )


def test_arbitrary_floats_written_here_read_in_the_peer_as_its_own_and_exactly_in_its_table(
    interop: dict[str, Any],
) -> None:
    cache = interop["ours_base"] / "floats" / "floats"
    samples = FLOAT_SOURCES[0]["samples"]
    check_cache_files(cache, samples, {"algo": "none", "ratio": 1.0, "max_shard_bytes": None})
    check_embedded_json(cache, samples, "none")
    ours = interop["peer_reads_ours"]["floats"]
    own = interop["peer_reads_peer"]["floats"]
    assert "error" not in ours, f"dataset-rt 0.2.4 cannot read our float cache: {ours['error']}"
    # dataset-rt's iteration parses the embedded JSON (not correctly rounded): as for its own cache
    assert ours["samples"] == own["samples"], first_difference(ours["samples"], own["samples"])
    # its table comes from metadata.arrow: exact
    table = expected_table(FLOAT_SOURCES, ["floats"])
    assert ours["table"] == table, "dataset-rt 0.2.4 reads different floats from our metadata.arrow"
    payloads = [s[2] for s in ours["samples"]]
    assert payloads == [peer_driver.encode_bytes(d) for d, _ in samples]


def test_the_peer_quickstart_cache_with_a_sample_id_column_reads_here(
    interop: dict[str, Any],
) -> None:
    """The peer's README stores a metadata column named like the identity column 'sample_id'."""
    cache = interop["peer_base"] / "quickstart" / "train_images"
    runtime = DatasetRuntime(num_workers=2)
    dataset = runtime.cached_dataset(
        [cache], reader_config=ReaderConfig(seed=0, shuffle=False, validate_cache=True)
    )
    samples = QUICKSTART_SOURCES[0]["samples"]
    got = [(s.data, dict(s.metadata), s.cache_id, s.sample_id) for s in dataset]
    assert got == [(data, metadata, 0, i) for i, (data, metadata) in enumerate(samples)]
    # samples_metadata must work or fail with a clear ValueError, never a panic from the IPC reader
    try:
        dataset.samples_metadata()
    except ValueError as error:
        assert "sample_id" in str(error), f"unclear error for a stored 'sample_id' column: {error}"
    except BaseException as error:  # noqa: BLE001 - pyo3's PanicException derives from BaseException
        pytest.fail(
            f"samples_metadata() on a cache with a stored 'sample_id' column raised "
            f"{type(error).__module__}.{type(error).__name__}: {str(error)[:300]}"
        )


# --- the user script on both implementations ----------------------------------------------------


@pytest.fixture(scope="module")
def user_script_runs(peer_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("user_script")
    (root / "peer").mkdir()
    (root / "ours").mkdir()
    peer_out = run_peer(
        peer_python,
        [{"op": "user_script", "workdir": str(root / "peer")}, {"op": "environment"}],
        root / "peer-driver",
    )
    ours_out = run_ours_subprocess(
        [{"op": "user_script", "workdir": str(root / "ours")}, {"op": "environment"}],
        root / "ours-driver",
    )
    assert peer_out[1]["distribution_version"] == PEER_VERSION, peer_out[1]
    assert Path(ours_out[1]["file"]).resolve() == Path(dataset_rt.__file__).resolve(), ours_out[1]
    return {"peer": peer_out[0], "ours": ours_out[0]}


SEPARATELY_COMPARED = {"extensions", "result_paths", "invalid_name_label"}


def test_a_user_script_written_for_the_peer_gives_the_same_results_here(
    user_script_runs: dict[str, Any],
) -> None:
    peer, ours = user_script_runs["peer"], user_script_runs["ours"]
    assert set(peer) == set(ours)
    differences = {
        key: {"dataset-rt 0.2.4": peer[key], "DatasetRT": ours[key]}
        for key in sorted(peer)
        if key not in SEPARATELY_COMPARED and peer[key] != ours[key]
    }
    assert not differences, (
        "the user script observed differences:\n" + json.dumps(differences, indent=1)[:6000]
    )
    # and the script saw what a dataset-rt user expects, not just the same thing twice
    assert all(all(flags) for flags in ours["public_names"].values()), ours["public_names"]
    assert ours["api_same_objects"] is True
    assert ours["quickstart_iterations"] == 1 and ours["reuse"][1] == 1, (
        "a reused cache's source was iterated"
    )
    assert ours["write_cache"] == [
        "CacheWriteSuccess",
        "CacheWriteError",
        "CacheWriteError",
        "CacheWriteError",
    ]
    assert ours["write_cache_errors"] == [["broken", False, True], ["train_images", True, False]]
    assert ours["errors"]["num_workers"] == "num_workers must be greater than zero"
    assert ours["errors"]["no_sources"] == [[], "no cache sources were provided"]


def test_result_paths_are_the_base_dir_as_given_joined_with_the_source_name(
    user_script_runs: dict[str, Any],
) -> None:
    """dataset-rt returns ``CacheWriteSuccess.path == base_cache_dir / name`` as the caller spelled
    base_cache_dir (the quickstart passes the relative ``Path("cache")``)."""
    peer, ours = user_script_runs["peer"], user_script_runs["ours"]
    assert peer["result_paths"] == ["cache/train_images", "cache/train_images", "cache/extra"]
    assert ours["result_paths"] == peer["result_paths"]


def test_the_error_for_a_source_name_that_is_not_a_plain_segment_is_labelled_like_the_peer(
    user_script_runs: dict[str, Any],
) -> None:
    peer, ours = user_script_runs["peer"], user_script_runs["ours"]
    assert peer["invalid_name_label"][0] == "CacheWriteError"
    assert ours["invalid_name_label"] == peer["invalid_name_label"]


def test_the_extensions_run_only_here_and_behave_as_specified(
    user_script_runs: dict[str, Any],
) -> None:
    assert (
        user_script_runs["peer"]["extensions"] == {}
    )  # 0.2.4 has none of them: the script skipped them
    assert user_script_runs["ours"]["extensions"] == {
        "get_equals_samples_metadata": True,
        "after_update": [[0, 0], [0, 1], [1, 0], [1, 3]],
        "extra_column_kept": True,
        "epoch_len": [3, [[0, 0], [0, 1], [1, 0]]],
    }


# --- the fixture's own decisions ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "network"),
    [
        (
            "WARNING: Retrying (Retry(total=0)) after connection broken by "
            "'NewConnectionError(': Failed to "
            "establish a new connection: [Errno 111] Connection refused')': /simple/dataset-rt/\n"
            "ERROR: Could not find a version that satisfies the requirement dataset-rt==0.2.4 "
            "(from versions: none)",
            True,
        ),
        (
            "ERROR: Could not fetch URL https://pypi.org/simple/dataset-rt/: "
            "There was a problem confirming",
            True,
        ),
        ("[Errno -3] Temporary failure in name resolution", True),
        (
            "ERROR: Could not find a version that satisfies the requirement dataset-rt==0.2.4 "
            "(from versions: none)",
            False,
        ),
        (
            "ERROR: Could not install packages due to an OSError: "
            "[Errno 28] No space left on device",
            False,
        ),
        ("error: subprocess-exited-with-error", False),
    ],
)
def test_only_an_unreachable_index_makes_the_peer_tests_skip(output: str, network: bool) -> None:
    assert pip_could_not_reach_index(output) is network


def test_the_peer_environment_location_follows_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(VENV_ENV_VAR, "/some/where/peer")
    assert default_venv_dir() == Path("/some/where/peer")
    monkeypatch.delenv(VENV_ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert default_venv_dir() == Path("/xdg/dataset_rt_tests/peer-0.2.4")
