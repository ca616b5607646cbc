"""The measurement processes of `training.py`: one epoch of a DatasetRT cache through a
torch DataLoader (or `for s in ds`, or torch's own ceiling), timed in a fresh process.

`training.py child PHASE ...` runs `main` here (phases: write, read, decode-cost); each
prints one JSON object on its last stdout line. The clock, the epoch loop and the collate of
dicts are shared with the peers' script (`training_peers.py`). Imports of `dataset_rt`,
torch and Pillow are in the functions that need them: the peers' venvs have no `dataset_rt`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import workload  # this directory's measurement helpers (payloads, warm_page_cache)
from children import Json

if TYPE_CHECKING:
    import torch
    import torch.utils.data

    import dataset_rt

BATCH_SIZE = 64
RUNTIME_THREADS = 2
PNG_SEED = 20240601


class Payload(Protocol):
    """What a collate or a transform reads of a sample: its payload."""

    @property
    def data(self) -> bytes | memoryview: ...


# --------------------------------------------------------------------------- child: shared


def collate_payloads(batch: Sequence[Payload]) -> list[bytes | memoryview]:
    """A cheap, realistic collate for DatasetRT samples: the batch's payloads."""
    return [sample.data for sample in batch]


def collate_dicts(batch: Sequence[Mapping[str, Any]]) -> list[bytes]:
    """The same for the peers' samples (dicts). LitData hands out payloads as
    memoryviews of its chunk (which a worker cannot send): `bytes` copies them
    once, as DatasetRT's samples are; MosaicML's are bytes already (no copy)."""
    return [bytes(sample["data"]) for sample in batch]


def decode_png(sample: Payload) -> torch.Tensor:  # (H, W, 3) uint8
    """The decode-bound transform: Pillow decode, then a uint8 tensor (one copy
    into a writable buffer, which `torch.frombuffer` asks for)."""
    import torch
    from PIL import Image

    image = Image.open(io.BytesIO(sample.data)).convert("RGB")
    width, height = image.size
    return torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8).view(height, width, 3)


def busy_cpu_seconds() -> float:
    """CPU time the whole machine has spent busy (all cores), from /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    busy = sum(fields[:8]) - idle  # guest time is already in user
    return busy / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> tuple[float, float]:
    """(this process, its reaped children): user + system CPU seconds."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


class ChildClock:
    """Wall time, own CPU, the machine's other CPU and the hypervisor's steal
    over one timed epoch."""

    def start(self) -> None:
        self.load = os.getloadavg()[0]
        self.ticks = workload.machine_ticks()
        self.busy = busy_cpu_seconds()
        self.cpu = own_cpu_seconds()
        self.wall = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.wall

    def finish(self, seconds: float) -> Json:
        """After the loader's workers have been reaped."""
        main_cpu = own_cpu_seconds()[0] - self.cpu[0]
        workers_cpu = own_cpu_seconds()[1] - self.cpu[1]
        other = busy_cpu_seconds() - self.busy - main_cpu - workers_cpu
        return {
            "load_at_start": self.load,
            "steal_fraction": workload.steal_fraction(self.ticks, workload.machine_ticks()),
            "main_cpu_seconds": main_cpu,
            "workers_cpu_seconds": workers_cpu,
            "other_cpu_cores": max(0.0, other) / seconds if seconds > 0 else 0.0,
        }


def run_epoch(loader: Iterable[Sized], clock: ChildClock) -> Json:
    """Time one epoch of `loader` (an iterable of batches): first batch apart."""
    clock.start()
    iterator = iter(loader)
    first = next(iterator)
    first_seconds = clock.elapsed()
    first_samples = samples = len(first)
    for batch in iterator:
        samples += len(batch)
    seconds = clock.elapsed()
    del iterator, first  # non-persistent workers are joined once the epoch ends
    rest = seconds - first_seconds
    return {
        "seconds": seconds,
        "samples": samples,
        "first_batch_seconds": first_seconds,
        "steady_sps": (samples - first_samples) / rest if rest > 0 else 0.0,
        **clock.finish(seconds),
    }


def run_direct(dataset: Iterable[Payload], clock: ChildClock) -> Json:
    """Time one epoch of ``for s in ds`` (touching each payload), first sample apart."""
    clock.start()
    iterator = iter(dataset)
    first = next(iterator)
    first_seconds = clock.elapsed()
    samples, payload_bytes = 1, len(first.data)
    for sample in iterator:
        payload_bytes += len(sample.data)
        samples += 1
    seconds = clock.elapsed()
    rest = seconds - first_seconds
    return {
        "seconds": seconds,
        "samples": samples,
        "first_batch_seconds": first_seconds,
        "steady_sps": (samples - 1) / rest if rest > 0 else 0.0,
        "payload_bytes": payload_bytes,
        **clock.finish(seconds),
    }


def finish_child(result: Json) -> None:
    """Peak RSS of this process and its largest worker, then the JSON line."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result.update(
        {
            "peak_rss_kib": workload.peak_rss_kib(),
            "workers_peak_rss_kib": children // 1024 if sys.platform == "darwin" else children,
            "python": sys.version.split()[0],
        }
    )
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------- child: ours


def png_bytes(side: int, seed: int) -> bytes:
    """A photo-like RGB PNG: a smooth random field (a grid of side/8 random
    colours, upscaled bicubic) blended with Gaussian noise, so it neither
    compresses to nothing nor is pure noise (which PNG stores nearly raw and
    Pillow decodes at close to copy speed)."""
    import random

    from PIL import Image

    rng = random.Random(PNG_SEED + seed)
    cells = max(2, side // 8)
    field = Image.frombytes("RGB", (cells, cells), rng.randbytes(cells * cells * 3))
    field = field.resize((side, side), Image.Resampling.BICUBIC)
    noise = Image.merge("RGB", [Image.effect_noise((side, side), 24) for _ in range(3)])
    buffer = io.BytesIO()
    Image.blend(field, noise, 0.25).save(buffer, format="PNG")
    return buffer.getvalue()


def child_write(args: argparse.Namespace) -> Json:
    import dataset_rt

    if args.kind == "w1":
        payloads = workload.make_payloads(1024, "mixed")
    else:
        payloads = [png_bytes(args.side, seed) for seed in range(min(args.pool, args.count))]
    source = workload.SyntheticSource(args.kind, args.count, payloads, dataset_rt.CacheInput)
    runtime = dataset_rt.DatasetRuntime(num_workers=RUNTIME_THREADS)
    config = dataset_rt.WriterConfig(show_progress=False)
    start = time.perf_counter()
    results = runtime.write_cache([source], Path(args.base_dir), writer_config=config)
    seconds = time.perf_counter() - start
    if len(results) != 1 or not isinstance(results[0], dataset_rt.CacheWriteSuccess):
        raise SystemExit(f"write failed: {results!r}")
    path = Path(results[0].path)
    return {
        "seconds": seconds,
        "samples": args.count,
        "payload_bytes_mean": sum(len(p) for p in payloads) / len(payloads),
        "bytes_on_disk": workload.dir_bytes(path),
        "cache_path": str(path),
        "version": dataset_rt.__version__,
    }


def child_read(args: argparse.Namespace) -> Json:
    if args.mode == "ceiling":
        return child_ceiling(args)
    import dataset_rt

    warm_seconds = workload.warm_page_cache(Path(args.cache))
    start = time.perf_counter()
    runtime = dataset_rt.DatasetRuntime(num_workers=RUNTIME_THREADS)
    dataset = runtime.cached_dataset([args.cache], reader_config=dataset_rt.ReaderConfig(seed=0))
    open_seconds = time.perf_counter() - start
    expected = len(dataset)
    clock = ChildClock()
    if args.mode == "direct":
        result = run_direct(dataset, clock)
    else:
        start = time.perf_counter()
        loader = make_loader(dataset, args.mode, args.workers)
        loader_seconds = time.perf_counter() - start  # torch imported here
        result = {**run_epoch(loader, clock), "loader_build_seconds": loader_seconds}
    if result["samples"] != expected:
        raise SystemExit(f"read {result['samples']} samples, expected {expected}")
    return {**result, "open_seconds": open_seconds, "warm_seconds": warm_seconds}


class PlainSample:
    """What the ceiling row's workers yield: a payload, as a CachedSample has."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def ceiling_loader(count: int, workers: int) -> torch.utils.data.DataLoader[PlainSample]:
    """torch's own DataLoader ceiling for W1: an IterableDataset that reads
    nothing and yields a fresh copy of a 1 KiB payload per sample, batch k from
    worker k % W (DatasetRT's layout), with the same collate."""
    import torch.utils.data

    payloads = workload.make_payloads(1024, "mixed")

    class Payloads(torch.utils.data.IterableDataset[PlainSample]):
        def __iter__(self) -> Iterator[PlainSample]:
            info = torch.utils.data.get_worker_info()
            worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
            for batch in range(worker, -(-count // BATCH_SIZE), workers):
                for index in range(batch * BATCH_SIZE, min(count, (batch + 1) * BATCH_SIZE)):
                    yield PlainSample(bytes(memoryview(payloads[index % len(payloads)])))

    return torch.utils.data.DataLoader(
        Payloads(), batch_size=BATCH_SIZE, num_workers=workers, collate_fn=collate_payloads
    )


def child_ceiling(args: argparse.Namespace) -> Json:
    start = time.perf_counter()
    loader = ceiling_loader(args.count, args.workers)
    loader_seconds = time.perf_counter() - start
    result = run_epoch(loader, ChildClock())
    if result["samples"] != args.count:
        raise SystemExit(f"yielded {result['samples']} samples, expected {args.count}")
    return {**result, "loader_build_seconds": loader_seconds}


def make_loader(dataset: dataset_rt.CachedDataset, mode: str, workers: int) -> Iterable[Sized]:
    if mode == "loader":
        from dataset_rt.torch import DataLoader

        return DataLoader(
            dataset, batch_size=BATCH_SIZE, num_workers=workers, collate_fn=collate_payloads
        )
    import torch.utils.data

    # A plain torch DataLoader: told the adapter's batch size through attach_loader.
    adapter = dataset.to_torch_iterable_dataset(transform=decode_png, batch_size=BATCH_SIZE)
    loader = torch.utils.data.DataLoader(adapter, batch_size=BATCH_SIZE, num_workers=workers)
    adapter.attach_loader(loader)
    return loader


def child_decode_cost(args: argparse.Namespace) -> Json:
    """Milliseconds per `decode_png` on a pool of 200 PNGs, after one warm-up pass."""

    class Sample:
        def __init__(self, data: bytes) -> None:
            self.data = data

    samples = [Sample(png_bytes(args.side, seed)) for seed in range(200)]
    for sample in samples:
        decode_png(sample)
    passes = 5
    start = time.perf_counter()
    for _ in range(passes):
        for sample in samples:
            decode_png(sample)
    seconds = time.perf_counter() - start
    return {"decode_ms": seconds / (passes * len(samples)) * 1000}


def main(argv: list[str]) -> None:
    """`training.py child PHASE ...`: one measurement, its JSON on the last stdout line."""
    parser = argparse.ArgumentParser(prog="training.py child")
    parser.add_argument("phase", choices=["write", "read", "decode-cost"])
    parser.add_argument("--kind", choices=["w1", "png"], default="w1")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--side", type=int, default=96)
    parser.add_argument("--pool", type=int, default=2000)
    parser.add_argument("--base-dir")
    parser.add_argument("--cache")
    parser.add_argument(
        "--mode", choices=["direct", "loader", "decode", "ceiling"], default="loader"
    )
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args(argv)
    phases = {"write": child_write, "read": child_read, "decode-cost": child_decode_cost}
    result = phases[args.phase](args)
    result["phase"] = args.phase
    finish_child(result)
