"""The lm-eval-harness bridge: run harness tasks on a loaded Hugging Face model, every number with its interval.

Our own tasks (`OWN_TASKS`) ship as YAML files in `harness_tasks/`; before a run their data is
written as JSONL in a local work folder beside them, which they name by relative paths, so the
harness reads only local files and the folder kept with the output reruns as it is. Suite tasks
(`marin.evaluation.suites`) and other names go to the harness's own task folders (their datasets
come from the hub unless a task's `dataset_path` points elsewhere). Needs the `[eval]` extra.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np
import orjson

import storage
from marin.evaluation import stats
from marin.evaluation.errors import HarnessError
from marin.evaluation.score_cache import ScoreCache, item_key
from marin.evaluation.story_endings import story_ending_items
from marin.evaluation.suites import Task

OWN_DIR = "marin"  # a Task's harness_dir for our own tasks: the rendered templates of this run
_TASK_LINE = re.compile(r"^['\"]?task['\"]?:\s*['\"]?([A-Za-z0-9_.-]+)['\"]?\s*$", re.MULTILINE)

OWN_TASKS = ("marin_story_endings", "marin_text_perplexity")  # loss-based: these run in the training loop too
GENERATION_TASKS = ("marin_next_word",)  # exact match of generated text
ALL_OWN_TASKS = OWN_TASKS + GENERATION_TASKS
SAMPLES_PER_TASK = 100  # per-sample records kept of each task; the metrics still cover every item
SAMPLE_TEXT_CHARS = 2000  # longer strings in a kept record are cut, marked with "…"
CHUNK_BATCHES = 4  # harness requests per cached chunk, in batches: what a kill can lose at most
TASK_DATA_MODULE = "marin_task_data.py"  # our tasks' data loader, kept beside their YAMLs


def write_own_tasks(work_dir: str, stories: Sequence[str], num_items: int, seed: int = 0) -> str:
    """Write our tasks' JSONL data (`data/`) and YAMLs (`tasks/`) under `work_dir`; return the task directory.

    The multiple-choice items come from `stories` (see `story_endings`); the perplexity task
    scores the same stories as whole documents; the generation task asks for the last word of each
    story's first sentence (`next_word_items`). The YAMLs name their data by relative paths, read by
    `tasks/marin_task_data.py` (copied beside them), so the folder is self-contained: kept with an
    evaluation's output, `lm_eval` runs it as it is, and no run writes to the datasets cache.
    """
    if not storage.is_local(work_dir):
        raise HarnessError(f"lm-eval-harness reads local files only; {work_dir} is not a local path")
    data_dir = storage.join(work_dir, "data")
    tasks_dir = storage.join(work_dir, "tasks")
    storage.makedirs(data_dir)
    storage.makedirs(tasks_dir)
    _write_jsonl(
        storage.join(data_dir, "marin_story_endings.jsonl"), story_ending_items(stories, num_items, seed=seed)
    )
    _write_jsonl(
        storage.join(data_dir, "marin_text_perplexity.jsonl"), [{"text": s} for s in stories[:num_items]]
    )
    _write_jsonl(storage.join(data_dir, "marin_next_word.jsonl"), next_word_items(stories[:num_items]))
    own = resources.files("marin.evaluation").joinpath("harness_tasks")
    for name in [f"{task}.yaml" for task in ALL_OWN_TASKS] + [TASK_DATA_MODULE]:
        storage.write_atomic(storage.join(tasks_dir, name), own.joinpath(name).read_bytes())
    return tasks_dir


def next_word_items(stories: Sequence[str]) -> list[dict]:
    """`{"context", "target"}` per story: its first sentence but the last word, then that word."""
    items = []
    for story in stories:
        words = re.split(r"(?<=[.!?])\s", story.strip(), maxsplit=1)[0].rstrip(".!?").split()
        if len(words) >= 3:
            items.append({"context": " ".join(words[:-1]) + " ", "target": words[-1].strip(",;:\"'")})
    return items


def _write_jsonl(path: str, records: Sequence[dict]) -> None:
    storage.write_atomic(path, b"".join(orjson.dumps(record) + b"\n" for record in records))


@dataclass(frozen=True)
class TaskResult:
    """One task's scores: a metric object per metric, the per-item scores behind them, and the raw rows."""

    metrics: dict[str, stats.Metric]
    items: dict[str, dict]  # metric -> {"ids", "values", "weights" (or None), "scale"}
    samples: list[dict]
    harness: dict[str, float | None]  # the harness's own value and stderr, "metric" / "metric_stderr"


def harness_tasks(names: Sequence[str]) -> tuple[Task, ...]:
    """Tasks for plain harness task names: our own (with their format and metric) or the harness's."""
    from marin.evaluation.suites import PromptFormat

    own = {
        "marin_story_endings": (PromptFormat.CLOZE, "acc", 0.25),
        "marin_text_perplexity": (PromptFormat.PERPLEXITY, "bits_per_byte", 0.0),
        "marin_next_word": (PromptFormat.GENERATION, "exact_match", 0.0),
    }
    tasks = []
    for name in names:
        fmt, metric, chance = own.get(name, (None, None, None))
        tasks.append(Task(name, name, OWN_DIR if name in own else "", None, fmt, metric, chance, ""))
    return tuple(tasks)


def run_tasks(
    model,
    tokenizer,
    tasks: Sequence[Task],
    tasks_dir: str,
    *,
    batch_size: int = 8,
    seed: int = 0,
    iters: int = stats.ITERS,
    limit: int | None = None,
    distributed: bool = False,
    cache: ScoreCache | None = None,
    model_id: str = "",
    generate: Callable[..., list[list[int]]] | None = None,
) -> dict[str, TaskResult]:
    """Score `tasks` with lm-eval-harness's `HFLM` over the loaded `model`; return each task's result.

    `tasks_dir` is a local folder holding our own tasks' rendered YAMLs (`write_own_tasks`); every
    other task gets a YAML there too (`write_task_files`) that includes the harness's own and sets
    its name, shots and dataset path, so the harness indexes only this folder. The model is scored
    in float32 without a BOS token added to the text, as our own perplexity scorer does. The harness
    runs with its bootstrap on (`iters` resamples) and every item logged; each metric becomes a
    metric object computed from the per-item scores (`item_metric`), which equals the harness's
    value and, where the harness gives one, its stderr.

    `distributed=True`, called by every rank of a torch.distributed group that each holds `model`:
    the ranks share the items (the harness gives rank r every world_size-th item of a task and
    gathers the scored items to rank 0), and rank 0 returns what one process would (the metrics
    come from the per-item scores in item order); the other ranks return {}. A task with few-shot
    examples is scored on rank 0 alone, since the harness draws every item's examples from one
    generator in item order, and sharing its items would change which examples each item sees.

    `cache` (a step's `ScoreCache`, with the `model_id` its keys start with): every request the
    harness makes goes through it (`_cached_lm_class`), so a resumed or extended evaluation asks the
    model only for what is not cached. `generate`, our own layers' token generator for a model we
    trained (`marin.evaluation.generation`), answers greedy `generate_until` requests in place of
    Hugging Face's `generate`, with the same text.
    """
    try:
        import lm_eval  # noqa: F401
        from lm_eval.tasks import TaskManager
    except ImportError as e:
        raise HarnessError(
            f"harness tasks {[t.name for t in tasks]} need lm-eval-harness: pip install 'marin[eval]' ({e})"
        ) from None

    write_task_files(tasks, tasks_dir)
    manager = TaskManager(include_defaults=False, include_path=tasks_dir)
    rank, world = _ranks() if distributed else (0, 1)
    names = [t.name for t in tasks]
    # The harness's bootstrap in this process: it is the cheap part. And LOCAL_RANK 0 while it runs as
    # one process: it returns results only there, and each process of an evaluation sharing its items
    # through the score cache (a local gang, LOCAL_RANK set) runs the harness as if alone.
    saved = {name: os.environ.get(name) for name in ("DISABLE_MULTIPROC", "LOCAL_RANK")}
    os.environ["DISABLE_MULTIPROC"] = "1"
    if world == 1:
        os.environ["LOCAL_RANK"] = "0"
    try:
        if world == 1:
            lm = _lm(model, tokenizer, batch_size)
            if cache is not None or generate is not None:
                settings = {"max_length": lm.max_length, "prefix": lm.prefix_token_id, "add_bos": False}
                chunk = max(1, batch_size) * CHUNK_BATCHES
                lm = _cached_lm_class()(lm, cache or ScoreCache(None), model_id, settings, chunk, generate)
            output = _evaluate(lm, names, manager, limit, iters, seed)
        else:
            loaded = manager.load(names)["tasks"]
            shared = [loaded[n] for n in names if not loaded[n].get_config("num_fewshot")]
            alone = [loaded[n] for n in names if loaded[n].get_config("num_fewshot")]
            outputs = []
            if shared:
                lm = _lm(model, tokenizer, batch_size, ranks=(rank, world))
                outputs.append(_evaluate(lm, shared, manager, limit, iters, seed))
            if alone and rank == 0:
                outputs.append(
                    _evaluate(_lm(model, tokenizer, batch_size), alone, manager, limit, iters, seed)
                )
            if rank != 0:
                return {}
            output = {
                k: {n: v for o in outputs for n, v in o[k].items()} for k in ("results", "samples", "configs")
            }
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    if output is None:
        raise HarnessError(f"lm-eval-harness returned no results for {names}")
    return {
        t.name: _task_result(
            output["results"][t.name],
            output["samples"][t.name],
            _aggregations(output["configs"][t.name]),
            iters,
            seed,
        )
        for t in tasks
    }


def _evaluate(lm, tasks: list, manager, limit: int | None, iters: int, seed: int) -> dict | None:
    """`lm_eval.simple_evaluate` of `tasks` (names or the harness's task objects), every item logged."""
    import lm_eval
    import lm_eval.evaluator

    from marin.execution.run_provenance import experiment_commit

    # The harness records the commit by running `git describe` with its errors on the terminal
    # (`fatal: not a git repository` outside a checkout): the experiment's commit, read quietly.
    lm_eval.evaluator.get_git_commit_hash = experiment_commit
    # Its results also get torch's environment report (`collect_env`: about ten subprocesses, pip
    # and nvidia-smi among them), which we do not keep: seconds of every evaluation on a busy machine.
    lm_eval.evaluator.add_env_info = _add_versions

    return lm_eval.simple_evaluate(
        model=lm,
        tasks=tasks,
        task_manager=manager,
        limit=limit,
        bootstrap_iters=iters,
        log_samples=True,
        random_seed=seed,
        numpy_random_seed=seed,
        torch_random_seed=seed,
        fewshot_random_seed=seed,
    )


def _add_versions(results: dict) -> None:
    """What the harness's `add_env_info` records that costs nothing: the library versions."""
    from importlib.metadata import version

    results["transformers_version"] = version("transformers")
    results["lm_eval_version"] = version("lm_eval")


def _ranks() -> tuple[int, int]:
    """(rank, world size) of the running torch.distributed group, (0, 1) without one."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


def _lm(model, tokenizer, batch_size: int, ranks: tuple[int, int] = (0, 1)):
    """The harness's `HFLM` over the loaded model; with `ranks` (rank, world size), one that shares
    the items with the other ranks (`_lm_class`)."""
    from marin.evaluation.perplexity import prefix_token_id

    lm = _lm_class()(
        pretrained=model,
        tokenizer=tokenizer,
        batch_size=batch_size,
        add_bos_token=False,
        prefix_token_id=prefix_token_id(tokenizer),
    )
    lm._rank, lm._world_size = ranks
    return lm


@functools.cache
def _lm_class():
    """HFLM whose collectives go through torch.distributed's running group.

    HFLM runs data-parallel only under `accelerate launch`, with a model it loads itself; over a
    model we hand it, it is one process. The harness's evaluator shards and gathers through the
    LM's `rank`, `world_size`, `all_gather`, `gather_object` and `barrier`, which here are the
    group's (object collectives, so CPU tensors go over gloo and NCCL alike).
    """
    import torch
    import torch.distributed as dist
    from lm_eval.models.huggingface import HFLM

    class GroupHFLM(HFLM):
        def all_gather(self, tensor):
            if self.world_size <= 1:
                return tensor
            parts: list = [None] * self.world_size
            dist.all_gather_object(parts, tensor.detach().cpu().reshape(-1))
            return torch.cat(parts).to(tensor.device)

        def gather_object(self, obj, dst=0):
            if self.world_size <= 1:
                return [obj]
            parts: list = [None] * self.world_size
            dist.all_gather_object(parts, obj)
            return parts if self.rank == dst else None

        def barrier(self):
            if self.world_size > 1:
                dist.barrier()

    return GroupHFLM


@functools.cache
def _cached_lm_class():
    """An lm-eval `LM` that answers each request from a `ScoreCache`, asking the wrapped LM only for
    the rest (lm-eval's own `CachingLM` keys by the request alone, keeps one SQLite file per rank on
    local disk, and commits every answer; this one keys by the model too, writes parts to the step's
    output, and scores in fixed chunks so any number of processes resume each other's work)."""
    from lm_eval.api.model import LM

    class CachedLM(LM):
        def __init__(self, inner, cache: ScoreCache, model_id: str, settings: dict, chunk: int, generate):
            super().__init__()
            self.inner, self.score_cache, self.model_id = inner, cache, model_id
            self.settings, self.chunk, self.generate = settings, chunk, generate

        def __getattr__(self, name: str):  # what the harness asks of the model besides requests
            if name == "inner":
                raise AttributeError(name)
            return getattr(self.inner, name)

        def loglikelihood(self, requests, disable_tqdm: bool = False):
            return [tuple(v) for v in self._through("loglikelihood", requests)]

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
            return self._through("loglikelihood_rolling", requests)

        def generate_until(self, requests, disable_tqdm: bool = False):
            if any(_sampled(r.args[1]) for r in requests):  # draws are not cached: each is new
                return self.inner.generate_until(requests, disable_tqdm=True)
            return self._through("generate_until", requests)

        def _through(self, method: str, requests) -> list:
            args = [r.args for r in requests]
            settings = {**self.settings, "generator": "marin" if self.generate else "hf"}
            keys = [item_key(self.model_id, settings, method, _plain(a)) for a in args]
            # a fixed order over every request: longest first, ties by key (never by what is cached)
            order = sorted(
                range(len(args)), key=lambda i: (-sum(len(a) for a in args[i] if isinstance(a, str)), keys[i])
            )

            def compute(indices: list[int]) -> list:
                if method == "generate_until" and self.generate is not None:
                    from marin.evaluation.generation import generate_until

                    return generate_until(
                        self.inner, self.generate, [args[i] for i in indices], self.inner.batch_size
                    )
                out = getattr(self.inner, method)([requests[i] for i in indices], disable_tqdm=True)
                return [list(v) if isinstance(v, tuple) else v for v in out]

            return self.score_cache.score(keys, order, self.chunk, compute)

    return CachedLM


def _sampled(gen_kwargs) -> bool:
    return (
        isinstance(gen_kwargs, dict)
        and bool(gen_kwargs.get("do_sample"))
        and gen_kwargs.get("temperature", 1) != 0
    )


def _plain(value):
    """A request's arguments as JSON (tuples as lists, keys as strings), for its cache key."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value if isinstance(value, str | int | float | bool | None) else repr(value)


def write_task_files(tasks: Sequence[Task], tasks_dir: str) -> None:
    """For each task not our own, `<tasks_dir>/<name>.yaml`: the harness's YAML included, then our
    name, shots and dataset path over it."""
    for task in tasks:
        if task.harness_dir == OWN_DIR:
            if task.name != task.harness_task or task.shots is not None:
                raise HarnessError(
                    f"our own task {task.harness_task!r} runs under its own name at its own shots"
                )
            continue
        source = harness_yaml(task)
        config: dict = {"include": source, "task": task.name}
        if task.shots is not None:
            config["num_fewshot"] = task.shots
        if task.dataset_path is not None:
            config["dataset_path"] = task.dataset_path
        config.update(task.overrides)
        storage.write_atomic(storage.join(tasks_dir, f"{task.name}.yaml"), _yaml(config))


def _yaml(config: dict) -> bytes:
    """A flat mapping as YAML (JSON strings are YAML scalars)."""
    return "".join(f"{k}: {orjson.dumps(v).decode()}\n" for k, v in config.items()).encode()


def harness_yaml(task: Task) -> str:
    """The harness's YAML file that declares `task.harness_task` (in `task.harness_dir` when given)."""
    import lm_eval.tasks

    root = os.path.dirname(lm_eval.tasks.__file__)
    found = _task_files(os.path.join(root, task.harness_dir) if task.harness_dir else root).get(
        task.harness_task
    )
    if found is None:
        raise HarnessError(
            f"unknown harness task {task.harness_task!r}: no YAML of lm-eval-harness "
            f"{'in ' + task.harness_dir + ' ' if task.harness_dir else ''}declares it; our own tasks are "
            f"{list(OWN_TASKS)}, the suites' are in marin.evaluation.suites.SUITES"
        )
    return found


@functools.lru_cache(maxsize=64)
def _task_files(folder: str) -> dict[str, str]:
    """Each task name the YAML files under `folder` declare (`task: NAME`), and its file: a text scan,
    far cheaper than the harness's own index of all its tasks."""
    found: dict[str, str] = {}
    for parent, _, files in sorted(os.walk(folder)):
        for name in sorted(files):
            if not name.endswith((".yaml", ".yml")):
                continue
            try:
                with open(os.path.join(parent, name), encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            for match in _TASK_LINE.finditer(text):
                found.setdefault(match.group(1), os.path.join(parent, name))
    return found


def known_harness_tasks() -> list[str]:
    """Every task name the harness's YAML files declare (for suggestions)."""
    import lm_eval.tasks

    return sorted(_task_files(os.path.dirname(lm_eval.tasks.__file__)))


def _aggregations(config: dict) -> dict[str, str]:
    """Each metric's aggregation: as the task's config names it, else the harness's default for the metric."""
    from lm_eval.api.registry import get_metric_aggregation

    out = {}
    for entry in config.get("metric_list") or ():
        aggregation = entry.get("aggregation")
        if not isinstance(aggregation, str):
            default = get_metric_aggregation(entry["metric"])
            aggregation = getattr(default, "__name__", "mean") if default is not None else "mean"
        out[entry["metric"]] = aggregation
    return out


def _task_result(
    values: dict, rows: list[dict], aggregations: dict[str, str], iters: int, seed: int
) -> TaskResult:
    rows = sorted(rows, key=lambda r: r["doc_id"])
    ids = [f"{r['doc_id']}:{str(r.get('doc_hash', ''))[:16]}" for r in rows]
    metrics: dict[str, stats.Metric] = {}
    items: dict[str, dict] = {}
    harness: dict[str, float | None] = {}
    names = list(dict.fromkeys(m for r in rows for m in r.get("metrics") or ()))
    for name in names:
        per_item = [r[name] for r in rows]
        metric, item_scores = item_metric(name, aggregations.get(name, "mean"), per_item, iters, seed)
        metrics[name] = metric
        items[name] = {"ids": ids, **item_scores}
        harness[name] = _number(values.get(f"{name},none"))
        harness[f"{name}_stderr"] = _number(values.get(f"{name}_stderr,none"))
    return TaskResult(metrics, items, rows, harness)


def item_metric(
    name: str, aggregation: str, per_item: list, iters: int, seed: int
) -> tuple[stats.Metric, dict]:
    """A metric object from one metric's per-item values, aggregated as the harness aggregates them.

    - `mean` of 0/1 items: an accuracy (Wilson interval, the harness's stderr); of other values: a mean;
    - `bits_per_byte` of (loglikelihood, bytes) pairs: a ratio bootstrapped over items;
    - `weighted_perplexity` of (loglikelihood, weight) pairs: exp of the ratio, bootstrapped;
    - `perplexity` of loglikelihoods: exp of minus their mean, bootstrapped (the harness's own draws).
    Returns the metric and the per-item scores (`values`, `weights`, `scale`) a paired test needs.
    """
    if aggregation in ("bits_per_byte", "weighted_perplexity"):
        pairs = np.asarray(per_item, dtype=np.float64).reshape(-1, 2)
        nll, weights = -pairs[:, 0], pairs[:, 1]
        if aggregation == "bits_per_byte":
            scale = 1 / math.log(2)
            metric = stats.ratio_estimate(nll, weights, scale, iters, seed).metric()
        else:
            scale = 1.0
            metric = stats.ratio_estimate(nll, weights, 1.0, iters, seed).map(np.exp).metric()
        return metric, {
            "values": nll.tolist(),
            "weights": weights.tolist(),
            "scale": scale,
            "transform": aggregation,
        }
    values = np.asarray(per_item, dtype=np.float64)
    if aggregation == "perplexity":
        metric = stats.mean_estimate(-values, iters, seed).map(np.exp).metric()
        return metric, {
            "values": (-values).tolist(),
            "weights": None,
            "scale": 1.0,
            "transform": "perplexity",
        }
    if aggregation != "mean":
        raise HarnessError(f"metric {name!r}: aggregation {aggregation!r} has no interval here yet")
    binary = bool(np.all((values == 0) | (values == 1)))
    metric = stats.accuracy(values) if binary else stats.mean(values, iters, seed)
    return metric, {"values": values.tolist(), "weights": None, "scale": 1.0, "transform": "mean"}


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def samples_file(task: str) -> str:
    """The file name of a task's per-sample outputs: `<task>.jsonl`, the name kept to [A-Za-z0-9_.-]."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", task) + ".jsonl"


def write_samples(
    samples_dir: str,
    samples: dict[str, list[dict]],
    per_task: int = SAMPLES_PER_TASK,
    text_chars: int = SAMPLE_TEXT_CHARS,
) -> dict[str, str]:
    """Write the first `per_task` samples of each task to `samples_dir/<task>.jsonl`; return the file names.

    A record keeps what the harness saw and answered: `doc_id`, `doc`, `target`, the request
    `arguments`, the filtered `response` and the sample's `metrics`; strings are cut at `text_chars`.
    Hashes and the raw responses are left out.
    """
    storage.makedirs(samples_dir)
    files = {}
    for task, rows in samples.items():
        records = [_sample_record(row, text_chars) for row in rows[:per_task]]
        files[task] = samples_file(task)
        storage.write_atomic(
            storage.join(samples_dir, files[task]),
            b"".join(
                orjson.dumps(r, default=str, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n" for r in records
            ),
        )
    return files


def _sample_record(row: dict, text_chars: int) -> dict:
    record = {k: row.get(k) for k in ("doc_id", "doc", "target", "arguments")}
    record["response"] = row.get("filtered_resps")
    record["metrics"] = {m: row.get(m) for m in row.get("metrics") or () if m in row}
    return _clip(record, text_chars)


def _clip(value, text_chars: int):
    if isinstance(value, str):
        return value if len(value) <= text_chars else value[:text_chars] + "…"
    if isinstance(value, dict):
        return {str(k): _clip(v, text_chars) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clip(v, text_chars) for v in value]
    return value
