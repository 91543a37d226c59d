"""Walks over the step graph: its topological order, outputs that would nest, and how many steps
after each running one will run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from marin.execution.errors import DagError
from marin.execution.step_spec import StepSpec

if TYPE_CHECKING:
    from marin.execution.plan import PlannedStep


def collect_dag(roots: Iterable[StepSpec]) -> list[StepSpec]:
    """Every step reachable from `roots`, dependencies before dependents; DagError on a cycle."""
    order: list[StepSpec] = []
    done: set[int] = set()
    on_path: dict[int, int] = {}  # id -> position on the current DFS path
    path: list[StepSpec] = []
    for root in roots:
        if not isinstance(root, StepSpec):
            raise DagError(f"run() takes StepSpecs (lower() lazy handles first), got {type(root).__name__}")
        if id(root) in done:
            continue
        stack: list[tuple[StepSpec, int]] = [(root, 0)]
        on_path[id(root)] = 0
        path.append(root)
        while stack:
            spec, i = stack[-1]
            deps = spec.deps
            if i < len(deps):
                stack[-1] = (spec, i + 1)
                dep = deps[i]
                dep_id = id(dep)
                if dep_id in done:
                    continue
                if dep_id in on_path:
                    cycle = [s.name for s in path[on_path[dep_id] :]] + [dep.name]
                    raise DagError(
                        f"the steps form a cycle: {' -> '.join(cycle)}; a step cannot depend on itself"
                    )
                on_path[dep_id] = len(path)
                path.append(dep)
                stack.append((dep, 0))
            else:
                stack.pop()
                path.pop()
                del on_path[id(spec)]
                done.add(id(spec))
                order.append(spec)
    return order


def reject_nested_outputs(steps: Sequence[PlannedStep], prefix: str) -> None:
    """DagError when one step's output would sit inside another's."""
    owner = {s.output_path: s for s in steps}
    for s in steps:
        path = s.output_path
        while (cut := path.rfind("/")) > len(prefix):
            path = path[:cut]
            if path in owner:
                raise DagError(
                    f"step {s.name!r} writes to {s.output_path}, inside the output of step {owner[path].name!r} "
                    f"({path}); outputs must not nest, since a rerun clears its whole directory"
                )


def count_downstream_runs(steps: Sequence[PlannedStep]) -> None:
    """Set `downstream_runs` of each running step: how many steps after it will run.

    A bitset of each step's running descendants, built in reverse topological order from its
    dependents' (bit `n - 1 - i` for step i, so a late step's set is a small int). A step's set is
    dropped once every running step it depends on has used it: what is alive at once is the sets
    of one cut through the DAG (two layers of a layered DAG), never one per step, which at 100,000
    steps would be 100,000 sets of up to 12 KB each.
    """
    running = [i for i, s in enumerate(steps) if s.will_run]
    if not running:
        return
    last = len(steps) - 1
    is_running = set(running)
    dependents: dict[int, list[int]] = {}
    users: dict[int, int] = {}  # step -> the running steps it depends on, which read its set
    for i in running:
        deps = [d for d in steps[i].deps if d in is_running]
        users[i] = len(deps)
        for d in deps:
            dependents.setdefault(d, []).append(i)
    below: dict[int, int] = {}
    for i in reversed(running):
        bits = 0
        for c in dependents.get(i, ()):
            bits |= below[c] | (1 << (last - c))
            users[c] -= 1
            if not users[c]:
                del below[c]
        steps[i].downstream_runs = bits.bit_count()
        if users[i]:
            below[i] = bits
