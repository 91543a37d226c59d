"""The lm-eval-harness bridge: run harness tasks on an exported Hugging Face checkpoint, offline.

Our own tasks (`OWN_TASKS`) ship as YAML templates in `harness_tasks/`; before a run their data is
written as JSONL under the step's output and the templates are rendered to point at it, so the
harness reads only local files. Other task names go to the harness's built-in registry (which may
need the network for their datasets). Needs the `[eval]` extra.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from importlib import resources

import orjson

import storage
from marin.evaluation.errors import HarnessError
from marin.evaluation.story_endings import story_ending_items

OWN_TASKS = ("marin_story_endings", "marin_text_perplexity")
SAMPLES_PER_TASK = 100  # per-sample records kept of each task; the metrics still cover every item
SAMPLE_TEXT_CHARS = 2000  # longer strings in a kept record are cut, marked with "…"


def write_own_tasks(work_dir: str, stories: Sequence[str], num_items: int, seed: int = 0) -> str:
    """Write our tasks' JSONL data and rendered YAMLs under `work_dir`; return the task directory.

    The multiple-choice items come from `stories` (see `story_endings`); the perplexity task
    scores the same stories as whole documents.
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
    for task in OWN_TASKS:
        template = (
            resources.files("marin.evaluation").joinpath(f"harness_tasks/{task}.yaml").read_text("utf-8")
        )
        storage.write_atomic(
            storage.join(tasks_dir, f"{task}.yaml"), template.replace("{data_dir}", data_dir).encode()
        )
    return tasks_dir


def _write_jsonl(path: str, records: Sequence[dict]) -> None:
    storage.write_atomic(path, b"".join(orjson.dumps(record) + b"\n" for record in records))


def run_harness(
    hf_path: str,
    tasks: Sequence[str],
    tasks_dir: str,
    *,
    limit: int | None = None,
    batch_size: int = 8,
    seed: int = 0,
    samples_dir: str | None = None,
) -> dict[str, dict[str, float]]:
    """Run `tasks` with the harness's `hf` model on `hf_path`; return `{task: {metric: value}}`.

    The model is scored in float32 without a BOS token added to the text, as our own perplexity
    scorer does, so the two agree on the same text. With `samples_dir`, the harness's per-sample
    outputs are written there too, as `<task>.jsonl` (see `write_samples`).
    """
    try:
        import lm_eval
        from lm_eval.tasks import TaskManager
    except ImportError as e:
        raise HarnessError(
            f"harness tasks {list(tasks)} need lm-eval-harness: pip install 'marin[eval]' ({e})"
        ) from None
    import torch

    manager = TaskManager(include_path=tasks_dir, include_defaults=any(t not in OWN_TASKS for t in tasks))
    unknown = [t for t in tasks if t not in manager.all_tasks]
    if unknown:
        raise HarnessError(f"unknown harness task(s) {unknown}; our own are {list(OWN_TASKS)}")
    model_args = {
        "pretrained": hf_path,
        "dtype": "float32",
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "add_bos_token": False,
        "prefix_token_id": _prefix_token(hf_path),
    }
    output = lm_eval.simple_evaluate(
        model="hf",
        model_args=model_args,
        tasks=list(tasks),
        task_manager=manager,
        limit=limit,
        batch_size=batch_size,
        bootstrap_iters=0,
        log_samples=samples_dir is not None,
        random_seed=seed,
        numpy_random_seed=seed,
        torch_random_seed=seed,
        fewshot_random_seed=seed,
    )
    if output is None:
        raise HarnessError(f"lm-eval-harness returned no results for {list(tasks)}")
    if samples_dir is not None:
        write_samples(samples_dir, output.get("samples") or {})
    return {task: _metrics(values) for task, values in output["results"].items()}


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


def _prefix_token(hf_path: str) -> int:
    """The document-start token our own scorer uses (see `perplexity.prefix_token_id`)."""
    from transformers import AutoTokenizer

    from marin.evaluation.perplexity import prefix_token_id

    return prefix_token_id(AutoTokenizer.from_pretrained(hf_path))


def _metrics(values: dict) -> dict[str, float]:
    """`{"acc,none": 0.5, "acc_stderr,none": "N/A", "alias": ...}` -> `{"acc": 0.5}`: numbers only."""
    metrics = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        metrics[key.split(",")[0]] = float(value)
    return metrics
