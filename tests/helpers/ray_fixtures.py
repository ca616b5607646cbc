"""Fixtures of the engine tests (a pytest plugin of tests/conftest.py): a Ray cluster of
two nodes on this machine, one CPU each, started once for the session and stopped at its
end, in a temporary directory of its own."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import pythonpath_before_inherited

TESTS = Path(__file__).resolve().parent.parent
PACKAGE_PARENT = TESTS.parent / "python"


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """A running two-node Ray cluster the test process is connected to; its address.

    Ray's directory is a short one under /tmp (its socket paths must stay under 108
    bytes), given as RAY_TMPDIR, so the cluster never meets another Ray instance of the
    machine. Authentication is what the environment says (RAY_AUTH_MODE and its token):
    Ray reads it when first imported, before this fixture runs, and the nodes started
    here inherit the same environment. The workers import the package, the test helpers
    and the test modules (whose functions Ray pickles by reference) through PYTHONPATH."""
    pytest.importorskip("ray.data", reason="the Ray tests need ray[data] (the ray extra)")
    import ray
    from ray.cluster_utils import Cluster

    directory = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))
    paths = [PACKAGE_PARENT, TESTS, TESTS / "helpers", TESTS / "ray_integration"]
    # The environment changes only while the cluster starts (its processes keep it) and
    # stops (Ray finds its address file under RAY_TMPDIR), not for the other tests.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_TMPDIR", str(directory))
        patch.setenv("PYTHONPATH", pythonpath_before_inherited(*paths))
        cluster = Cluster(shutdown_at_exit=False)
        try:
            cluster.add_node(num_cpus=1, include_dashboard=False)  # the head node
            cluster.add_node(num_cpus=1)
            ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.ERROR)
        except BaseException:
            _stop(cluster, directory)
            raise
    try:
        yield cluster.address
    finally:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("RAY_TMPDIR", str(directory))
            _stop(cluster, directory)


def _stop(cluster: Any, directory: Path) -> None:
    import ray

    ray.shutdown()
    cluster.shutdown()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def ordered_ray_data(ray_cluster: str) -> Iterator[None]:
    """Ray Data keeps the Dataset's order (``preserve_order``) during the test."""
    import ray.data

    options = ray.data.DataContext.get_current().execution_options
    before = options.preserve_order
    options.preserve_order = True
    yield
    options.preserve_order = before
