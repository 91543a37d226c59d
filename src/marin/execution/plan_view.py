"""The plan as a table for people: one row per step with its state, output, reason and how many
steps after it will run (`marin plan`, a dry run, and the start of every run)."""

from __future__ import annotations

import os
from typing import Any

from marin.execution.plan import Plan
from marin.execution.states import PlanState


def render_plan(plan: Plan, max_cached_rows: int = 20, max_rows: int | None = None) -> Any:
    """A rich Table of the plan; beyond `max_cached_rows` cached steps are summarised in one row,
    and with `max_rows`, beyond that many rows the other steps are too (one row per state)."""
    from rich.table import Table  # lazy: rich costs 20 ms to import

    table = Table(title=plan.summary(), show_lines=False, expand=False)
    for column in ("state", "step", "output", "why", "downstream"):
        table.add_column(column, overflow="fold")
    cached = [s for s in plan.steps if s.state == PlanState.CACHED]
    shown_cached = set(map(id, cached[:max_cached_rows]))
    hidden: dict[PlanState, int] = {}
    rows = 0
    for s in plan.steps:
        if s.state == PlanState.CACHED and id(s) not in shown_cached:
            continue
        if max_rows is not None and rows >= max_rows:
            hidden[s.state] = hidden.get(s.state, 0) + 1
            continue
        rows += 1
        why = "; ".join(([s.reason] if not s.changes else [str(c) for c in s.changes]) + list(s.notes))
        downstream = str(s.downstream_runs) if s.will_run else ""
        table.add_row(_styled(s.state), s.name, _relative(s.output_path, plan.prefix), why, downstream)
    for state, n in hidden.items():
        if state != PlanState.CACHED:
            table.add_row(_styled(state), f"... and {n} more steps in this state", "", "", "")
    more = len(cached) - len(shown_cached) + hidden.get(PlanState.CACHED, 0)
    if more:
        table.add_row(_styled(PlanState.CACHED), f"... and {more} more cached steps", "", "", "")
    return table


def print_plan(plan: Plan, max_cached_rows: int = 20, max_rows: int | None = None) -> None:
    """Print the plan table to stderr (see `render_plan`)."""
    from rich.console import Console

    Console(stderr=True, width=max(100, _terminal_width())).print(
        render_plan(plan, max_cached_rows, max_rows)
    )


def _terminal_width() -> int:
    try:
        return os.get_terminal_size(2).columns
    except OSError:
        return 140


_STYLES = {PlanState.CACHED: "green", PlanState.WAITING: "yellow", PlanState.BLOCKED: "red"}


def _styled(state: PlanState) -> str:
    return f"[{_STYLES.get(state, 'cyan')}]{state}[/]"


def _relative(path: str, prefix: str) -> str:
    return path[len(prefix) + 1 :] if path.startswith(prefix + "/") else path
