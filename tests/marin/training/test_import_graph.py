"""The training and post-training packages import each other in one direction only: no module is part
of an import cycle, and nothing below the trainer imports it (callbacks see it as a `TrainerView`).

Every import counts, those under `if TYPE_CHECKING:` and inside functions too: a cycle hidden in a
function is still a cycle of ideas."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src"


def _modules(package: str) -> dict[str, Path]:
    base = SRC.joinpath(*package.split("."))
    out = {}
    for path in base.rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that module `name` (at `path`) imports, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph(*packages: str) -> dict[str, set[str]]:
    modules = {name: path for package in packages for name, path in _modules(package).items()}
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_training_and_post_training_packages_have_no_import_cycle():
    graph = _graph("marin.training", "marin.posttrain")
    assert len(graph) > 40 and "marin.training.callbacks.base" in graph  # it read the packages
    assert _cycles(graph) == []


def test_nothing_below_the_trainer_imports_it():
    graph = _graph("marin.training", "marin.posttrain")
    importers = sorted(name for name, deps in graph.items() if "marin.training.trainer" in deps)
    assert importers == ["marin.training.launch"]
    callbacks = {name: deps for name, deps in graph.items() if name.startswith("marin.training.callbacks")}
    assert all(not {"marin.training.trainer", "marin.training.config"} & deps for deps in callbacks.values())


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
