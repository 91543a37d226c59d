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
- `documents.jsonl`: each document's scores (`document_scores`), for a researcher's own analysis;
- `score_cache/`: every scored item (`score_cache`), so a killed run resumes and a rerun with more
  items or checkpoints scores only the new ones;
- `samples.jsonl`, `harness_samples/<task>.jsonl` (the first `harness.SAMPLES_PER_TASK` items of
  each task) and `harness/` (the task files the harness ran).
It returns the summary stored in `.artifact.json`, whose `"headline"` (`{"metric", "value",
"stderr", "ci95", "n"}`) is what `marin status` / `marin info` show.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec
import numpy as np
import orjson

import storage
from marin.evaluation import stats
from marin.evaluation.checkpoint import find_hf_export, load_hf_model
from marin.evaluation.contamination import ContaminationConfig
from marin.evaluation.document_scores import (
    DOCUMENTS_FILE,
    DocumentScoreRecord,
    document_records,
    write_document_scores,
)
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
    ContaminationItems,
    CurvePoint,
    DocumentItems,
    EvaluationItems,
    EvaluationResults,
    ExactMatchResult,
    ItemRecord,
    MetricResult,
    ModelRecord,
    Perplexity,
    ScoreCacheCounts,
    SuiteResult,
    TaskSettings,
)
from marin.evaluation.samples import SamplingConfig, generate_samples
from marin.evaluation.score_cache import (
    CACHE_DIR,
    DEFAULT_FLUSH_S,
    Ranks,
    ScoreCache,
    model_identity,
    sibling_caches,
    torch_ranks,
)
from marin.evaluation.suites import Aggregate, Suite, Task
from marin.execution.context import current
from marin.execution.keyed import NOT_KEY

SAMPLES_FILE = "samples.jsonl"
HARNESS_SAMPLES_DIR = "harness_samples"
HARNESS_DIR = "harness"
HARNESS_WORK_PREFIX = "marin-harness-"  # the local work folder of a run: never named in a kept file


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
    # each item's overlap with the model's training data (marin.evaluation.contamination)
    contamination: bool | ContaminationConfig | None = None
    # processes that score side by side (a device each where there are GPUs); any number resumes any other's
    num_processes: int = field(default=1, metadata=NOT_KEY)
    # the longest a scored item waits before it is written to the score cache (what a kill can lose)
    score_flush_s: float = field(default=DEFAULT_FLUSH_S, metadata=NOT_KEY)

    def __post_init__(self) -> None:
        if self.exact_match is not None and not isinstance(self.exact_match, ExactMatchTask):
            raise EvalDataError(
                "exact_match must be an ExactMatchTask (marin.evaluation.exact_match), got "
                f"{type(self.exact_match).__name__}"
            )
        object.__setattr__(self, "harness_tasks", tuple(self.harness_tasks))
        object.__setattr__(self, "prompts", tuple(self.prompts))
        if self.contamination is True:
            object.__setattr__(self, "contamination", ContaminationConfig())
        elif self.contamination is False:
            object.__setattr__(self, "contamination", None)
        if self.contamination is not None and not isinstance(self.contamination, ContaminationConfig):
            raise EvalDataError(
                "contamination must be True or a ContaminationConfig (marin.evaluation.contamination), got "
                f"{type(self.contamination).__name__}"
            )
        if (
            isinstance(self.num_processes, bool)
            or not isinstance(self.num_processes, int)
            or self.num_processes < 1
        ):
            raise EvalDataError(f"num_processes must be a positive int, got {self.num_processes!r}")


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
    # (local model folder, device) -> greedy generation in our own layers, for a model we trained: given by
    # marin.experiment, which sees both training and evaluation; None: Hugging Face's generate
    generator: Callable[[str, str], Any] | None = field(default=None, metadata=NOT_KEY, compare=False)

    def to_json(self) -> dict:
        """The whole config as plain JSON (recorded in results.json)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "generator"}
        return orjson.loads(orjson.dumps(fields, default=_plain_json))

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The harness tasks to run: the suite's, then the named ones."""
        from marin.evaluation.harness import harness_tasks

        return (self.suite.tasks if self.suite is not None else ()) + harness_tasks(self.harness_tasks)


@dataclass(frozen=True)
class ModelFiles:
    """A model to score, brought local: its folder, where it came from, and its identity (the digest of
    its files, which its cached scores are keyed by)."""

    folder: str
    source: str
    identity: str


@dataclass(frozen=True)
class CheckpointFiles:
    """One intermediate export of the train step to score: its step, tokens seen, files and results folder."""

    step: int
    tokens: int | None
    model: ModelFiles
    results: str  # folder under the step's output, e.g. "checkpoints/step-00000010"


@dataclass(frozen=True)
class Resolved:
    """What the step resolved before scoring (from its context and its dependencies' outputs), so that
    every scoring process works from the same plain paths."""

    model: ModelFiles
    token_caches: dict[str, str]  # step name -> output path
    checkpoints: tuple[CheckpointFiles, ...] = ()
    lineage: tuple[str, ...] = ()  # token caches the model was trained on (contamination)


def local_model_folder(source: ModelSource, path_of) -> tuple[str, str]:
    """(a local folder holding the model's files, where they came from), fetching what is remote."""
    files = model_files(source, path_of)
    return files.folder, files.source


def model_files(source: ModelSource, path_of) -> ModelFiles:
    """The model brought local (a hub snapshot, the export cache for a remote folder), with its identity."""
    from marin.evaluation import export_cache

    if source.kind == ModelKind.HUB:
        folder = hub_folder(source)
        return ModelFiles(folder, f"hf://{source.location}@{source.revision}", model_identity(folder))
    if source.kind == ModelKind.FOLDER:
        folder = (
            storage.local_path(source.location)
            if storage.is_local(source.location)
            else export_cache.fetch(source.location)
        )
        return ModelFiles(folder, source.location, model_identity(folder))
    export = find_hf_export(source.location, path_of(source.location))
    if storage.is_local(export.path):
        folder = storage.local_path(export.path)
    else:
        folder = export_cache.fetch(export.path, export.manifest, export.manifest_prefix)
    return ModelFiles(folder, export.path, model_identity(folder, export.manifest, export.manifest_prefix))


def resolve(config: EvaluationConfig, path_of) -> Resolved:
    """The model's local files, the token caches' paths, the chosen checkpoints (refused, naming the
    exports there are, when one is missing) and the model's training data when contamination is asked."""
    model = model_files(config.model, path_of)
    caches = {d.step_name: path_of(d.step_name) for d in config.datasets if isinstance(d, TokenCacheRef)}
    checkpoints = _checkpoint_files(config, path_of) if config.checkpoints is not None else ()
    lineage: tuple[str, ...] = ()
    if config.contamination is not None:
        from marin.evaluation.contamination import training_token_caches

        lineage = training_token_caches(config.model, path_of)
    return Resolved(model, caches, checkpoints, lineage)


def run_evaluation(config: EvaluationConfig, output_path: str) -> dict:
    """Evaluate the model; write results under `output_path`; return the summary for `.artifact.json`.

    With `num_processes` > 1 the scoring runs as that many processes of this machine (one torch.distributed
    group, a device each when there are GPUs) sharing the items through the score cache; the first
    writes the results.
    """
    resolved = resolve(config, current().path_of)
    run_id = uuid.uuid4().hex[:12]
    processes = max(1, config.num_processes)
    if processes == 1:
        return _evaluate(config, output_path, resolved, run_id, Ranks())
    import torch

    from fray.cluster import run_as_local_gang

    threads = max(1, torch.get_num_threads() // processes)
    return run_as_local_gang(
        functools.partial(_evaluate_as_rank, config, output_path, resolved, run_id, threads), processes
    )


def _evaluate_as_rank(
    config: EvaluationConfig, output_path: str, resolved: Resolved, run_id: str, threads: int
):
    """One process of a multi-process evaluation: join the group, take a device, score, leave."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group("gloo")
    try:
        return _evaluate(config, output_path, resolved, run_id, torch_ranks())
    finally:
        dist.destroy_process_group()


def _evaluate(config: EvaluationConfig, output_path: str, resolved: Resolved, run_id: str, ranks: Ranks):
    """Score the model (and its checkpoints) through the step's score cache; rank 0 writes the results."""
    cache = ScoreCache(
        storage.join(output_path, CACHE_DIR),
        sources=sibling_caches(output_path),
        ranks=ranks,
        run_id=run_id,
        flush_s=config.score_flush_s,
    )
    writer = ranks.rank == 0
    scored = _score(config, resolved.model, output_path, resolved, cache, writer, prompts=True)
    checkpoints = (
        _score_checkpoints(config, output_path, resolved, cache, writer)
        if config.checkpoints is not None
        else None
    )
    cache.compact()
    if not writer:
        return None
    results = msgspec.structs.replace(
        scored.results,
        model=ModelRecord(**dataclasses.asdict(config.model), label=config.model.label()),
        hf_path=resolved.model.source,
        bootstrap=Bootstrap(config.bootstrap_iters, config.bootstrap_seed),
        config=config.to_json(),
        checkpoints=checkpoints,
        items=ITEMS_FILE,
        score_cache=ScoreCacheCounts(folder=CACHE_DIR, **cache.counts.to_json()),
    )
    _write_scored(output_path, scored)
    storage.write_atomic(storage.join(output_path, RESULTS_FILE), results.to_bytes())
    return summary(results)


@dataclass(frozen=True)
class Scored:
    """What scoring one model gives: the results, the per-item scores, and each document's scores."""

    results: EvaluationResults
    items: EvaluationItems
    documents: list[DocumentScoreRecord] = field(default_factory=list)


def _write_scored(folder: str, scored: Scored) -> None:
    """The per-item scores and the documents' (`documents.jsonl`) of one model, under `folder`."""
    storage.makedirs(folder)
    storage.write_atomic(storage.join(folder, ITEMS_FILE), scored.items.to_bytes())
    if scored.documents:
        write_document_scores(folder, scored.documents)


def _score(
    config: EvaluationConfig,
    model: ModelFiles,
    output_path: str,
    resolved: Resolved,
    cache: ScoreCache,
    writer: bool,
    prompts: bool,
) -> Scored:
    """Score the model in `model.folder` on the datasets and tasks (and prompts) through `cache`.

    Every process scores its share; the `writer` (rank 0) alone writes files under `output_path`.
    """
    loaded = load_hf_model(model.folder, config.max_length)
    results: dict = {"max_length": loaded.max_length}
    items: dict = {}
    documents: list[DocumentScoreRecord] = []
    harness: dict = {}
    generate = _lazy_generator(config.generator, model.folder, str(loaded.model.device))
    docs = _documents(config, loaded.model.config.vocab_size, resolved.token_caches)
    if docs:
        from marin.evaluation.perplexity import score_documents, summarize

        scores = score_documents(
            loaded.model,
            loaded.tokenizer,
            docs,
            loaded.max_length,
            config.batch_size,
            cache=cache,
            model_id=model.identity,
        )
        results["perplexity"] = Perplexity.of(
            summarize(scores, config.bootstrap_iters, config.bootstrap_seed)
        )
        items["perplexity"] = _document_items(docs, scores)
        documents = document_records(docs, scores)
        results["documents"] = DOCUMENTS_FILE
    tasks = config.tasks
    if tasks:
        harness = _run_harness(
            config, tasks, loaded, output_path, results, items, cache, model.identity, generate, writer
        )
    if config.exact_match is not None:
        from marin.evaluation.exact_match import ITEMS_FILE as EXACT_MATCH_FILE
        from marin.evaluation.exact_match import score_exact_match

        matched, records = score_exact_match(
            loaded.model,
            loaded.tokenizer,
            config.exact_match,
            loaded.max_length,
            cache=cache,
            model_id=model.identity,
            generate=generate,
            batch_size=config.batch_size,
        )
        results["exact_match"] = ExactMatchResult(
            task=matched["task"],
            exact_match=_accuracy(matched["exact_match"], "exact_match"),
            by_kind={kind: _accuracy(m, "exact_match") for kind, m in matched["by_kind"].items()},
            items_path=matched["items_path"],
        )
        items["exact_match"] = {
            matched["task"]: ItemRecord(
                ids=[r["id"] for r in records], values=[float(r["correct"]) for r in records]
            )
        }
        if writer:
            storage.write_atomic(
                storage.join(output_path, EXACT_MATCH_FILE),
                b"".join(orjson.dumps(r) + b"\n" for r in records),
            )
    if prompts and config.prompts and writer:
        results["samples"] = generate_samples(
            loaded.model, loaded.tokenizer, config.prompts, config.sampling, loaded.max_length
        )
        storage.write_atomic(
            storage.join(output_path, SAMPLES_FILE),
            b"".join(orjson.dumps(r) + b"\n" for r in results["samples"]),
        )
    if config.contamination is not None and resolved.lineage:
        from marin.evaluation.contamination import contamination_report

        report, flags = contamination_report(
            config.contamination, resolved.lineage, loaded.tokenizer, docs, items, harness, config
        )
        results["contamination"] = report
        items["contamination"] = {name: ContaminationItems(**f) for name, f in flags.items()}
    return Scored(EvaluationResults(**results), EvaluationItems(**items), documents)


def _lazy_generator(factory: Callable[[str, str], Any] | None, folder: str, device: str):
    """Our own layers' generator for the model in `folder`, loaded when first asked to generate."""
    if factory is None:
        return None
    loaded: list = []

    def generate(prompts, max_new_tokens, eos_id):
        if not loaded:
            loaded.append(factory(folder, device))
        return loaded[0](prompts, max_new_tokens, eos_id)

    return generate


def _accuracy(metric: dict, name: str) -> MetricResult:
    return MetricResult.named(stats.Metric.from_json(metric), name, Aggregation.MEAN)


def _checkpoint_files(config: EvaluationConfig, path_of) -> tuple[CheckpointFiles, ...]:
    """The chosen intermediate exports of the train step, brought local, in step order."""
    from marin.evaluation.errors import CheckpointNotReadyError

    step = config.model.location
    train_output = path_of(step)
    exports, tokens_per_step = checkpoint_exports(step, train_output)
    wanted = sorted(exports) if config.checkpoints == "all" else list(config.checkpoints or ())
    missing = [s for s in wanted if s not in exports]
    if missing:
        raise CheckpointNotReadyError(
            f"checkpoints={list(config.checkpoints or ())}: model step {step!r} has no export of step(s) "
            f"{missing}; it exported steps {sorted(exports)} (train_lm(..., export_every=N) exports every N "
            "steps and the last)"
        )
    out = []
    for number in wanted:
        url = storage.join(train_output, exports[number])
        folder, manifest, prefix = _local_export(train_output, url)
        out.append(
            CheckpointFiles(
                number,
                number * tokens_per_step if tokens_per_step else None,
                ModelFiles(folder, url, model_identity(folder, manifest, prefix)),
                f"checkpoints/{storage.basename(exports[number])}",
            )
        )
    return tuple(out)


def _score_checkpoints(
    config: EvaluationConfig, output_path: str, resolved: Resolved, cache: ScoreCache, writer: bool
) -> Checkpoints:
    """Score each chosen intermediate export of the train step; a curve per metric over steps and tokens.

    Each checkpoint's results, items and documents are written under `checkpoints/step-NNNNNNNN/`.
    """
    curves: dict[str, list[CurvePoint]] = {}
    points = []
    for checkpoint in resolved.checkpoints:
        where = storage.join(output_path, checkpoint.results)
        scored = _score(config, checkpoint.model, where, resolved, cache, writer, prompts=False)
        if writer:
            _write_scored(where, scored)
            storage.write_atomic(storage.join(where, RESULTS_FILE), scored.results.to_bytes())
        points.append(
            CheckpointPoint(step=checkpoint.step, tokens=checkpoint.tokens, results=checkpoint.results)
        )
        for name, point in scored.results.curve_points(checkpoint.step, checkpoint.tokens).items():
            curves.setdefault(name, []).append(point)
    return Checkpoints(steps=[c.step for c in resolved.checkpoints], points=points, curves=curves)


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


def _local_export(train_output: str, url: str) -> tuple[str, list | None, str]:
    """(a local folder of the export at `url`, the train step's manifest, the export's prefix in it)."""
    from marin.evaluation import export_cache
    from marin.execution.artifact import read_artifact

    record = read_artifact(train_output)
    manifest = record.files if record is not None else None
    prefix = url[len(train_output.rstrip("/")) + 1 :].strip("/") + "/"
    if storage.is_local(url):
        return storage.local_path(url), manifest, prefix
    return export_cache.fetch(url, manifest, prefix), manifest, prefix


def _run_harness(
    config: EvaluationConfig,
    tasks,
    loaded,
    output_path: str,
    results: dict,
    items: dict,
    cache: ScoreCache,
    model_id: str,
    generate,
    writer: bool,
) -> dict:
    """Run the harness tasks through the score cache; fill `results` and `items`; return each task's result."""
    from marin.evaluation.harness import OWN_DIR, run_tasks, samples_file, write_own_tasks, write_samples

    work = tempfile.mkdtemp(prefix=HARNESS_WORK_PREFIX)
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
            cache=cache,
            model_id=model_id,
            generate=generate,
        )
        if writer:
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
    if writer:
        written = write_samples(
            storage.join(output_path, HARNESS_SAMPLES_DIR), {name: r.samples for name, r in done.items()}
        )
        results["harness_samples"] = {task: f"{HARNESS_SAMPLES_DIR}/{samples_file(task)}" for task in written}
    if config.suite is not None:
        results["suite"] = suite_aggregate(config.suite, done, config.bootstrap_iters, config.bootstrap_seed)
    return done


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
    """Copy the harness's task files and data from the local work folder to the step's output.

    Not `__pycache__`: the bytecode Python writes when the harness imports our task module names the
    work folder, and is no part of the task."""
    if storage.is_local(dest):
        shutil.copytree(
            work, storage.local_path(dest), dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
        )
        return
    files = [
        (rel, os.path.join(work, rel))
        for rel, _ in storage.walk_files(work)
        if "__pycache__" not in rel.split("/")
    ]
    storage.overlapped(lambda f: storage.upload(f[1], storage.join(dest, f[0])), files)


def _document_items(docs: list[EvalDocument], scores) -> dict[str, DocumentItems]:
    """Per dataset: each document's id (its index and content digest), nll, tokens and bytes."""
    from marin.evaluation.document_scores import document_ids

    out: dict[str, dict[str, list]] = {}
    for doc, doc_id, score in zip(docs, document_ids(docs), scores, strict=True):
        entry = out.setdefault(doc.dataset, {"ids": [], "nll": [], "tokens": [], "bytes": []})
        entry["ids"].append(doc_id)
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


def _plain_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _documents(config: EvaluationConfig, vocab_size: int, token_caches: dict[str, str]) -> list[EvalDocument]:
    docs: list[EvalDocument] = []
    for dataset in config.datasets:
        if isinstance(dataset, TextDataset):
            found = read_text_dataset(dataset)
            docs.extend(found if config.max_documents is None else found[: config.max_documents])
        else:
            docs.extend(
                read_token_cache(
                    dataset.step_name,
                    token_caches[dataset.step_name],
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
