"""The ``dataset-rt`` command: look inside caches, check them, export their metadata,
write them from folders and Parquet files, and run the demo and a quick benchmark.

    dataset-rt ls BASE                        the caches in a base folder, and what else is there
    dataset-rt info CACHE...                  what a cache holds (on a base: its caches)
    dataset-rt head CACHE [-n N]              its first samples, with the kind of each payload
    dataset-rt get CACHE SAMPLE_ID [--out FILE]   one payload, as raw bytes
    dataset-rt metadata CACHE... --out FILE   its metadata table (.parquet, .csv, .arrow)
    dataset-rt verify CACHE...                scrub every byte, list every problem
    dataset-rt write folder DIR --out BASE [--name NAME] [--overwrite] [--lz4]
    dataset-rt write parquet FILE... --data-column COL --out BASE [--name NAME] [--overwrite]
    dataset-rt demo                           the end-to-end demo
    dataset-rt bench                          a quick local benchmark

Also ``python -m dataset_rt``. Exit codes: 0 success, 1 a problem found (a bad or
corrupt cache, a failed write), 2 a usage error (a missing path, a bad option or
name), reported before any work. Every command takes ``--help``; those that report
take ``--json``. See docs/cli.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from typer.models import CommandInfo

from dataset_rt.cli import _bench, _listing, _samples, _verify, _write
from dataset_rt.cli._common import app
from dataset_rt.cli._preview import _preview as _preview
from dataset_rt.cli._verify import _problem_line as _problem_line

__all__ = ["app", "main"]

# Importing a module registers its commands on `app`. `dataset-rt --help` lists them
# by module in this order, each module's in the order it defines them (the `write`
# group of _write comes after every command).
_COMMAND_MODULES = [module.__name__ for module in (_listing, _samples, _verify, _write, _bench)]


def _module_rank(command: CommandInfo) -> int:
    return _COMMAND_MODULES.index(getattr(command.callback, "__module__", ""))


app.registered_commands.sort(key=_module_rank)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``dataset-rt`` command with `argv` (default: the process's arguments).

    The entry point of the console script and of ``python -m dataset_rt``; it exits
    the process with the command's exit code (0, 1 or 2).

    >>> main(["info", "caches/train"])  # doctest: +SKIP
    """
    # One name in usage lines, whether run as the console script or as python -m.
    app(args=list(argv) if argv is not None else None, prog_name="dataset-rt")
