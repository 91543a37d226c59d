"""Suite-wide settings and the one Ray cluster the suite shares.

No test may reach the network. Every test that needs Ray uses `ray_nodes`: a real two-node cluster
(a head with the dashboard, which serves the Jobs API, and a worker, one CPU each, in different
regions, the worker preemptible: see HEAD_LABELS and WORKER_LABELS in ray_nodes.py) started with
`ray start` once per session and killed by pid at the end; RAY_ADDRESS points at it while it lives,
so zephyr's and fray's Ray backends connect to it like they would to any cluster.
"""

import os
import tempfile

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

# The tiers and the default tier's time limit (tests/tiers.py), the order and groups under pytest-xdist
# (tests/scheduling.py), the check that nothing outlives the suite (tests/leftovers.py); pytester
# tests them.
pytest_plugins = ["tiers", "scheduling", "leftovers", "pytester"]

# Hypothesis keeps no example database and no caches in the checkout (the suite writes nothing into the
# tree), and times no example: a deadline is a timing, and on a loaded machine a flaky one.
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), f"marin-tests-hypothesis-{os.getuid()}"))
settings.register_profile("suite", database=None, deadline=None)
settings.load_profile("suite")

# Hugging Face libraries must never download anything during the tests.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # once, before any pytest-xdist worker starts
        # Every Ray node and client of the suite reads this one file; two workers must not race to make it.
        from ray_nodes import ensure_auth_token

        ensure_auth_token()


# Steps run where users' steps run: on the product default, fray's LocalCluster (warm worker
# processes), unless a test picks a cluster. Set MARIN_CLUSTER=thread to debug in one process.


@pytest.fixture(scope="session")
def ray_nodes(tmp_path_factory):
    """A running head + worker node; RAY_ADDRESS points at the head while it lives. The nodes' `python`
    on PATH is a decoy that fails (see ray_nodes.decoy_python_dir): nothing run there may rely on it."""
    import ray
    from ray_nodes import HEAD_LABELS, WORKER_LABELS, LocalRayCluster, decoy_python_dir

    if ray.is_initialized():
        ray.shutdown()
    saved = {name: os.environ.get(name) for name in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    decoy = decoy_python_dir(str(tmp_path_factory.mktemp("decoy-bin")))
    nodes = LocalRayCluster(
        workers=1,
        cpus_per_node=1,
        dashboard=True,
        head_labels=HEAD_LABELS,
        worker_labels=WORKER_LABELS,
        path=os.pathsep.join([decoy, os.environ.get("PATH", "")]),
    ).start()
    os.environ["RAY_ADDRESS"] = nodes.address
    try:
        yield nodes
    finally:
        if ray.is_initialized():
            ray.shutdown()
        nodes.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
