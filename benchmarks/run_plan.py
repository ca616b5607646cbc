"""What `run.py` measures: its workloads, their targets and the figures it reports.

The tables here are read by the measurement loops (`run_measure.py`), by the summary
(`run_measure.summarize`) and by `peers.py`; changing one changes the run and its report.
"""

from __future__ import annotations

from typing import NamedTuple

MB = 1e6


class Spec(NamedTuple):
    """One workload: what its cache holds, and which measurements it gets."""

    samples: int
    payload_bytes: int
    compression: str  # "none" | "lz4"
    payload_kind: str  # "mixed" | "random" (workload.make_payloads)
    kind: str  # "rw": write and reads (run_measure.run_rw); "scale": run_measure.run_scale


FULL_SIZES = {
    "W1": Spec(200_000, 1024, "none", "mixed", "rw"),
    "W1-lz4": Spec(200_000, 1024, "lz4", "mixed", "rw"),
    "W2": Spec(512, 1 << 20, "none", "random", "rw"),
    "W3": Spec(1_000_000, 64, "none", "mixed", "scale"),
}
QUICK_SIZES = {
    "W1": Spec(20_000, 1024, "none", "mixed", "rw"),
    "W1-lz4": Spec(20_000, 1024, "lz4", "mixed", "rw"),
    "W2": Spec(64, 1 << 20, "none", "random", "rw"),
    "W3": Spec(100_000, 64, "none", "mixed", "scale"),
}
READ_MODES = ("ordered", "ordered_meta", "shuffled")
# Workloads `--peers` measures every peer library on (uncompressed: the peers
# write without compression).
PEER_WORKLOADS = ("W1", "W2")

# Even: the side that writes first swaps every repeat, and writing second can be
# slower (docs/benchmarks.md, "Large writes are slower a few seconds after
# memory was freed"), so each side must write first as often as the other.
DEFAULT_REPEATS = 4
# Seconds of rest before each write process (full runs). Our W2 write started
# right after the peer's was slow in 3 of 5 tries (0.33-0.46 s against 0.27 s,
# the extra time in the kernel), started 2 s later in 0 of 5 and 4 s later in
# 0 of 4; without the rest the peer's W2 write right after ours was slow in the
# first repeat of 4 of 6 full runs (0.97-1.48 s against 0.58-0.63 s). Each
# write gets a machine the other side's write has finished with.
WRITE_SETTLE_SECONDS = 3.0
# Timed passes per read (and copy-ceiling) process, median reported: W2's passes
# take about 0.1 s, too short for one to be timed reliably on a shared machine,
# and single W1 passes (0.3-0.6 s ours) swung by 2x between repeats. The same
# number for both sides.
READ_PASSES = {"W1": 3, "W1-lz4": 3, "W2": 5}

# Targets: figure -> (kind, threshold). "ratio>=": ours/peer >= x; "ratio<=": ours/peer <= x;
# "frac>=": ours' absolute value >= x (a fraction of the copy ceiling or Python floor).
TARGETS: dict[str, dict[str, tuple[str, float]]] = {
    "W1": {
        "write_sps": ("ratio>=", 4.0),
        "read_ordered_sps": ("ratio>=", 8.0),
        "read_ordered_meta_sps": ("ratio>=", 3.0),
        "read_ordered_floor_frac": ("frac>=", 0.6),
        "read_shuffled_sps": ("ratio>=", 8.0),
        "peak_rss_write_mib": ("ratio<=", 1.0),
        "peak_rss_read_mib": ("ratio<=", 1.0),
        "peak_rss_read_polars_mib": ("ratio<=", 1.0),
    },
    "W2": {
        "write_sps": ("ratio>=", 2.0),
        "read_ordered_sps": ("ratio>=", 1.5),
        "read_shuffled_sps": ("ratio>=", 1.5),
        "read_ordered_ceiling_frac": ("frac>=", 0.5),
        "read_shuffled_ceiling_frac": ("frac>=", 0.5),
        "peak_rss_write_mib": ("ratio<=", 1.0),
        "peak_rss_read_mib": ("ratio<=", 1.0),
        "peak_rss_read_polars_mib": ("ratio<=", 1.0),
    },
    "W3": {
        "open_s": ("ratio<=", 1.0),
        "get_metadata_s": ("ratio<=", 1.0),
        "update_metadata_s": ("ratio<=", 1.0),
        "peak_rss_write_mib": ("ratio<=", 1.0),
        "peak_rss_scale_mib": ("ratio<=", 1.0),
    },
}
TARGETS["W1-lz4"] = TARGETS["W1"]

# Measured once per repeat for both sides (shown as "(same)", no ratio).
SAME_FOR_BOTH = ("copy_ceiling_mbps", "disk_ceiling_mbps", "python_floor_sps")

# Workloads whose ordered read is also measured against the per-sample Python
# floor (floor.py: the binding's objects for 1 KiB payloads, no native work).
FLOOR_WORKLOADS = ("W1",)

# figure -> (label, unit, higher is better)
FIGURES = {
    "write_sps": ("write", "samples/s", True),
    "write_mbps": ("write", "MB/s", True),
    "write_durable_sps": ("write, then fsync every cache file", "samples/s", True),
    "read_ordered_sps": ("ordered read, data only", "samples/s", True),
    "read_ordered_mbps": ("ordered read, data only", "MB/s", True),
    "read_ordered_meta_sps": ('ordered read, data + metadata["label"]', "samples/s", True),
    "read_shuffled_sps": ("shuffled read, data only", "samples/s", True),
    "read_shuffled_mbps": ("shuffled read, data only", "MB/s", True),
    "read_after_write_mbps": ("ordered read right after the write (no warm-up)", "MB/s", True),
    "copy_ceiling_mbps": ("copy ceiling (1 copy per sample)", "MB/s", True),
    "read_ordered_ceiling_frac": ("ordered read / copy ceiling", "fraction", True),
    "read_shuffled_ceiling_frac": ("shuffled read / copy ceiling", "fraction", True),
    "python_floor_sps": (
        "Python floor: the binding's per-sample objects alone (floor.py)",
        "samples/s",
        True,
    ),
    "read_ordered_floor_frac": ("ordered read / Python floor", "fraction", True),
    "disk_ceiling_mbps": (
        "disk ceiling (64 MiB files written and fsynced, no hashing)",
        "MB/s",
        True,
    ),
    "write_disk_ceiling_frac": ("write / disk ceiling (the peer does not fsync)", "fraction", True),
    "write_bound_sps": (
        "disk ceiling (ours column) against the peer's write: the most a durable write reaches",
        "samples/s",
        True,
    ),
    "open_s": ("open (cached_dataset)", "s", False),
    "get_metadata_s": ("get_metadata()", "s", False),
    "update_metadata_s": ("update_metadata(new weights)", "s", False),
    "update_metadata_again_s": ("update_metadata, second call", "s", False),
    "first_sample_s": ("first-sample latency, ordered", "s", False),
    "first_sample_after_update_s": ("first-sample latency, shuffled, after update", "s", False),
    "peak_rss_write_mib": ("peak RSS, write process", "MiB", False),
    "peak_rss_read_mib": ("peak RSS, read processes (max)", "MiB", False),
    "peak_rss_read_polars_mib": ("peak RSS, ordered read, polars imported first", "MiB", False),
    "peak_rss_scale_mib": ("peak RSS, open+metadata process", "MiB", False),
    "disk_bytes": ("bytes on disk", "bytes", False),
}


def spec_dict(spec: Spec) -> dict[str, int | str]:
    """A workload's spec as the report stores it."""
    return {
        "samples": spec.samples,
        "payload_bytes": spec.payload_bytes,
        "compression": spec.compression,
        "payload_kind": spec.payload_kind,
    }


def scaled(sizes: dict[str, Spec], scale: float) -> dict[str, Spec]:
    """`sizes` with every sample count times `scale` (at least 8 samples)."""
    return {
        name: spec._replace(samples=max(8, round(spec.samples * scale)))
        for name, spec in sizes.items()
    }
