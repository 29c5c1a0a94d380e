"""Test-suite configuration: markers, and ``tests/`` on ``sys.path`` for the shared factories.

Markers (select with ``-m``, e.g. ``pytest -m "not ray"`` on a machine without the ``real`` extra or
where starting a Ray cluster is unwelcome):

* ``ray``: the test starts a Ray cluster (applied here to every test of :data:`RAY_MODULES`);
* ``slow``: the test takes over ~10 s.

Modules needing torch, torchvision or Ray guard themselves with :func:`pytest.importorskip`, so
without the ``real`` extra they are skipped, not collection errors.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:  # ``from factories import ...`` under any --import-mode
    sys.path.insert(0, str(TESTS_DIR))

#: test modules whose tests run on a Ray cluster the module starts (``ray.init`` or
#: ``ray.cluster_utils.Cluster`` in a module-scoped fixture).
RAY_MODULES = frozenset({"test_real_master.py", "test_real_run.py", "test_study.py", "test_real_cluster.py",
                         "test_sweep_ray.py", "test_allreduce.py", "test_real_multiworker.py",
                         "test_real_cluster_auth.py"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ray: starts a Ray cluster (needs the 'real' extra)")
    config.addinivalue_line("markers", "slow: takes over ~10 s")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in RAY_MODULES and item.get_closest_marker("ray") is None:
            item.add_marker(pytest.mark.ray)


@pytest.fixture(scope="module")
def module_ray():
    """One embedded Ray for the whole test module (the brief: one Ray start per module, not per test):
    ``ray.init(num_cpus=2)`` without the dashboard or driver logs, shut down after the module's last
    test. Yields the ``ray`` module; skips the module when the ``real`` extra is not installed."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()

