"""The measurements of `run.py`'s main stage, one workload at a time, and their figures.

A read-write workload (`run_rw`) gets, per repeat and side, a write, an ordered read right
after it, a read per mode of `READ_MODES`, a read with polars imported first, and on W1 the
Python floor and on W2 the copy and disk ceilings. A scale workload (`run_scale`) gets a
write and an open/metadata process. `summarize` turns a workload's figures into the rows of
the report, each against its target.
"""

from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from children import Json
from run_plan import (
    FIGURES,
    FLOOR_WORKLOADS,
    MB,
    READ_MODES,
    READ_PASSES,
    SAME_FOR_BOTH,
    TARGETS,
    Spec,
    spec_dict,
)
from run_sides import SIDES, Runner, log, steal_note, write_child


class Figures(dict[str, dict[str, list[float]]]):
    """Figure name -> side -> one value per repeat, in the order figures are put."""

    def put(self, figure: str, side: str, value: float) -> None:
        self.setdefault(figure, {"ours": [], "peer": []})[side].append(value)


@dataclass
class RwRaw:
    """Every measurement of a read-write workload, as the report stores them: per side one
    sample (write and reads) per repeat, and the machine's own figures per repeat."""

    samples: dict[str, list[Json]] = field(default_factory=lambda: {side: [] for side in SIDES})
    ceilings: list[Json] = field(default_factory=list)
    disk_ceilings: list[Json] = field(default_factory=list)
    floors: list[Json] = field(default_factory=list)


@dataclass(frozen=True)
class Repeat:
    """One repeat of one workload: where its caches go, and how its progress lines start."""

    name: str
    spec: Spec
    passes: int
    base: Path
    tag: str  # "W1 r1/4"
    order: tuple[str, ...]  # the sides, the first to write first


def repeats_of(name: str, spec: Spec, repeats: int, work: Path) -> list[Repeat]:
    """The repeats of a workload: the side that goes first swaps every repeat."""
    return [
        Repeat(
            name,
            spec,
            READ_PASSES.get(name, 1),
            work / name / f"r{repeat}",
            f"{name} r{repeat + 1}/{repeats}",
            SIDES if repeat % 2 == 0 else SIDES[::-1],
        )
        for repeat in range(repeats)
    ]


# --------------------------------------------------------------------------- read-write


def run_rw(runner: Runner, name: str, spec: Spec, repeats: int, work: Path) -> Json:
    """Every repeat of a read-write workload, then its figures."""
    raw = RwRaw()
    for repeat in repeats_of(name, spec, repeats, work):
        shutil.rmtree(repeat.base, ignore_errors=True)
        sample = {side: write_then_read(runner, repeat, side) for side in repeat.order}
        read_every_mode(runner, repeat, sample, raw)
        read_with_polars(runner, repeat, sample)
        if name == "W2":
            measure_ceilings(runner, repeat, raw)
        for side in SIDES:
            raw.samples[side].append(sample[side])
        shutil.rmtree(repeat.base, ignore_errors=True)
    figures = rw_figures(raw.samples, spec)
    add_machine_figures(figures, raw, spec)
    return {
        "spec": spec_dict(spec),
        "figures": figures,
        "cpu_seconds": rw_cpu_seconds(raw.samples),
        "extra": {
            "generator_seconds": {
                side: [s["write"]["generator_seconds"] for s in raw.samples[side]] for side in SIDES
            }
        },
        "raw": raw.samples,
        "ceilings": raw.ceilings,
        "disk_ceilings": raw.disk_ceilings,
        "floors": raw.floors,
    }


def write_then_read(runner: Runner, repeat: Repeat, side: str) -> Json:
    """`side`'s write, then its first ordered read right after: a sample of the repeat."""
    count = repeat.spec.samples
    write = write_child(runner, side, repeat.spec, repeat.base / side)
    log(
        f"{repeat.tag} {side:4} write: {write['seconds']:.3f}s "
        f"({count / write['seconds']:,.0f} samples/s, "
        f"peak {write['peak_rss_kib'] / 1024:.0f} MiB)"
    )
    # The first epoch right after the write, as a job that writes its caches
    # and then trains reads it: nothing read in between.
    after = runner.child(
        side,
        "read",
        "--cache", write["cache_path"],
        "--mode", "ordered",
        "--as-written",
    )  # fmt: skip
    after_mbps = after["payload_bytes"] / after["seconds"] / MB
    log(
        f"{repeat.tag} {side:4} ordered right after the write: "
        f"{after['seconds']:.3f}s ({after_mbps:,.0f} MB/s)"
    )
    return {
        "write": write,
        "reads": {},
        "read_after_write": after,
        "wrote_first": side == repeat.order[0],
    }


def read_every_mode(runner: Runner, repeat: Repeat, sample: dict[str, Json], raw: RwRaw) -> None:
    """Each side's read per mode of READ_MODES; on FLOOR_WORKLOADS the Python floor after
    the ordered reads."""
    count, size = repeat.spec.samples, repeat.spec.payload_bytes
    for mode in READ_MODES:
        for side in repeat.order:
            read = runner.child(
                side,
                "read",
                "--cache", sample[side]["write"]["cache_path"],
                "--mode", mode,
                "--passes", str(repeat.passes),
            )  # fmt: skip
            if read["payload_bytes"] != count * size and mode != "shuffled":
                raise SystemExit(
                    f"{side} {mode}: read {read['payload_bytes']} bytes, expected {count * size}"
                )
            log(
                f"{repeat.tag} {side:4} {mode}: {read['seconds']:.3f}s "
                f"({read['samples'] / read['seconds']:,.0f} samples/s, "
                f"peak {read['peak_rss_kib'] / 1024:.0f} MiB{steal_note(read)})"
            )
            sample[side]["reads"][mode] = read
        if mode == "ordered" and repeat.name in FLOOR_WORKLOADS:
            # The per-sample Python floor, between the two sides' ordered reads
            # of the same repeat (target: a fraction of it, TARGETS).
            passes = str(repeat.passes)
            raw.floors.append(
                runner.child("ours", "floor", "--count", str(count), "--passes", passes)
            )
            log(
                f"{repeat.tag} Python floor: "
                f"{count / raw.floors[-1]['seconds']:,.0f} samples/s{steal_note(raw.floors[-1])}"
            )


def read_with_polars(runner: Runner, repeat: Repeat, sample: dict[str, Json]) -> None:
    """Each side's ordered read with polars imported first."""
    # A script that uses the metadata table has polars imported when it reads
    # (the peer imports it with dataset_rt, ours only when a table is asked for).
    for side in repeat.order:
        sample[side]["read_polars"] = runner.child(
            side,
            "read",
            "--cache", sample[side]["write"]["cache_path"],
            "--mode", "ordered",
            "--passes", str(repeat.passes),
            "--import-polars",
        )  # fmt: skip
        log(
            f"{repeat.tag} {side:4} ordered, polars imported first: "
            f"peak {sample[side]['read_polars']['peak_rss_kib'] / 1024:.0f} MiB"
        )


def measure_ceilings(runner: Runner, repeat: Repeat, raw: RwRaw) -> None:
    """This machine's copy ceiling and this disk's durable-write ceiling for the workload."""
    count, size, _compression, kind, _ = repeat.spec
    ceiling = runner.child(
        "ours",
        "ceiling",
        "--count",
        str(count),
        "--size",
        str(size),
        "--payload-kind",
        kind,
        "--passes",
        str(repeat.passes),
    )
    log(f"{repeat.tag} copy ceiling: {count * size / ceiling['seconds'] / MB:,.0f} MB/s")
    raw.ceilings.append(ceiling)
    disk = runner.child(
        "ours",
        "disk_ceiling",
        "--count", str(count),
        "--size", str(size),
        "--payload-kind", kind,
        "--base-dir", str(repeat.base / "disk_ceiling"),
    )  # fmt: skip
    log(
        f"{repeat.tag} disk ceiling (written and fsynced): "
        f"{count * size / disk['seconds'] / MB:,.0f} MB/s"
    )
    raw.disk_ceilings.append(disk)


def rw_figures(raw: dict[str, list[Json]], spec: Spec) -> Figures:
    """The figures of each side's samples, one value per repeat."""
    count, size = spec.samples, spec.payload_bytes
    figures = Figures()
    put = figures.put
    for side in SIDES:
        for sample in raw[side]:
            write = sample["write"]
            reads = sample["reads"]
            put("write_sps", side, count / write["seconds"])
            put("write_mbps", side, count * size / write["seconds"] / MB)
            put("write_durable_sps", side, count / (write["seconds"] + write["flush_seconds"]))
            for mode in READ_MODES:
                read = reads[mode]
                put(f"read_{mode}_sps", side, read["samples"] / read["seconds"])
                put(f"read_{mode}_mbps", side, read["payload_bytes"] / read["seconds"] / MB)
            put(
                "open_s",
                side,
                statistics.median(reads[mode]["open_seconds"] for mode in READ_MODES),
            )
            put("first_sample_s", side, reads["ordered"]["first_sample_seconds"])
            after = sample["read_after_write"]
            put("read_after_write_mbps", side, after["payload_bytes"] / after["seconds"] / MB)
            put("peak_rss_write_mib", side, write["peak_rss_kib"] / 1024)
            put(
                "peak_rss_read_mib",
                side,
                max(reads[mode]["peak_rss_kib"] for mode in READ_MODES) / 1024,
            )
            put("peak_rss_read_polars_mib", side, sample["read_polars"]["peak_rss_kib"] / 1024)
            put("disk_bytes", side, write["bytes_on_disk"])
    figures.pop("read_ordered_meta_mbps", None)
    return figures


def rw_cpu_seconds(raw: dict[str, list[Json]]) -> dict[str, dict[str, list[float]]]:
    """CPU seconds of the write and of each mode's read: phase -> side -> per repeat."""
    cpu = {"write": {side: [s["write"]["cpu_seconds"] for s in raw[side]] for side in SIDES}}
    for mode in READ_MODES:
        cpu[f"read_{mode}"] = {
            side: [s["reads"][mode]["cpu_seconds"] for s in raw[side]] for side in SIDES
        }
    return cpu


def add_machine_figures(figures: Figures, raw: RwRaw, spec: Spec) -> None:
    """The figures of the copy ceiling, the Python floor and the disk ceiling (the same for
    both sides), and each side's reads and write against them."""
    count, size = spec.samples, spec.payload_bytes
    if raw.ceilings:
        values = [c["payload_bytes"] / c["seconds"] / MB for c in raw.ceilings]
        figures["copy_ceiling_mbps"] = {"ours": values, "peer": values}
        ceiling = statistics.median(values)
        for mode in ("ordered", "shuffled"):
            figures[f"read_{mode}_ceiling_frac"] = {
                side: [statistics.median(figures[f"read_{mode}_mbps"][side]) / ceiling]
                for side in SIDES
            }
    if raw.floors:
        values = [count / f["seconds"] for f in raw.floors]
        figures["python_floor_sps"] = {"ours": values, "peer": values}
        # Per repeat: the ordered read against the floor measured beside it.
        figures["read_ordered_floor_frac"] = {
            side: [
                read / floor
                for read, floor in zip(figures["read_ordered_sps"][side], values, strict=True)
            ]
            for side in SIDES
        }
    if raw.disk_ceilings:
        values = [d["payload_bytes"] / d["seconds"] / MB for d in raw.disk_ceilings]
        figures["disk_ceiling_mbps"] = {"ours": values, "peer": values}
        disk_ceiling = statistics.median(values)
        figures["write_disk_ceiling_frac"] = {
            side: [statistics.median(figures["write_mbps"][side]) / disk_ceiling] for side in SIDES
        }
        # This project publishes only once every file is fsynced (SPEC), so its
        # write cannot beat the disk; the peer does not fsync. The ratio of this
        # row is the highest write ratio the disk allows in this run.
        figures["write_bound_sps"] = {
            "ours": [d["payload_bytes"] / size / d["seconds"] for d in raw.disk_ceilings],
            "peer": list(figures["write_sps"]["peer"]),
        }


# --------------------------------------------------------------------------- scale


def run_scale(runner: Runner, name: str, spec: Spec, repeats: int, work: Path) -> Json:
    """Every repeat of a scale workload (write, then open and metadata), then its figures."""
    count = spec.samples
    raw: dict[str, list[Json]] = {side: [] for side in SIDES}
    for repeat in repeats_of(name, spec, repeats, work):
        shutil.rmtree(repeat.base, ignore_errors=True)
        sample: dict[str, Json] = {}
        for side in repeat.order:
            write = write_child(runner, side, spec, repeat.base / side)
            log(f"{repeat.tag} {side:4} write: {write['seconds']:.3f}s")
            sample[side] = {"write": write, "wrote_first": side == repeat.order[0]}
        for side in repeat.order:
            scale = runner.child(
                side, "scale", "--cache", sample[side]["write"]["cache_path"], "--count", str(count)
            )
            log(
                f"{repeat.tag} {side:4} open {scale['open_seconds']:.3f}s, "
                f"get_metadata {scale['get_metadata_seconds']:.3f}s, "
                f"update {scale['update_metadata_seconds']:.3f}s, "
                f"first sample {scale['first_sample_seconds']:.4f}s"
            )
            sample[side]["scale"] = scale
        for side in SIDES:
            raw[side].append(sample[side])
        shutil.rmtree(repeat.base, ignore_errors=True)
    return {"spec": spec_dict(spec), "figures": scale_figures(raw, count), "raw": raw}


def scale_figures(raw: dict[str, list[Json]], count: int) -> Figures:
    """The figures of each side's scale samples, one value per repeat."""
    figures = Figures()
    put = figures.put
    for side in SIDES:
        for sample in raw[side]:
            write, scale = sample["write"], sample["scale"]
            put("write_sps", side, count / write["seconds"])
            put("write_durable_sps", side, count / (write["seconds"] + write["flush_seconds"]))
            put("open_s", side, scale["open_seconds"])
            put("get_metadata_s", side, scale["get_metadata_seconds"])
            put("update_metadata_s", side, scale["update_metadata_seconds"])
            put("update_metadata_again_s", side, scale["update_metadata_again_seconds"])
            put("first_sample_after_update_s", side, scale["first_sample_seconds"])
            put("peak_rss_write_mib", side, write["peak_rss_kib"] / 1024)
            put("peak_rss_scale_mib", side, scale["peak_rss_kib"] / 1024)
            put("disk_bytes", side, write["bytes_on_disk"])
    return figures


# --------------------------------------------------------------------------- summary


def summarize(name: str, result: Json) -> list[Json]:
    """The report's rows of one workload: each figure's medians, ratio and target."""
    rows = []
    targets = TARGETS.get(name, {})
    for figure, values in result["figures"].items():
        label, unit, higher = FIGURES[figure]
        ours = statistics.median(values["ours"])
        peer = statistics.median(values["peer"])
        ratio = ours / peer if peer else None
        row: Json = {
            "workload": name,
            "figure": figure,
            "label": label,
            "unit": unit,
            "higher_is_better": higher,
            "ours": ours,
            "peer": peer,
            "ratio": ratio,
            "ours_values": values["ours"],
            "peer_values": values["peer"],
            "target": None,
            "pass": None,
        }
        if figure in SAME_FOR_BOTH:
            row["ratio"] = None
        target = targets.get(figure)
        if target:
            row["target"], row["pass"] = judge(figure, target, ours, ratio)
        rows.append(row)
    return rows


def judge(
    figure: str, target: tuple[str, float], ours: float, ratio: float | None
) -> tuple[str, bool]:
    """A figure's target as the report words it, and whether the run met it."""
    kind, threshold = target
    if kind == "ratio>=":
        return f">= {threshold:g}x", ratio is not None and ratio >= threshold
    if kind == "ratio<=":
        words = "<= peer" if threshold == 1.0 else f"<= {threshold:g}x"
        return words, ratio is not None and ratio <= threshold
    bound = "floor" if figure.endswith("floor_frac") else "ceiling"
    return f">= {threshold:.0%} of {bound}", ours >= threshold
