"""The soak: a mixed DAG driven by three runner processes while a seeded chaos thread breaks things.

The DAG (`soak_dag.py`, written into the work folder) has 300 trivial steps in layers (each
depending on two of the layer before), two zephyr steps (records generated, then mapped, filtered
and re-sharded), a tokenizer training, a tokenization and two nano trainings, and a final step that
reads them all: 307 steps. Every step function notes its start and end in a journal outside the
prefix. Three runner processes (`StepRunner().run(...)` of the whole DAG, in fresh interpreters,
on the default LocalCluster) work on it at once, in rounds: a round starts three runners and ends
when all three have exited; rounds go on until every step is SUCCESS.

While `--chaos-s` seconds last (and until each kind was injected once), the chaos thread (seeded:
`--seed`) waits 1-5 s, then injects one fault, the first four one of each kind in a seeded order:
- `kill_runner`: SIGKILL a runner process;
- `kill_worker`: SIGKILL a worker process of a runner (the process running a step);
- `term_runner`: SIGTERM a runner (it cancels its steps, records them INTERRUPTED and exits);
- `skew_clock`: set a live runner's lease clock 3 lease timeouts into the past, so that its leases
  look stale to the others, which take its steps over (it then stops those steps itself).

Then it checks, and prints as JSON:
- faults injected by kind, rounds, steps, the wall time and steps completed per minute, against
  the same DAG run by three runners without chaos (`--no-baseline` skips that run);
- every output is `marin verify`-clean (its files match the manifest SUCCESS vouched for);
- no SUCCESS over partial output: each output holds exactly what its step makes (each trivial
  step's text, every zephyr record, an openable token cache with every document, a training's
  exported model and final loss);
- no step's function ran to its end twice under one output, except where its first attempt was
  then killed (its worker or runner hit by the chaos, or stopped by its runner after a takeover):
  those are counted, any other is listed;
- nothing was written under the prefix outside the engine's folders: the steps' output folders
  (and moved-aside copies of them), and the engine's own files at the top.
`invariants_hold` is true when every check passes.

    .venv/bin/python benchmarks/soak.py [--store local|s3] [--seed 1] [--chaos-s 60] [--train-steps 20]
    .venv/bin/python benchmarks/soak.py --short --store s3   # the suite's versions (tests/marin/execution/test_soak.py)
    .venv/bin/python benchmarks/soak.py --tiny --store s3

`--short` is `SHORT`: 5 x 8 trivial steps (47 in all), two 2-step trainings, a fault every 0.5-1.5 s
for 6 s, no baseline; `--tiny` is `TINY`: 2 x 4 trivial steps (15 in all), 1-step trainings, 3 s of
faults. Every check is the same.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]

from fresh import load_average  # noqa: E402

RUNNERS = 3
LEASE_TIMEOUT_S = 4.0
FAULT_KINDS = ("kill_runner", "kill_worker", "term_runner", "skew_clock")

DAG = textwrap.dedent('''
    """The soak's DAG (see benchmarks/soak.py): importable by the runners and their workers."""
    import dataclasses
    import functools
    import os
    import time

    import storage
    from experiments.llama import llama_nano
    from marin.data.corpus import SOURCE_NAME
    from marin.data.zephyr_step import zephyr_step
    from marin.execution.context import current
    from marin.execution.lazy import lower
    from marin.execution.step_spec import StepSpec, takes_output_path
    from marin.experiment.data import tokenized, train_tokenizer
    from marin.experiment.train import train_lm
    from marin.training.optim import AdamConfig
    from zephyr import Dataset

    JOURNAL = os.environ["SOAK_JOURNAL"]
    LAYERS, WIDTH = int(os.environ.get("SOAK_LAYERS", "15")), int(os.environ.get("SOAK_WIDTH", "20"))
    RECORDS = 2000
    TRAIN_STEPS = int(os.environ.get("SOAK_TRAIN_STEPS", "20"))


    def note(event, output_path):
        """One line in the journal: a step function started or reached its end (one append)."""
        line = f"{event} {output_path} {os.getpid()} {os.getppid()} {time.time():.6f}\\n".encode()
        fd = os.open(JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


    def trivial(name, output_path):
        note("start", output_path)
        storage.write_bytes(storage.join(output_path, "out.txt"), name.encode())
        note("done", output_path)


    def journaled(fn, output_path):
        """A library step's function, its start and end noted in the journal."""
        note("start", output_path)
        result = fn(output_path) if takes_output_path(fn) else fn()
        note("done", output_path)
        return result


    def numbers(context):
        return Dataset.from_list([{"id": i, "text": f"record {i:05d}"} for i in range(RECORDS)], num_shards=4)


    def even_doubled(context):
        files = context.path_of("zephyr/numbers") + "/*.jsonl"
        return Dataset.from_files(files).filter(lambda r: r["id"] % 2 == 0).map(lambda r: {**r, "double": 2 * r["id"]})


    def summary(output_path):
        note("start", output_path)
        ctx = current()
        names = sorted(ctx.dep_paths)
        storage.write_bytes(storage.join(output_path, "deps.txt"), "\\n".join(names).encode())
        note("done", output_path)


    def declared():
        layers, previous = [], []
        for d in range(LAYERS):
            layer = []
            for w in range(WIDTH):
                deps = [previous[w], previous[(w + 1) % WIDTH]] if previous else []
                name = f"trivial/s{d}_{w}"
                fn = functools.partial(trivial, name)
                layer.append(StepSpec(name=name, fn=fn, deps=deps, hash_attrs={"d": d, "w": w}))
            layers.append(layer)
            previous = layer
        made = zephyr_step("zephyr/numbers", numbers)
        doubled = zephyr_step("zephyr/even-doubled", even_doubled, deps=[made])
        tok = train_tokenizer("tokenizers/soak-bpe", source=SOURCE_NAME, vocab_size=512, sample_count=300)
        tokens = tokenized("tokenized/soak", source=SOURCE_NAME, tokenizer=tok, sample_count=300)
        models = [
            lower(train_lm(
                name=f"checkpoints/soak-nano-lr{lr:g}", model=llama_nano,
                optimizer=AdamConfig(learning_rate=lr), datasets={tokens: 1.0}, batch_size=4, seq_len=64,
                num_train_steps=TRAIN_STEPS, steps_per_eval=TRAIN_STEPS, checkpoint_every=max(1, TRAIN_STEPS // 4),
            ))
            for lr in (1e-3, 3e-3)
        ]
        deps = [*layers[-1][:2], lower(doubled), *models]
        report = StepSpec(name="report", fn=summary, deps=deps, hash_attrs={"v": 1})
        return journal_every_step([*layers[-1], report])


    def journal_every_step(roots):
        """The same DAG with every library step's function noting its start and end (the trivial
        steps note their own), its dependencies remapped to the rebuilt specs."""
        rebuilt = {}

        def rebuild(spec):
            if id(spec) not in rebuilt:
                deps = [rebuild(d) for d in spec.deps]
                fn = spec.fn
                if not (isinstance(fn, functools.partial) and fn.func in (trivial,)) and fn is not summary:
                    fn = functools.partial(journaled, fn)
                rebuilt[id(spec)] = dataclasses.replace(spec, fn=fn, deps=deps)
            return rebuilt[id(spec)]

        return [rebuild(r) for r in roots]
''')

RUNNER = textwrap.dedent('''
    """One soak runner: the whole DAG, and a watcher that skews its lease clock when told to."""
    import os, sys, threading, time
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import soak_dag
    import marin.execution.lease as lease_module
    from marin.execution.step_runner import StepRunner

    control, lease_timeout = sys.argv[1], float(sys.argv[2])


    class SkewedClock:
        def __init__(self, offset):
            self.offset = offset

        def time(self):
            return time.time() + self.offset

        def __getattr__(self, name):
            return getattr(time, name)


    def watch_for_skew():
        path = os.path.join(control, f"skew-{os.getpid()}")
        while not os.path.exists(path):
            time.sleep(0.05)
        lease_module.time = SkewedClock(float(open(path).read()))


    threading.Thread(target=watch_for_skew, daemon=True).start()
    StepRunner(lease_timeout=lease_timeout, max_attempts=10_000, progress=False).run(soak_dag.declared())
''')


@dataclass(frozen=True)
class Fault:
    kind: str
    pid: int  # the process hit (for a worker: the worker)
    runner: int  # the runner it belongs to
    at: float


class Chaos(threading.Thread):
    """Injects one fault every 1-5 s (seeded; `every`) into the live runners and their workers, until stopped."""

    def __init__(
        self,
        seed: int,
        runners: list[subprocess.Popen],
        control: str,
        seconds: float,
        every: tuple[float, float] = (1.0, 5.0),
    ):
        super().__init__(name="soak-chaos", daemon=True)
        self.rng = random.Random(seed)
        self.runners = runners  # the current round's, replaced by the driver between rounds
        self.control = control
        self.seconds = seconds  # counted from when the first runner is running steps
        self.every = every
        self.faults: list[Fault] = []
        self.stop = threading.Event()
        self.first = list(FAULT_KINDS)
        self.rng.shuffle(self.first)

    def run(self) -> None:
        while not any(_workers(p.pid) for p in self.runners if p.poll() is None):
            if self.stop.wait(0.1):
                return
        until = time.time() + self.seconds
        while not self.stop.wait(self.rng.uniform(*self.every)) and (time.time() < until or self.first):
            kind = self.first.pop(0) if self.first else self.rng.choice(FAULT_KINDS)
            if not self._inject(kind) and kind in FAULT_KINDS and kind not in self.first:
                self.first.insert(0, kind)  # nothing to hit now: try this kind again next time

    def _inject(self, kind: str) -> bool:
        # Only runners already running steps (they have worker processes): a runner still importing
        # or planning has nothing to break yet, and no signal handler.
        busy = [(p, w) for p in self.runners if p.poll() is None and (w := _workers(p.pid))]
        if not busy:
            return False
        runner, workers = self.rng.choice(busy)
        now = time.time()
        if kind == "kill_worker":
            target = self.rng.choice(workers)
            _signal(target.pid, signal.SIGKILL)
            self.faults.append(Fault(kind, target.pid, runner.pid, now))
            return True
        if kind == "skew_clock":
            with open(os.path.join(self.control, f"skew-{runner.pid}"), "w") as f:
                f.write(str(-3 * LEASE_TIMEOUT_S))
        else:
            _signal(runner.pid, signal.SIGKILL if kind == "kill_runner" else signal.SIGTERM)
        self.faults.append(Fault(kind, runner.pid, runner.pid, now))
        return True


def _workers(pid: int) -> list[psutil.Process]:
    """The LocalCluster worker processes of runner `pid`."""
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    return [c for c in children if "procpool.serve" in " ".join(_cmdline(c))]


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _start_runners(work: str, env: dict[str, str], log) -> list[subprocess.Popen]:
    cmd = [
        sys.executable,
        os.path.join(work, "soak_runner.py"),
        os.path.join(work, "control"),
        str(LEASE_TIMEOUT_S),
    ]
    return [subprocess.Popen(cmd, env=env, cwd=work, stdout=log, stderr=log) for _ in range(RUNNERS)]


def _drive(
    work: str, env: dict[str, str], chaos_s: float, seed: int, max_rounds: int, every: tuple[float, float]
) -> dict:
    """Rounds of three runners until every step is SUCCESS (chaos during the first `chaos_s` s)."""
    control = os.path.join(work, "control")
    os.makedirs(control, exist_ok=True)
    started = time.time()
    chaos = Chaos(seed, [], control, chaos_s, every) if chaos_s > 0 else None
    rounds, exits = 0, collections.Counter()
    with open(os.path.join(work, f"runners-{seed}-{chaos_s:g}.log"), "ab") as log:
        while rounds < max_rounds:
            rounds += 1
            runners = _start_runners(work, env, log)
            if chaos is not None:
                chaos.runners = runners
                if rounds == 1:
                    chaos.start()
            codes = [p.wait() for p in runners]
            exits.update(codes)
            if 0 in codes:  # a runner exits 0 only when every step of its run ended in SUCCESS
                break
    if chaos is not None:
        chaos.stop.set()
    seconds = time.time() - started
    return {
        "rounds": rounds,
        "seconds": seconds,
        "runner_exit_codes": dict(exits),
        "faults": chaos.faults if chaos else [],
    }


CHECK = textwrap.dedent('''
    """Read back the soak's outputs (in the prefix's own process environment) and check them."""
    import collections, json, math, os, sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import soak_dag
    import storage
    from marin.data.token_cache import TokenCache
    from marin.execution.artifact import read_artifact
    from marin.execution.aside import read_aside
    from marin.execution.dag import collect_dag
    from marin.execution.errors import MarinError
    from marin.execution.inputs import STAT_CACHE
    from marin.execution.provenance import verify_output
    from marin.execution.step_runner import StepRunner

    plan = StepRunner(progress=False).plan(soak_dag.declared())
    states = collections.Counter(str(s.state) for s in plan.steps)
    outputs = {s.output_path: s for s in plan.steps}


    def records(path):
        n = 0
        for f in storage.glob(path + "/*.jsonl"):
            n += sum(1 for line in storage.read_bytes(f).splitlines() if line.strip())
        return n


    def partial_reason(s):
        out, name = s.output_path, s.name
        if name.startswith("trivial/"):
            return None if storage.read_bytes(out + "/out.txt") == name.encode() else "out.txt is not the step's text"
        if name == "report":
            return None if storage.read_bytes(out + "/deps.txt") else "deps.txt is missing"
        if name.startswith("zephyr/"):
            want = soak_dag.RECORDS if name == "zephyr/numbers" else soak_dag.RECORDS // 2
            return None if records(out) == want else f"{records(out)} records, not {want}"
        if name.startswith("tokenizers/"):
            return None if storage.exists(out + "/tokenizer.json") else "tokenizer.json is missing"
        if name.startswith("tokenized/"):
            cache = TokenCache.open(out)
            docs = sum(cache.split(n).num_documents for n in cache.split_names)
            split = cache.split(cache.split_names[0])
            split.tokens(0, split.num_tokens)  # every token is there to read
            return None if docs > 0 else "no documents"
        if name.startswith("checkpoints/"):
            art = read_artifact(out)
            loss = (art.result or {}).get("final_loss") if art else None
            ok = storage.exists(out + "/hf/model.safetensors") and isinstance(loss, float) and math.isfinite(loss)
            return None if ok else "no exported model or final loss"
        return "unknown step"


    def check(s):
        try:
            manifest = verify_output(s.output_path)
            unverified = None if manifest.ok else f"{s.name}: {manifest.lines()[:3]}"
        except MarinError as e:
            unverified = f"{s.name}: {e}"
        why = partial_reason(s)
        return unverified, f"{s.name}: {why}" if why else None


    found = storage.overlapped(check, plan.steps, where=plan.prefix)  # many at once on a bucket
    unverified = [u for u, _ in found if u]
    partial = [p for _, p in found if p]

    prefix = plan.prefix
    stray = []
    for rel, _ in storage.walk_files(prefix):
        path = f"{prefix}/{rel}"
        if rel == STAT_CACHE:
            continue
        owner = next((o for o in outputs if path.startswith(o + "/")), None)
        if owner is not None:
            continue
        folder = path.rsplit("/", 1)[0]
        while folder.startswith(prefix + "/"):
            aside = read_aside(folder) if storage.exists(folder + "/.marin_aside") else None
            if aside is not None and aside.origin in outputs:
                break
            folder = folder.rsplit("/", 1)[0]
        else:
            stray.append(rel)
    print(json.dumps({
        "all_cached": states == {"cached": len(plan.steps)},
        "states": dict(states),
        "steps": len(plan.steps),
        "outputs": sorted(outputs),
        "verified": len(plan.steps) - len(unverified),
        "unverified": unverified,
        "partial": partial,
        "stray_files": stray[:20],
        "stray_count": len(stray),
    }))
''')


def _check(work: str, env: dict[str, str], *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, os.path.join(work, "soak_check.py"), *args],
        env=env, cwd=work, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the soak's check failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _completions(journal: str, faults: list[Fault]) -> dict:
    """Every output whose function reached its end more than once, and whether a fault explains it:
    its earlier completion's worker or runner was hit by the chaos once that attempt had started (or
    had its clock skewed)."""
    done: dict[str, list[tuple[float, int, int, float]]] = collections.defaultdict(list)
    starts: dict[tuple[str, int], tuple[float, int]] = {}
    with open(journal) as f:
        for line in f:
            event, path, pid, ppid, at = line.split()
            if event == "start":
                starts[path, int(pid)] = (float(at), int(ppid))
            elif event == "done":
                # A worker whose runner was killed meanwhile ends with init as its parent: its runner
                # is the parent it started under.
                started, runner = starts.get((path, int(pid)), (float(at), int(ppid)))
                done[path].append((float(at), int(pid), runner, started))
    hit = collections.defaultdict(list)  # pid -> the times a fault hit it
    for fault in faults:
        hit[fault.pid].append((fault.at, fault.kind))
        hit[fault.runner].append((fault.at, fault.kind))
    explained, unexplained = collections.Counter(), []
    for path, ends in done.items():
        ends.sort()
        for _, pid, ppid, started in ends[:-1]:
            # A kill or SIGTERM once that attempt had started (a runner killed while its worker ran
            # orphans the worker, whose end nobody records), or a skewed clock (before or after: its
            # leases go stale).
            causes = [
                k for t, k in hit.get(pid, []) + hit.get(ppid, []) if t >= started - 1.0 or k == "skew_clock"
            ]
            if causes:
                explained[causes[0]] += 1
            else:
                unexplained.append({"output": path, "ends": [[round(t, 3), p, pp] for t, p, pp, _ in ends]})
    return {
        "repeated_after_a_kill": dict(explained),
        "repeated_unexplained": [u["output"] for u in unexplained[:20]],
        "repeated_unexplained_ends": unexplained[:20],  # [time, pid, runner pid] of each end
    }


def _environment(work: str, prefix: str, extra: dict[str, str], size: Size, journal: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MARIN_CLUSTER"}
    env.update(extra)
    env.update(
        MARIN_PREFIX=prefix,
        SOAK_JOURNAL=journal,
        SOAK_TRAIN_STEPS=str(size.train_steps),
        SOAK_LAYERS=str(size.layers),
        SOAK_WIDTH=str(size.width),
        PYTHONPATH=os.pathsep.join([work, ROOT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        MARIN_TOKENIZER="demo",
    )
    return env


@dataclasses.dataclass(frozen=True)
class Size:
    """How big a soak is: the trivial steps' layers and width, the trainings' steps, the chaos."""

    layers: int = 15
    width: int = 20
    train_steps: int = 20
    chaos_s: float = 60.0
    fault_every: tuple[float, float] = (1.0, 5.0)  # seconds between faults (seeded uniform)


# The suite's version (tests/marin/execution/test_soak.py): 47 steps (40 trivial, the zephyr pair, the
# tokenizer and tokenization, two 2-step trainings, the report), a fault every 0.5-1.5 s for 6 s.
SHORT = Size(layers=5, width=8, train_steps=2, chaos_s=6.0, fault_every=(0.5, 1.5))
# The suite's default tier (its `--short` runs in the slow tier): 15 steps (8 trivial), one-step trainings,
# a fault every 0.5-1.5 s for 3 s and until each kind was injected.
TINY = Size(layers=2, width=4, train_steps=1, chaos_s=3.0, fault_every=(0.5, 1.5))


def soak(store: str, seed: int, size: Size, baseline: bool, max_rounds: int) -> dict:
    """Run the soak (and its no-chaos baseline) on `store`; the figures and the checks."""
    import contextlib

    from tests.object_stores import s3_server

    work = tempfile.mkdtemp(prefix="marin-soak-")
    try:
        for name, text in (("soak_dag.py", DAG), ("soak_runner.py", RUNNER), ("soak_check.py", CHECK)):
            with open(os.path.join(work, name), "w") as f:
                f.write(text)
        with s3_server("soak") if store == "s3" else contextlib.nullcontext() as server:

            def prefix_of(tag: str) -> str:
                return f"s3://soak/{tag}" if server is not None else os.path.join(work, tag)

            extra = server.env if server is not None else {}
            figures: dict = {}
            if baseline:
                env = _environment(work, prefix_of("quiet"), extra, size, os.path.join(work, "quiet.journal"))
                quiet = _drive(work, env, 0, seed, max_rounds, size.fault_every)
                figures["no_chaos"] = {"rounds": quiet["rounds"], "seconds": round(quiet["seconds"], 2)}
            journal = os.path.join(work, "chaos.journal")
            open(journal, "w").close()
            env = _environment(work, prefix_of("chaos"), extra, size, journal)
            run = _drive(work, env, size.chaos_s, seed, max_rounds, size.fault_every)
            checked = _check(work, env)
        repeats = _completions(journal, run["faults"])
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    steps = checked["steps"]
    faults = collections.Counter(f.kind for f in run["faults"])
    result = {
        "benchmark": "soak",
        "store": store,
        "seed": seed,
        "steps": steps,
        "runners": RUNNERS,
        "chaos_s": size.chaos_s,
        "faults_by_kind": {k: faults.get(k, 0) for k in FAULT_KINDS},
        "rounds": run["rounds"],
        "runner_exit_codes": run["runner_exit_codes"],
        "seconds": round(run["seconds"], 2),
        "steps_per_minute_chaos": round(steps / run["seconds"] * 60, 1),
        "all_success": checked["all_cached"],
        "verified": f"{checked['verified']}/{steps}",
        "unverified": checked["unverified"],
        "partial_outputs": checked["partial"],
        "stray_files": checked["stray_files"],
        "repeated_after_a_kill": repeats["repeated_after_a_kill"],
        "repeated_unexplained": repeats["repeated_unexplained"],
    }
    if "no_chaos" in figures:
        quiet_s = figures["no_chaos"]["seconds"]
        result["steps_per_minute_no_chaos"] = round(steps / quiet_s * 60, 1)
        result["no_chaos_s"] = quiet_s
        result["throughput_ratio_chaos_vs_no_chaos"] = round(quiet_s / run["seconds"], 3)
    result["invariants_hold"] = bool(
        checked["all_cached"]
        and checked["verified"] == steps
        and not checked["partial"]
        and not checked["stray_count"]
        and not repeats["repeated_unexplained"]
        and all(faults.get(k, 0) > 0 for k in FAULT_KINDS)
    )
    if result["invariants_hold"]:
        shutil.rmtree(work, ignore_errors=True)
    else:  # the journal, the runners' log and the faults stay, to find out why
        result["repeated_unexplained_ends"] = repeats["repeated_unexplained_ends"]
        result["faults"] = [[round(f.at, 3), f.kind, f.pid, f.runner] for f in run["faults"]]
        result["kept_work_folder"] = work
    result["load_average"] = load_average()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=("local", "s3"), default="local")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chaos-s", type=float, default=60.0)
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--max-rounds", type=int, default=30)
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--layers", type=int, default=15)
    parser.add_argument("--width", type=int, default=20)
    parser.add_argument(
        "--short",
        action="store_true",
        help="the suite's version (SHORT: 47 steps, 6 s of chaos), no baseline",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="the suite's default tier's version (TINY: 15 steps, 3 s of chaos), no baseline",
    )
    args = parser.parse_args()
    if args.tiny:
        size, args.no_baseline = TINY, True
    elif args.short:
        size, args.no_baseline = SHORT, True
    else:
        size = Size(args.layers, args.width, args.train_steps, args.chaos_s)
    result = soak(args.store, args.seed, size, not args.no_baseline, args.max_rounds)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
