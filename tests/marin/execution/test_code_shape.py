"""Shape rules of the engine (issue 27): no function in src/marin/execution is over 60 lines, and the
Cluster interface holds only what every backend implements."""

from __future__ import annotations

import ast
import pathlib

from fray.cluster import Cluster, LocalCluster, ThreadCluster
from fray.cluster.ray_cluster import RayCluster

EXECUTION = pathlib.Path(__file__).parents[3] / "src" / "marin" / "execution"
MAX_LINES = 60


def test_no_function_in_marin_execution_is_over_60_lines():
    long = []
    for path in sorted(EXECUTION.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    assert EXECUTION.is_dir() and not long, long


def test_the_cluster_interface_has_no_method_only_local_cluster_implements():
    public = {name for name in vars(Cluster) if not name.startswith("_")}
    assert public == {"submit", "cancel", "shutdown"}
    for backend in (LocalCluster, RayCluster, ThreadCluster):
        assert all(callable(getattr(backend, name)) for name in public)
    assert all(name in vars(RayCluster) for name in public)  # the remote backend implements each itself
