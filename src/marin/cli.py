"""The `marin` command: run, plan, status, info, compare, gap, gc, ui, plot-lr; submit and jobs (a Ray cluster, see
docs/clusters.md).

`marin run FILE.py` imports FILE.py as a module (not as `__main__`) and runs every StepSpec or lazy
handle bound to a public top-level name, with their dependencies; `--step NAME` picks some. See
`marin.execution.discover` and docs/execution.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from marin.execution.errors import RunInterruptedError, StepFailedError, is_reported

_PREFIX_HELP = "Where outputs live (default: $MARIN_PREFIX, else ./marin-outputs)."
_TRACEBACK_ENV = "MARIN_TRACEBACK"


class _Marin(click.Group):
    """The command group; every command's errors are reported here, one way.

    An error raised on purpose (`errors.is_reported`: bad input, a missing path, a mistake in the
    experiment file, a step that failed on one) is one `error:` line, plus at most a short hint,
    and exit code 2, without a traceback unless `--traceback` or MARIN_TRACEBACK=1 asks for it. A
    step that failed on a bug exits 1; an interrupted run 130. Anything else is a bug of marin's and
    keeps its traceback.
    """

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except StepFailedError as e:
            _report_failed_steps(e)
        except RunInterruptedError as e:
            _fail(str(e), 130, error=e, at_once=True)
        except Exception as e:
            if not is_reported(e):
                raise
            _fail(str(e), 2, hint=getattr(e, "hint", ""), error=e)


def _set_traceback(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        os.environ[_TRACEBACK_ENV] = "1"


_traceback_option = click.option(
    "--traceback",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_set_traceback,
    help=f"On an error, also print its full traceback (or set {_TRACEBACK_ENV}=1).",
)


def _wants_traceback() -> bool:
    return os.environ.get(_TRACEBACK_ENV, "").strip() not in ("", "0")


@click.group(cls=_Marin, context_settings={"help_option_names": ["-h", "--help"]})
@_traceback_option
def main() -> None:
    """marin: declared pipelines of cached, content-addressed steps."""


def _load(file: str, step_names, prefix: str | None):
    """Import FILE's steps; `--prefix` also becomes $MARIN_PREFIX so a runner the file itself starts agrees."""
    from marin.execution.discover import load_steps

    if prefix:
        os.environ["MARIN_PREFIX"] = prefix
    return load_steps(file, step_names)


def _runner(
    prefix: str | None,
    max_concurrent: int | None = None,
    lease_timeout: float | None = None,
    stop_grace: float | None = None,
):
    from marin.execution.step_runner import StepRunner

    kwargs = {} if lease_timeout is None else {"lease_timeout": lease_timeout}
    if stop_grace is not None:
        kwargs["stop_grace_s"] = stop_grace
    return StepRunner(prefix=prefix, max_concurrent=max_concurrent, **kwargs)


def _fail(
    message: str, code: int = 1, hint: str = "", error: BaseException | None = None, at_once: bool = False
) -> None:
    """Print `error: MESSAGE` (its first line; the rest, or `hint`, indented below) and exit; `at_once`
    skips the interpreter's shutdown (seconds with torch loaded), for a stopped run whose records are
    all written: a Ctrl-C gives the prompt back as soon as the steps have stopped."""
    if error is not None and _wants_traceback():
        from marin.execution.mistakes import format_traceback

        click.echo(format_traceback(error).rstrip(), err=True)
    lines = [line for line in message.strip().splitlines() if line.strip()] or [""]
    click.echo(f"error: {lines[0]}", err=True)
    for line in ([hint] if hint else []) + lines[1:]:
        click.echo(f"  {line.strip()}", err=True)
    if at_once:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _report_failed_steps(e: StepFailedError) -> None:
    """One `error:` line per failed step (its error), its log as the hint; exit 2 when every failure
    was bad input (`StepFailedError.reported`), else 1."""
    if _wants_traceback():
        for name, text in e.failures.items():
            click.echo(f"--- {name}\n{text.rstrip()}", err=True)
    for name, error, log in e.shown():
        click.echo(f"error: step {name!r} failed: {error}", err=True)
        if log:
            more = "" if _wants_traceback() else "; --traceback prints the full error"
            click.echo(f"  its log: {log}{more}", err=True)
    for line in e.rest():
        click.echo(f"  {line}", err=True)
    sys.exit(2 if e.reported else 1)


@main.command()
@_traceback_option
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--step", "step_names", multiple=True, help="Run only this step (step or variable name); repeatable."
)
@click.option("--prefix", default=None, help=_PREFIX_HELP)
@click.option("--max-concurrent", type=int, default=None, help="Steps run at once (default: CPU count).")
@click.option("--force-run", multiple=True, help="Rerun this step even if cached; repeatable.")
@click.option("--force-run-failed", is_flag=True, help="Retry steps that failed in an earlier run.")
@click.option(
    "--lease-timeout", type=float, default=None, help="Seconds before another runner's silent lease is stale."
)
@click.option(
    "--stop-grace",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds a step stopped by Ctrl-C or SIGTERM has to end by itself (a training checkpoints) "
    "before it is killed (default: 60).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and run nothing (same as `marin plan`).")
@click.option(
    "--cluster",
    default=None,
    help="Where steps run: local (default), thread, ray or ray:ADDRESS; sets $MARIN_CLUSTER.",
)
def run(
    file,
    step_names,
    prefix,
    max_concurrent,
    force_run,
    force_run_failed,
    lease_timeout,
    stop_grace,
    dry_run,
    cluster,
) -> None:
    """Run the steps FILE.py declares (and their dependencies)."""
    if cluster:
        os.environ["MARIN_CLUSTER"] = cluster
    steps = _load(file, step_names, prefix)
    result = _runner(prefix, max_concurrent, lease_timeout, stop_grace).run(
        steps, dry_run=dry_run, force_run=force_run, force_run_failed=force_run_failed
    )
    if not dry_run:
        counts: dict[str, int] = {}
        for outcome in result.outcomes.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        click.echo("done: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), err=True)
    return result


def run_with_marin(file: str, args: Sequence[str]):
    """`marin run FILE ARGS` in this process, returning its RunResult, for a script that reports on
    what it ran (the demo). Its errors are reported as the command reports them, and exit."""
    try:
        result = main.main(["run", file, *args], prog_name="marin", standalone_mode=False)
    except click.ClickException as e:  # a usage error: the command's message and exit code
        e.show()
        sys.exit(e.exit_code)
    except click.Abort:
        sys.exit(1)
    if isinstance(result, int):  # --help, which click answers with an exit code
        sys.exit(result)
    return result


@main.command()
@_traceback_option
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--step", "step_names", multiple=True, help="Plan only this step (step or variable name); repeatable."
)
@click.option("--prefix", default=None, help=_PREFIX_HELP)
@click.option("--force-run", multiple=True, help="Plan this step as forced; repeatable.")
@click.option("--force-run-failed", is_flag=True, help="Plan a retry of failed steps.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON on stdout.")
def plan(file, step_names, prefix, force_run, force_run_failed, as_json) -> None:
    """Show what `marin run FILE.py` would do, and why, without running anything."""
    steps = _load(file, step_names, prefix)
    the_plan = _runner(prefix).plan(steps, force_run=force_run, force_run_failed=force_run_failed)
    if as_json:
        import orjson

        click.echo(orjson.dumps(the_plan.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        from marin.execution.plan_view import print_plan

        print_plan(the_plan, max_cached_rows=10**9)


@main.command()
@_traceback_option
@click.argument("prefix", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON on stdout.")
@click.option("--all", "show_all", is_flag=True, help="Also list moved-aside copies of outputs.")
def status(prefix, as_json, show_all) -> None:
    """A table of the step outputs under PREFIX: state, age, duration, headline metric and compute."""
    import storage
    from marin.execution.errors import MarinError
    from marin.execution.explain import format_seconds, list_outputs
    from marin.execution.plan import resolve_prefix

    root = resolve_prefix(prefix)
    if not storage.is_dir(root):
        raise MarinError(
            f"{root}: no such folder; give the prefix the outputs were written under (marin status PREFIX, "
            "or set MARIN_PREFIX)"
        )
    rows = list_outputs(root, include_superseded=show_all)
    if as_json:
        import dataclasses

        import orjson

        click.echo(orjson.dumps([dataclasses.asdict(r) for r in rows], option=orjson.OPT_INDENT_2).decode())
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} step outputs under {root}")
    # A step's name and state are what a reader searches for: they are never broken over lines (the
    # other columns fold to make room).
    for column in ("state", "step", "output", "age", "duration", "headline", "FLOPs model / hw", "note"):
        table.add_column(column, overflow="fold", no_wrap=column in ("state", "step", "age", "duration"))
    for r in rows:
        rel = r.path[len(root) + 1 :] if r.path.startswith(root + "/") else r.path
        table.add_row(
            r.state,
            r.name,
            rel,
            format_seconds(r.age_s),
            format_seconds(r.duration_s),
            r.headline,
            r.compute,
            r.detail if len(r.detail) <= 100 else r.detail[:99] + "…",  # `marin info` has all of it
        )
    Console(width=160).print(table)


@main.command()
@_traceback_option
@click.argument("prefix")
@click.option(
    "--keep-latest",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Keep this many most recent outputs of each step name.",
)
@click.option("--yes", is_flag=True, help="Delete what is listed (without it, gc only lists).")
@click.option("--dry-run", is_flag=True, help="Only list what would be deleted (the default).")
def gc(prefix, keep_latest, yes, dry_run) -> None:
    """Delete moved-aside copies and older versions of step outputs under PREFIX, judged from their records.

    Never deletes the latest SUCCESS output of a step, anything a kept output depends on, or a folder
    whose record it cannot read. Lists only, unless --yes.
    """
    from marin.execution.gc import collect, format_bytes

    delete = yes and not dry_run
    report = collect(prefix, keep_latest=keep_latest, delete=delete)
    verb = "deleted" if delete else "would delete"
    for g in sorted(report.garbage, key=lambda g: g.path):
        click.echo(f"{verb} {g.path}  ({format_bytes(g.size)}; {g.why})")
    for path, why in sorted(report.kept):
        click.echo(f"kept {path}: {why}")
    summary = (
        f"{verb} {len(report.garbage)} folder(s) under {prefix}: "
        f"{'reclaimed' if delete else 'would reclaim'} {report.bytes} bytes ({format_bytes(report.bytes)})"
    )
    click.echo(summary + ("" if delete else "; pass --yes to delete them"))


@main.command()
@_traceback_option
@click.argument("outputs", nargs=-1, required=True)
@click.option("--prefix", default=None, help=_PREFIX_HELP)
@click.option("--format", "fmt", type=click.Choice(["md", "csv", "json"]), default="md", show_default=True)
@click.option(
    "--metric", "metrics", multiple=True, help="Only this metric (repeatable); default: every metric."
)
@click.option(
    "--adjust",
    "adjustment",
    type=click.Choice(["holm", "bh", "none"]),
    default="holm",
    show_default=True,
    help="How p-values are adjusted for the number of tests: Holm (family-wise), Benjamini-Hochberg (FDR).",
)
@click.option(
    "--unpaired", is_flag=True, help="Compare evaluations of different items as independent samples."
)
@click.option(
    "--power",
    "power",
    type=float,
    default=None,
    metavar="DELTA",
    help="Also say how many seeds (and items) a difference of DELTA needs for 80% power.",
)
def compare(outputs, prefix, fmt, metrics, adjustment, unpaired, power) -> None:
    """Evaluations side by side: differing parameters, metrics with intervals, and what their
    differences conclude (configurations over their seeds when there are replicates).

    Each OUTPUT is an evaluation's output folder, or a step name (its latest finished output).
    """
    from marin.evaluation.compare import compare as compare_evaluations
    from marin.evaluation.compare import resolve
    from marin.evaluation.compare_render import render
    from marin.evaluation.multiple_testing import Adjustment
    from marin.execution.plan import resolve_prefix

    root = resolve_prefix(prefix)
    comparison = compare_evaluations(
        [resolve(o, root) for o in outputs],
        adjustment=Adjustment(adjustment),
        unpaired=unpaired,
        metrics=metrics,
        power=power,
    )
    click.echo(render(comparison, fmt), nl=False)


@main.command()
@_traceback_option
@click.argument("a")
@click.argument("b")
@click.option("--prefix", default=None, help=_PREFIX_HELP)
@click.option("--format", "fmt", type=click.Choice(["md", "csv", "json"]), default="md", show_default=True)
def gap(a, b, prefix, fmt) -> None:
    """Where two evaluations differ: bits per byte of A minus B on the documents both scored, byte-aligned
    (tokenizers may differ), split by byte class and domain, with paired intervals.

    A and B are evaluations' output folders, or step names (their latest finished outputs).
    """
    from marin.evaluation.compare import resolve
    from marin.evaluation.gap import gap_between_evaluations, render
    from marin.execution.plan import resolve_prefix

    root = resolve_prefix(prefix)
    click.echo(render(gap_between_evaluations(resolve(a, root), resolve(b, root)), fmt), nl=False)


@main.command()
@_traceback_option
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print the raw records as JSON on stdout.")
@click.option(
    "--prefix",
    default=None,
    help="Where to look for a step NAME's outputs (default: $MARIN_PREFIX, else ./marin-outputs).",
)
def info(path, as_json, prefix) -> None:
    """Explain how the output at PATH (or the latest output of the step named PATH) was made, from its records."""
    from marin.execution.explain import explain_output, find_output, output_records
    from marin.execution.plan import resolve_prefix

    path = find_output(path, resolve_prefix(prefix))
    if as_json:
        import orjson

        click.echo(orjson.dumps(output_records(path).to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(explain_output(path))


@main.command()
@_traceback_option
@click.argument("path")
@click.option(
    "--prefix",
    default=None,
    help="Where to look for a step NAME's outputs (default: $MARIN_PREFIX, else ./marin-outputs).",
)
def verify(path, prefix) -> None:
    """Re-check the files of the output at PATH (or the latest output of the step named PATH) against
    its manifest (sizes and xxhash digests).

    Names each file that changed, went missing or was added; exits 1 when any did, 0 when all match.
    """
    from marin.execution.explain import find_output
    from marin.execution.plan import resolve_prefix
    from marin.execution.provenance import verify_output

    path = find_output(path, resolve_prefix(prefix))
    check = verify_output(path)
    for line in check.lines():
        click.echo(line)
    if not check.ok:
        _fail(
            f"{path}: {len(check.changed)} changed, {len(check.missing)} missing, {len(check.added)} added "
            f"(of {check.checked + len(check.missing)} recorded files)"
        )
    click.echo(f"ok: {check.checked} files match the manifest of {path}", err=True)


@main.command()
@_traceback_option
@click.argument("path_a")
@click.argument("path_b")
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON on stdout.")
def diff(path_a, path_b, as_json) -> None:
    """Show field by field how two outputs' key records and provenance differ.

    Sections: key, hash_attrs, deps, code, inputs, versions, git, run. Exits 1 when they differ.
    """
    from marin.execution.provenance import diff_outputs

    result = diff_outputs(path_a, path_b)
    if as_json:
        import orjson

        click.echo(orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        for line in result.lines():
            click.echo(line)
    if not result.same:
        sys.exit(1)


@main.command()
@_traceback_option
@click.argument("prefix", required=False)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback needs --token.",
)
@click.option("--port", type=int, default=8642, show_default=True, help="Port to listen on.")
@click.option(
    "--token",
    envvar="MARIN_UI_TOKEN",
    default=None,
    help="Secret every request must carry (default: $MARIN_UI_TOKEN); required off loopback.",
)
@click.option(
    "--experiment",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Also show this experiment file's plan: each step's state and why it would rerun.",
)
def ui(prefix, host, port, token, experiment) -> None:
    """Marina: a read-only web interface over the outputs under PREFIX (docs/ui.md)."""
    from marin.execution.plan import resolve_prefix

    try:
        from marin.ui.app import UiConfig
        from marin.ui.server import UiStartError, serve
    except ImportError as e:
        _fail(f"`marin ui` needs the ui extra: pip install 'marin[ui]' ({e})", 2)
    try:
        config = UiConfig(resolve_prefix(prefix), token=token, experiment=experiment)
        serve(
            config,
            host,
            port,
            on_ready=lambda url: click.echo(f"Marina serves {config.prefix} at {url}", err=True),
        )
    except UiStartError as e:
        _fail(str(e), 2)


@main.command("plot-lr")
@_traceback_option
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--step", "step_names", multiple=True, help="Draw only this train step (step or variable name)."
)
@click.option("--out", default="lr-schedule.png", show_default=True, help="Where to write the PNG.")
def plot_lr(file, step_names, out) -> None:
    """Draw the learning-rate schedule of each train step FILE.py declares, step by step, into a PNG."""
    from marin.experiment.lr_plot import plot_curves, schedule_curve, train_steps

    curves = [schedule_curve(name, handle) for name, handle in train_steps(file, step_names)]
    plot_curves(curves, out)
    for curve in curves:
        click.echo(curve.summary())
    click.echo(f"wrote {out}", err=True)


def _add_cluster_commands() -> None:
    """`marin submit` and `marin jobs` live in marin.submit (they import ray only when run)."""
    from marin.submit import jobs_group, submit_command

    main.add_command(submit_command)
    main.add_command(jobs_group)


_add_cluster_commands()

if __name__ == "__main__":
    main()
