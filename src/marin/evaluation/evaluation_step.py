"""The body of an evaluation step: bring the model local, score it, run harness tasks, sample, record.

`run_evaluation` is what `marin.experiment.evaluate` binds (with `functools.partial`) as a step's
`fn`. It finds its inputs through `marin.execution.context.current()` and works on any prefix:
a model export on an object store is brought to the local export cache (`export_cache`), the
harness's task files live in a local work folder, and everything the step keeps is written under
its output with `storage`:
- `results.json`: `results.EvaluationResults`, every metric a `MetricResult` (its value, interval,
  direction and aggregation), per dataset, domain, task and suite, with each task's settings, the
  model's effective config and the evaluation's config;
- `items.json`: `results.EvaluationItems`, the per-item scores behind them (what `marin compare` pairs);
- `samples.jsonl`, `harness_samples/<task>.jsonl` (the first `harness.SAMPLES_PER_TASK` items of
  each task) and `harness/` (the task files the harness ran).
It returns the summary stored in `.artifact.json`, whose `"headline"` (`{"metric", "value",
"stderr", "ci95", "n"}`) is what `marin status` / `marin info` show.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import ClassVar

import msgspec
import numpy as np
import orjson

import storage
from marin.evaluation import stats
from marin.evaluation.checkpoint import find_hf_export, load_hf_model
from marin.evaluation.documents import EvalDocument, TextDataset, read_text_dataset, read_token_cache
from marin.evaluation.errors import EvalDataError
from marin.evaluation.exact_match import ExactMatchTask
from marin.evaluation.model_source import ModelKind, ModelSource, hub_folder
from marin.evaluation.results import (
    ITEMS_FILE,
    RESULTS_FILE,
    Aggregation,
    Bootstrap,
    CheckpointPoint,
    Checkpoints,
    CurvePoint,
    DocumentItems,
    EvaluationItems,
    EvaluationResults,
    ExactMatchResult,
    ItemRecord,
    MetricResult,
    ModelRecord,
    Perplexity,
    SuiteResult,
    TaskSettings,
)
from marin.evaluation.samples import SamplingConfig, generate_samples
from marin.evaluation.suites import Aggregate, Suite, Task
from marin.execution.context import current
from marin.execution.keyed import NOT_KEY
from marin.execution.manifest import bytes_digest

SAMPLES_FILE = "samples.jsonl"
HARNESS_SAMPLES_DIR = "harness_samples"
HARNESS_DIR = "harness"


@dataclass(frozen=True)
class TokenCacheRef:
    """A tokenized dataset to evaluate on: the step that wrote the cache, and which split."""

    step_name: str
    split: str


@dataclass(frozen=True, kw_only=True)
class EvalOptions:
    """How an evaluation scores, harnesses and samples; what `evaluate()` takes besides the model and data.

    `batch_size` (documents per forward pass, and the harness's batch) changes how fast scores come,
    not the scores, so it is not part of the step's key; every other field is. `bootstrap_iters` and
    `bootstrap_seed` set the resampling behind every interval (see `marin.evaluation.stats`).
    """

    # keyed even at their defaults: these keys were published before defaults stayed out (marin.execution.keyed)
    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = (
        "harness_tasks",
        "harness_stories",
        "harness_items",
        "prompts",
        "sampling",
        "max_length",
        "max_documents",
    )

    harness_tasks: tuple[str, ...] = ()
    harness_stories: TextDataset | None = None  # None: the tail of the embedded story corpus
    harness_items: int = 50
    prompts: tuple[str, ...] = ()
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    batch_size: int = field(default=8, metadata=NOT_KEY)
    max_length: int | None = None
    max_documents: int | None = None
    limit: int | None = None  # items per harness task (None: all)
    bootstrap_iters: int = stats.ITERS
    bootstrap_seed: int = stats.SEED
    # chat prompts with known answers (marin.evaluation.exact_match)
    exact_match: ExactMatchTask | None = None

    def __post_init__(self) -> None:
        if self.exact_match is not None and not isinstance(self.exact_match, ExactMatchTask):
            raise EvalDataError(
                "exact_match must be an ExactMatchTask (marin.evaluation.exact_match), got "
                f"{type(self.exact_match).__name__}"
            )
        object.__setattr__(self, "harness_tasks", tuple(self.harness_tasks))
        object.__setattr__(self, "prompts", tuple(self.prompts))


@dataclass(frozen=True, kw_only=True)
class EvaluationConfig(EvalOptions):
    """Everything an evaluation step needs: the model, the datasets, the suite and the options.

    The step's key is `marin.execution.keyed.hash_attrs_of(config)`: every field but `batch_size`;
    a suite enters with every setting of every task.
    """

    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = (*EvalOptions.KEYED_AT_DEFAULT, "datasets")

    model: ModelSource
    datasets: tuple[TextDataset | TokenCacheRef, ...] = ()
    suite: Suite | None = None
    checkpoints: str | tuple[int, ...] | None = None  # "all" or steps: the train step's intermediate exports

    def to_json(self) -> dict:
        """The whole config as plain JSON (recorded in results.json)."""
        return orjson.loads(orjson.dumps(dataclasses.asdict(self)))

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The harness tasks to run: the suite's, then the named ones."""
        from marin.evaluation.harness import harness_tasks

        return (self.suite.tasks if self.suite is not None else ()) + harness_tasks(self.harness_tasks)


def local_model_folder(source: ModelSource, path_of) -> tuple[str, str]:
    """(a local folder holding the model's files, where they came from), fetching what is remote."""
    from marin.evaluation import export_cache

    if source.kind == ModelKind.HUB:
        return hub_folder(source), f"hf://{source.location}@{source.revision}"
    if source.kind == ModelKind.FOLDER:
        if storage.is_local(source.location):
            return storage.local_path(source.location), source.location
        return export_cache.fetch(source.location), source.location
    export = find_hf_export(source.location, path_of(source.location))
    if storage.is_local(export.path):
        return storage.local_path(export.path), export.path
    return export_cache.fetch(export.path, export.manifest, export.manifest_prefix), export.path


def run_evaluation(config: EvaluationConfig, output_path: str) -> dict:
    """Evaluate the model; write results under `output_path`; return the summary for `.artifact.json`."""
    ctx = current()
    folder, source = local_model_folder(config.model, ctx.path_of)
    scored, items = _score(config, folder, output_path, ctx.path_of, prompts=True)
    results = msgspec.structs.replace(
        scored,
        model=ModelRecord(**dataclasses.asdict(config.model), label=config.model.label()),
        hf_path=source,
        bootstrap=Bootstrap(config.bootstrap_iters, config.bootstrap_seed),
        config=config.to_json(),
        checkpoints=_score_checkpoints(config, output_path, ctx.path_of)
        if config.checkpoints is not None
        else None,
        items=ITEMS_FILE,
    )
    storage.write_many(
        [
            (storage.join(output_path, ITEMS_FILE), items.to_bytes()),
            (storage.join(output_path, RESULTS_FILE), results.to_bytes()),
        ]
    )
    return summary(results)


def _score(
    config: EvaluationConfig, folder: str, output_path: str, path_of, prompts: bool
) -> tuple[EvaluationResults, EvaluationItems]:
    """Score the model in the local `folder` on the datasets and tasks (and prompts); (results, items)."""
    loaded = load_hf_model(folder, config.max_length)
    results: dict = {"max_length": loaded.max_length}
    items: dict = {}
    docs = _documents(config, loaded.model.config.vocab_size, path_of)
    if docs:
        from marin.evaluation.perplexity import score_documents, summarize

        scores = score_documents(loaded.model, loaded.tokenizer, docs, loaded.max_length, config.batch_size)
        results["perplexity"] = Perplexity.of(
            summarize(scores, config.bootstrap_iters, config.bootstrap_seed)
        )
        items["perplexity"] = _document_items(docs, scores)
    tasks = config.tasks
    if tasks:
        _run_harness(config, tasks, loaded, output_path, results, items)
    if config.exact_match is not None:
        from marin.evaluation.exact_match import ITEMS_FILE as EXACT_MATCH_FILE
        from marin.evaluation.exact_match import score_exact_match

        scored, records = score_exact_match(
            loaded.model, loaded.tokenizer, config.exact_match, loaded.max_length
        )
        results["exact_match"] = ExactMatchResult(
            task=scored["task"],
            exact_match=_accuracy(scored["exact_match"], "exact_match"),
            by_kind={kind: _accuracy(m, "exact_match") for kind, m in scored["by_kind"].items()},
            items_path=scored["items_path"],
        )
        items["exact_match"] = {
            scored["task"]: ItemRecord(
                ids=[r["id"] for r in records], values=[float(r["correct"]) for r in records]
            )
        }
        storage.write_atomic(
            storage.join(output_path, EXACT_MATCH_FILE), b"".join(orjson.dumps(r) + b"\n" for r in records)
        )
    if prompts and config.prompts:
        results["samples"] = generate_samples(
            loaded.model, loaded.tokenizer, config.prompts, config.sampling, loaded.max_length
        )
        storage.write_atomic(
            storage.join(output_path, SAMPLES_FILE),
            b"".join(orjson.dumps(r) + b"\n" for r in results["samples"]),
        )
    return EvaluationResults(**results), EvaluationItems(**items)


def _accuracy(metric: dict, name: str) -> MetricResult:
    return MetricResult.named(stats.Metric.from_json(metric), name, Aggregation.MEAN)


def _score_checkpoints(config: EvaluationConfig, output_path: str, path_of) -> Checkpoints:
    """Score each chosen intermediate export of the train step; a curve per metric over steps and tokens.

    Each checkpoint's results and items are written under `checkpoints/step-NNNNNNNN/`.
    """
    from marin.evaluation.errors import CheckpointNotReadyError

    step = config.model.location
    train_output = path_of(step)
    exports, tokens_per_step = checkpoint_exports(step, train_output)
    wanted = sorted(exports) if config.checkpoints == "all" else list(config.checkpoints or ())
    missing = [s for s in wanted if s not in exports]
    if missing:
        raise CheckpointNotReadyError(
            f"checkpoints={list(config.checkpoints or ())}: model step {step!r} has no export of step(s) {missing}; "
            f"it exported steps {sorted(exports)} (train_lm(..., export_every=N) exports every N steps and the last)"
        )
    curves: dict[str, list[CurvePoint]] = {}
    points = []
    for number in wanted:
        url = storage.join(train_output, exports[number])
        folder = _local_export(step, train_output, url)
        where = storage.join(output_path, "checkpoints", storage.basename(exports[number]))
        results, items = _score(config, folder, where, path_of, prompts=False)
        storage.write_many(
            [
                (storage.join(where, ITEMS_FILE), items.to_bytes()),
                (storage.join(where, RESULTS_FILE), results.to_bytes()),
            ]
        )
        tokens = number * tokens_per_step if tokens_per_step else None
        points.append(
            CheckpointPoint(
                step=number, tokens=tokens, results=f"checkpoints/{storage.basename(exports[number])}"
            )
        )
        for name, point in results.curve_points(number, tokens).items():
            curves.setdefault(name, []).append(point)
    return Checkpoints(steps=wanted, points=points, curves=curves)


def checkpoint_exports(step: str, train_output: str) -> tuple[dict[int, str], int | None]:
    """The intermediate exports a train step recorded ({step: folder under its output}) and its tokens per step."""
    from marin.evaluation.errors import CheckpointNotReadyError
    from marin.execution.artifact import read_artifact

    find_hf_export(step, train_output)  # finished, with its final export
    record = read_artifact(train_output)
    result = record.result if record is not None and isinstance(record.result, dict) else {}
    exports = {int(k): v for k, v in (result.get("exports") or {}).items()}
    if not exports:
        raise CheckpointNotReadyError(
            f"model step {step!r} wrote no intermediate exports; train it with train_lm(..., export_every=N) "
            "to evaluate its checkpoints"
        )
    return exports, result.get("tokens_per_step")


def _local_export(step: str, train_output: str, url: str) -> str:
    from marin.evaluation import export_cache
    from marin.execution.artifact import read_artifact

    if storage.is_local(url):
        return storage.local_path(url)
    record = read_artifact(train_output)
    prefix = url[len(train_output.rstrip("/")) + 1 :].strip("/") + "/"
    return export_cache.fetch(url, record.files if record is not None else None, prefix)


def _run_harness(
    config: EvaluationConfig, tasks, loaded, output_path: str, results: dict, items: dict
) -> None:
    from marin.evaluation.harness import OWN_DIR, run_tasks, samples_file, write_own_tasks, write_samples

    work = tempfile.mkdtemp(prefix="marin-harness-")
    try:
        tasks_dir = os.path.join(work, "tasks")
        os.makedirs(tasks_dir)
        if any(t.harness_dir == OWN_DIR for t in tasks):
            tasks_dir = write_own_tasks(
                work, _harness_stories(config), config.harness_items, seed=config.sampling.seed
            )
        done = run_tasks(
            loaded.model,
            loaded.tokenizer,
            tasks,
            tasks_dir,
            batch_size=config.batch_size,
            seed=config.sampling.seed,
            iters=config.bootstrap_iters,
            limit=config.limit,
        )
        _keep_task_files(work, storage.join(output_path, HARNESS_DIR))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["harness"] = {
        name: {
            m: MetricResult.named(v, m, _HARNESS_AGGREGATIONS.get(r.items[m]["transform"], Aggregation.MEAN))
            for m, v in r.metrics.items()
        }
        for name, r in done.items()
    }
    results["tasks"] = {
        t.name: TaskSettings(
            harness_task=t.harness_task,
            shots=t.shots,
            format=t.format,
            metric=t.metric,
            chance=t.chance,
            dataset=t.dataset_path or t.dataset or None,
            n=next(iter(done[t.name].metrics.values())).n if done[t.name].metrics else 0,
        )
        for t in tasks
    }
    items["harness"] = {
        name: {m: ItemRecord(**record) for m, record in r.items.items()} for name, r in done.items()
    }
    written = write_samples(
        storage.join(output_path, HARNESS_SAMPLES_DIR), {name: r.samples for name, r in done.items()}
    )
    results["harness_samples"] = {task: f"{HARNESS_SAMPLES_DIR}/{samples_file(task)}" for task in written}
    if config.suite is not None:
        results["suite"] = suite_aggregate(config.suite, done, config.bootstrap_iters, config.bootstrap_seed)


_HARNESS_AGGREGATIONS = {
    "mean": Aggregation.MEAN,
    "bits_per_byte": Aggregation.RATIO,
    "weighted_perplexity": Aggregation.EXP_RATIO,
    "perplexity": Aggregation.EXP_MEAN,
}
"""How each of the harness's aggregations (an item record's `transform`) turns items into a value."""


def suite_aggregate(suite: Suite, done: dict, iters: int, seed: int) -> SuiteResult:
    """The suite's one number with its interval, from its tasks' per-item scores (see `Aggregate`)."""
    per_task = [(t, done[t.name].items[t.metric]) for t in suite.tasks]
    out = SuiteResult(name=suite.name, aggregate=suite.aggregate.value, tasks=[t.name for t in suite.tasks])
    if suite.aggregate == Aggregate.CENTRED_ACCURACY:
        metric = stats.centred_accuracy_mean(
            [(np.asarray(i["values"]), float(t.chance or 0.0)) for t, i in per_task], iters, seed
        )
        return msgspec.structs.replace(
            out, centred_accuracy=MetricResult.named(metric, "centred_accuracy", Aggregation.CENTRED_MACRO)
        )
    if suite.aggregate == Aggregate.POOLED_ACCURACY:
        metric = stats.accuracy(np.concatenate([np.asarray(i["values"]) for _, i in per_task]))
        return msgspec.structs.replace(out, acc=MetricResult.named(metric, "acc", Aggregation.MEAN))
    strata = [stats.Stratum(np.asarray(i["values"]), np.asarray(i["weights"])) for _, i in per_task]
    _, micro, macro = stats.pooled_and_mean(strata, float(per_task[0][1]["scale"]), iters, seed)
    return msgspec.structs.replace(
        out,
        bits_per_byte=MetricResult.named(micro.metric(), "bits_per_byte", Aggregation.RATIO),
        macro_bits_per_byte=MetricResult.named(macro.metric(), "macro_bits_per_byte", Aggregation.MACRO),
    )


def _keep_task_files(work: str, dest: str) -> None:
    """Copy the harness's task files and data from the local work folder to the step's output."""
    if storage.is_local(dest):
        shutil.copytree(work, storage.local_path(dest), dirs_exist_ok=True)
        return
    files = [(rel, os.path.join(work, rel)) for rel, _ in storage.walk_files(work)]
    storage.overlapped(lambda f: storage.upload(f[1], storage.join(dest, f[0])), files)


def _document_items(docs: list[EvalDocument], scores) -> dict[str, DocumentItems]:
    """Per dataset: each document's id (its index and content digest), nll, tokens and bytes."""
    out: dict[str, dict[str, list]] = {}
    index: dict[str, int] = {}
    for doc, score in zip(docs, scores, strict=True):
        i = index.get(doc.dataset, 0)
        index[doc.dataset] = i + 1
        content = (
            doc.text.encode("utf-8") if doc.text is not None else np.asarray(doc.tokens, np.int64).tobytes()
        )
        entry = out.setdefault(doc.dataset, {"ids": [], "nll": [], "tokens": [], "bytes": []})
        entry["ids"].append(f"{i}:{bytes_digest(content)[:16]}")
        entry["nll"].append(score.nll)
        entry["tokens"].append(score.tokens)
        entry["bytes"].append(score.bytes)
    return {dataset: DocumentItems(**entry) for dataset, entry in out.items()}


def summary(results: EvaluationResults) -> dict:
    """The artifact: a headline metric, the averages, per-dataset bits-per-byte, harness and suite metrics."""
    artifact: dict = {"results_path": RESULTS_FILE, "items_path": ITEMS_FILE, "hf_path": results.hf_path}
    artifact["model"] = results.model.label if results.model is not None else ""
    flat = results.flat_metrics()
    headline = None
    if results.suite is not None:
        artifact["suite"] = msgspec.to_builtins(results.suite)
        name = next(iter(results.suite.metrics()))
        headline = {"metric": f"{results.suite.name}/{name}", **results.suite.metrics()[name].to_json()}
    perplexity = results.perplexity
    if perplexity is not None:
        if headline is None:
            headline = {
                "metric": "bpb",
                **perplexity.micro.bpb.to_json(),
                "over": "micro average of all evaluation documents",
            }
        artifact["micro"] = msgspec.to_builtins(perplexity.micro)
        artifact["macro"] = msgspec.to_builtins(perplexity.macro)
        artifact["bpb"] = {name: m.bpb.to_json() for name, m in perplexity.datasets.items()}
    if results.harness:
        artifact["harness"] = msgspec.to_builtins(results.harness)
        if headline is None:
            task, metrics = next(iter(results.harness.items()))
            metric = next(
                (k for k in ("acc_norm", "acc", "bits_per_byte") if k in metrics), next(iter(metrics))
            )
            headline = {"metric": f"{task}/{metric}", **flat[f"{task}/{metric}"].to_json()}
    if results.exact_match is not None:
        artifact["exact_match"] = msgspec.to_builtins(results.exact_match)
        if headline is None:
            name = f"{results.exact_match.task}/exact_match"
            headline = {"metric": name, **flat[name].to_json()}
    if headline is not None:
        artifact["headline"] = headline
    if results.samples:
        artifact["samples_path"] = SAMPLES_FILE
    return artifact


def _documents(config: EvaluationConfig, vocab_size: int, path_of) -> list[EvalDocument]:
    docs: list[EvalDocument] = []
    for dataset in config.datasets:
        if isinstance(dataset, TextDataset):
            found = read_text_dataset(dataset)
            docs.extend(found if config.max_documents is None else found[: config.max_documents])
        else:
            docs.extend(
                read_token_cache(
                    dataset.step_name,
                    path_of(dataset.step_name),
                    dataset.split,
                    vocab_size,
                    config.max_documents,
                )
            )
    return docs


def _harness_stories(config: EvaluationConfig) -> list[str]:
    """Texts for our own harness tasks: the given dataset, else held-out stories of the embedded corpus."""
    if config.harness_stories is not None:
        return [d.text for d in read_text_dataset(config.harness_stories)]
    from marin.data.corpus import CORPUS_SIZE, stories

    return [str(s) for s in stories(CORPUS_SIZE - config.harness_items, CORPUS_SIZE)]
