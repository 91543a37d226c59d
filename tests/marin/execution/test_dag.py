"""The DAG walks: how many running steps follow each running one, checked against a plain search."""

from __future__ import annotations

import random
from dataclasses import dataclass

from marin.execution.dag import count_downstream_runs


@dataclass
class _Step:
    deps: tuple[int, ...]
    will_run: bool
    downstream_runs: int = 0


def _searched(steps: list[_Step], i: int) -> int:
    dependents = {j: [k for k, s in enumerate(steps) if j in s.deps] for j in range(len(steps))}
    seen, stack = set(), list(dependents[i])
    while stack:
        k = stack.pop()
        if k not in seen:
            seen.add(k)
            stack.extend(dependents[k])
    return sum(1 for k in seen if steps[k].will_run)


def test_downstream_counts_match_a_search_on_random_dags_with_cached_steps():
    rng = random.Random(7)
    for _ in range(20):
        n = rng.randint(1, 60)
        steps = []
        for i in range(n):
            deps = tuple(sorted(rng.sample(range(i), min(i, rng.randint(0, 3)))))
            steps.append(_Step(deps, will_run=rng.random() < 0.7))
        for s in steps:  # a cached step's dependents may run, but it is never below a running one
            if not s.will_run:
                s.deps = tuple(d for d in s.deps if not steps[d].will_run)
        count_downstream_runs(steps)
        for i, s in enumerate(steps):
            if s.will_run:
                assert s.downstream_runs == _searched(steps, i), (i, [x.deps for x in steps])
