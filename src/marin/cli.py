"""The `marin` command: run, plan, status, info, gc, ui, plot-lr; submit and jobs (a Ray cluster, see docs/clusters.md).

`marin run FILE.py` imports FILE.py as a module (not as `__main__`) and runs every StepSpec or lazy
handle bound to a public top-level name, with their dependencies; `--step NAME` picks some. See
`marin.execution.discover` and docs/execution.md.
"""

from __future__ import annotations

import sys

import click

from marin.execution.errors import MarinError, RunInterruptedError, StepFailedError

_PREFIX_HELP = "Where outputs live (default: $MARIN_PREFIX, else ./marin-outputs)."


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """marin: declared pipelines of cached, content-addressed steps."""


def _load(file: str, step_names, prefix: str | None):
    """Import FILE's steps; `--prefix` also becomes $MARIN_PREFIX so a runner the file itself starts agrees."""
    import os

    from marin.execution.discover import load_steps

    if prefix:
        os.environ["MARIN_PREFIX"] = prefix
    return load_steps(file, step_names)


def _runner(prefix: str | None, max_concurrent: int | None = None, lease_timeout: float | None = None):
    from marin.execution.step_runner import StepRunner

    kwargs = {} if lease_timeout is None else {"lease_timeout": lease_timeout}
    return StepRunner(prefix=prefix, max_concurrent=max_concurrent, **kwargs)


def _declared_errors() -> tuple[type[Exception], ...]:
    """The errors a declaration raises on purpose: MarinError, and ZephyrError (zephyr is a leaf
    library, so its errors have their own base). zephyr is loaded only when the experiment file
    imported it, so the command itself never pays for importing it."""
    zephyr_errors = sys.modules.get("zephyr.errors")
    return (MarinError,) + ((zephyr_errors.ZephyrError,) if zephyr_errors is not None else ())


def _fail(message: str, code: int = 1) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@main.command()
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
@click.option("--dry-run", is_flag=True, help="Print the plan and run nothing (same as `marin plan`).")
@click.option(
    "--cluster",
    default=None,
    help="Where steps run: local (default), thread, ray or ray:ADDRESS; sets $MARIN_CLUSTER.",
)
def run(
    file, step_names, prefix, max_concurrent, force_run, force_run_failed, lease_timeout, dry_run, cluster
) -> None:
    """Run the steps FILE.py declares (and their dependencies)."""
    if cluster:
        import os

        os.environ["MARIN_CLUSTER"] = cluster
    try:
        steps = _load(file, step_names, prefix)
        result = _runner(prefix, max_concurrent, lease_timeout).run(
            steps, dry_run=dry_run, force_run=force_run, force_run_failed=force_run_failed
        )
    except StepFailedError as e:
        _fail(str(e))
    except RunInterruptedError as e:
        _fail(str(e), 130)
    except _declared_errors() as e:
        _fail(str(e), 2)
    if not dry_run:
        counts: dict[str, int] = {}
        for outcome in result.outcomes.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        click.echo("done: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), err=True)


@main.command()
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
    try:
        steps = _load(file, step_names, prefix)
        the_plan = _runner(prefix).plan(steps, force_run=force_run, force_run_failed=force_run_failed)
    except _declared_errors() as e:
        _fail(str(e), 2)
    if as_json:
        import orjson

        click.echo(orjson.dumps(the_plan.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        from marin.execution.plan_view import print_plan

        print_plan(the_plan, max_cached_rows=10**9)


@main.command()
@click.argument("prefix", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON on stdout.")
@click.option("--all", "show_all", is_flag=True, help="Also list moved-aside copies of outputs.")
def status(prefix, as_json, show_all) -> None:
    """A table of the step outputs under PREFIX: state, age, duration and headline metric."""
    from marin.execution.explain import format_seconds, list_outputs
    from marin.execution.plan import resolve_prefix

    root = resolve_prefix(prefix)
    rows = list_outputs(root, include_superseded=show_all)
    if as_json:
        import dataclasses

        import orjson

        click.echo(orjson.dumps([dataclasses.asdict(r) for r in rows], option=orjson.OPT_INDENT_2).decode())
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} step outputs under {root}")
    for column in ("state", "step", "output", "age", "duration", "headline", "note"):
        table.add_column(column, overflow="fold")
    for r in rows:
        rel = r.path[len(root) + 1 :] if r.path.startswith(root + "/") else r.path
        table.add_row(
            r.state, r.name, rel, format_seconds(r.age_s), format_seconds(r.duration_s), r.headline, r.detail
        )
    Console(width=160).print(table)


@main.command()
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
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print the raw records as JSON on stdout.")
def info(path, as_json) -> None:
    """Explain how the output at PATH was made, from its records."""
    from marin.execution.explain import explain_output, output_records

    try:
        if as_json:
            import orjson

            click.echo(orjson.dumps(output_records(path).to_json(), option=orjson.OPT_INDENT_2).decode())
        else:
            click.echo(explain_output(path))
    except MarinError as e:
        _fail(str(e), 2)


@main.command()
@click.argument("path")
def verify(path) -> None:
    """Re-check the files of the output at PATH against its manifest (sizes and xxhash digests).

    Names each file that changed, went missing or was added; exits 1 when any did, 0 when all match.
    """
    from marin.execution.provenance import verify_output

    try:
        check = verify_output(path)
    except MarinError as e:
        _fail(str(e), 2)
    for line in check.lines():
        click.echo(line)
    if not check.ok:
        _fail(
            f"{path}: {len(check.changed)} changed, {len(check.missing)} missing, {len(check.added)} added "
            f"(of {check.checked + len(check.missing)} recorded files)"
        )
    click.echo(f"ok: {check.checked} files match the manifest of {path}", err=True)


@main.command()
@click.argument("path_a")
@click.argument("path_b")
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON on stdout.")
def diff(path_a, path_b, as_json) -> None:
    """Show field by field how two outputs' key records and provenance differ.

    Sections: key, hash_attrs, deps, code, inputs, versions, git, run. Exits 1 when they differ.
    """
    from marin.execution.provenance import diff_outputs

    try:
        result = diff_outputs(path_a, path_b)
    except MarinError as e:
        _fail(str(e), 2)
    if as_json:
        import orjson

        click.echo(orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        for line in result.lines():
            click.echo(line)
    if not result.same:
        sys.exit(1)


@main.command()
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
    except (UiStartError, MarinError) as e:
        _fail(str(e), 2)


@main.command("plot-lr")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--step", "step_names", multiple=True, help="Draw only this train step (step or variable name)."
)
@click.option("--out", default="lr-schedule.png", show_default=True, help="Where to write the PNG.")
def plot_lr(file, step_names, out) -> None:
    """Draw the learning-rate schedule of each train step FILE.py declares, step by step, into a PNG."""
    from marin.experiment.lr_plot import plot_curves, schedule_curve, train_steps

    try:
        curves = [schedule_curve(name, handle) for name, handle in train_steps(file, step_names)]
        plot_curves(curves, out)
    except _declared_errors() as e:
        _fail(str(e), 2)
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
