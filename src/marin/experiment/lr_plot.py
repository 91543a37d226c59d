"""`marin plot-lr FILE.py`: draw the learning-rate schedule of every train step an experiment declares.

The schedule is an object whose rate is a pure function of the step (`Schedule.lr`), so the drawing is exactly
what the trainer will set, step by step, and what `metrics.jsonl` will record as `lr`. Each train
step is one line; an optimizer with two rates (Muon's matrices and its AdamW part) is drawn in two
panels, one per rate. A step that starts from another train step (`init_from`, a cooldown) is drawn
after it: its step 0 is placed at the end of the run it continues. Nothing is trained or read: the
file is imported as `marin plan` imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from marin.execution.discover import declared_steps, import_file
from marin.execution.errors import MarinError
from marin.experiment.train import TrainLm

RATE_TITLES = {"lr": "learning rate (learning_rate)", "adam_lr": "AdamW part (adam_learning_rate)"}


@dataclass(frozen=True)
class ScheduleCurve:
    """One train step's schedule: its name, optimizer and run length, and each rate at every step."""

    name: str
    optimizer: str
    num_train_steps: int
    rates: dict[str, list[float]]
    offset: int = 0  # the steps of the runs it continues (init_from), before its own step 0

    def summary(self) -> str:
        """A line saying what the curve is: peak, where decay starts, last rate."""
        lrs = self.rates["lr"]
        peak = max(lrs)
        held = [i for i, lr in enumerate(lrs) if lr == peak]
        after = f", after {self.offset} steps it continues" if self.offset else ""
        return (
            f"{self.name}: {self.optimizer}, {self.num_train_steps} steps{after}, peak {peak:.3g} "
            f"(steps {held[0]}–{held[-1]}), last {lrs[-1]:.3g}"
        )


def schedule_curve(name: str, handle: TrainLm) -> ScheduleCurve:
    """Every step's rates of a train step's optimizer."""
    optimizer, n = handle.optimizer, handle.num_train_steps
    schedule = optimizer.schedule
    rates = {
        rate: [schedule.lr(s, n, peak) for s in range(n)] for rate, peak in optimizer.peak_rates().items()
    }
    offset, source = 0, handle.init_from
    while isinstance(source, TrainLm):
        offset += source.num_train_steps
        source = source.init_from
    return ScheduleCurve(name, type(optimizer).__name__, n, rates, offset)


def train_steps(path: str, names: Sequence[str] = ()) -> list[tuple[str, TrainLm]]:
    """(step name, handle) of each train step `path` declares at top level, or of those named in `names`
    (by step or variable name)."""
    found: dict[str, TrainLm] = {}
    variables: dict[str, str] = {}
    for var, value in declared_steps(import_file(path)):
        if isinstance(value, TrainLm):
            found.setdefault(value.name, value)
            variables[var] = value.name
    if not found:
        raise MarinError(f"{path} declares no train_lm(...) step; plot-lr draws the schedules of train steps")
    if not names:
        return list(found.items())
    picked = [variables.get(n, n) for n in names]
    unknown = [n for n, step in zip(names, picked, strict=True) if step not in found]
    if unknown:
        raise MarinError(
            f"{path} declares no train step named {unknown}; its train steps are {sorted(found)}"
        )
    return [(step, found[step]) for step in dict.fromkeys(picked)]


def plot_curves(curves: Sequence[ScheduleCurve], out: str) -> str:
    """Draw `curves` into the PNG at `out` (one panel per rate) and return its path."""
    try:
        import matplotlib
    except ImportError:
        raise MarinError(
            "plot-lr draws with matplotlib, which is not installed: pip install matplotlib"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys(rate for curve in curves for rate in curve.rates))
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 3.2 * len(panels)), squeeze=False, sharex=True)
    for axis, rate in zip(axes[:, 0], panels, strict=True):
        for i, curve in enumerate(curves):  # one colour per train step in every panel
            if rate in curve.rates:
                steps = range(curve.offset, curve.offset + curve.num_train_steps)
                axis.plot(steps, curve.rates[rate], label=curve.name, color=f"C{i % 10}", linewidth=1.6)
        axis.set_ylabel(RATE_TITLES.get(rate, rate))
        axis.grid(alpha=0.3)
        axis.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        axis.legend(fontsize="small")
    axes[-1, 0].set_xlabel("optimizer step")
    fig.tight_layout()
    import storage

    with storage.open_write(out) as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    return out
