"""The body of an evaluation step: score the model's export, run harness tasks, sample, record.

`run_evaluation` is what `marin.experiment.evaluate` binds (with `functools.partial`) as a step's
`fn`. It finds its inputs through `marin.execution.context.current()`, writes `results.json`,
`samples.jsonl` and the harness's per-sample outputs (`harness_samples/<task>.jsonl`, the first
`harness.SAMPLES_PER_TASK` of each task) under the step's output, and returns the summary stored in
`.artifact.json`, whose
`"headline"` (`{"metric", "value"}`) is what `marin status` / `marin info` show.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

import orjson

import storage
from marin.evaluation.checkpoint import find_hf_export, load_hf_model
from marin.evaluation.documents import EvalDocument, TextDataset, read_text_dataset, read_token_cache
from marin.evaluation.samples import SamplingConfig, generate_samples
from marin.execution.context import current
from marin.execution.keyed import NOT_KEY

RESULTS_FILE = "results.json"
SAMPLES_FILE = "samples.jsonl"
HARNESS_SAMPLES_DIR = "harness_samples"


@dataclass(frozen=True)
class TokenCacheRef:
    """A tokenized dataset to evaluate on: the step that wrote the cache, and which split."""

    step_name: str
    split: str


@dataclass(frozen=True, kw_only=True)
class EvalOptions:
    """How an evaluation scores, harnesses and samples; what `evaluate()` takes besides the model and data.

    `batch_size` (documents per forward pass, and the harness's batch) changes how fast scores come,
    not the scores, so it is not part of the step's key; every other field is.
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "harness_tasks", tuple(self.harness_tasks))
        object.__setattr__(self, "prompts", tuple(self.prompts))


@dataclass(frozen=True, kw_only=True)
class EvaluationConfig(EvalOptions):
    """Everything an evaluation step needs: the model step, the datasets and the options.

    The step's key is `marin.execution.keyed.hash_attrs_of(config)`: every field but `batch_size`.
    """

    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = (*EvalOptions.KEYED_AT_DEFAULT, "datasets")

    model_step: str
    datasets: tuple[TextDataset | TokenCacheRef, ...] = ()

    def to_json(self) -> dict:
        """The whole config as plain JSON (recorded in results.json)."""
        return orjson.loads(orjson.dumps(dataclasses.asdict(self)))


def run_evaluation(config: EvaluationConfig, output_path: str) -> dict:
    """Evaluate the model step's Hugging Face export; write results under `output_path`; return the summary."""
    ctx = current()
    hf_path = find_hf_export(config.model_step, ctx.path_of(config.model_step))
    loaded = load_hf_model(hf_path, config.max_length)
    results: dict = {
        "model_step": config.model_step,
        "hf_path": hf_path,
        "max_length": loaded.max_length,
        "config": config.to_json(),
    }

    docs = _documents(config, loaded.model.config.vocab_size, ctx.path_of)
    if docs:
        from marin.evaluation.perplexity import score_documents, summarize

        results["perplexity"] = summarize(
            score_documents(loaded.model, loaded.tokenizer, docs, loaded.max_length, config.batch_size)
        )
    if config.harness_tasks:
        from marin.evaluation.harness import run_harness, samples_file, write_own_tasks

        tasks_dir = write_own_tasks(
            storage.join(output_path, "harness"),
            _harness_stories(config),
            config.harness_items,
            seed=config.sampling.seed,
        )
        samples_dir = storage.join(output_path, HARNESS_SAMPLES_DIR)
        results["harness"] = run_harness(
            hf_path,
            config.harness_tasks,
            tasks_dir,
            batch_size=config.batch_size,
            seed=config.sampling.seed,
            samples_dir=samples_dir,
        )
        results["harness_samples"] = {
            task: f"{HARNESS_SAMPLES_DIR}/{samples_file(task)}"
            for task in results["harness"]
            if storage.exists(storage.join(samples_dir, samples_file(task)))
        }
    if config.prompts:
        results["samples"] = generate_samples(
            loaded.model, loaded.tokenizer, config.prompts, config.sampling, loaded.max_length
        )
        storage.write_atomic(
            storage.join(output_path, SAMPLES_FILE),
            b"".join(orjson.dumps(r) + b"\n" for r in results["samples"]),
        )
    storage.write_atomic(
        storage.join(output_path, RESULTS_FILE), orjson.dumps(results, option=orjson.OPT_INDENT_2)
    )
    return summary(results)


def summary(results: dict) -> dict:
    """The artifact: a headline metric, the averages, per-dataset bits-per-byte and harness metrics."""
    artifact: dict = {"results_path": RESULTS_FILE, "hf_path": results["hf_path"]}
    perplexity = results.get("perplexity")
    if perplexity:
        artifact["headline"] = {
            "metric": "bpb",
            "value": perplexity["micro"]["bpb"],
            "over": "micro average of all evaluation documents",
        }
        artifact["micro"] = perplexity["micro"]
        artifact["macro"] = perplexity["macro"]
        artifact["bpb"] = {name: m["bpb"] for name, m in perplexity["datasets"].items()}
    if results.get("harness"):
        artifact["harness"] = results["harness"]
        if "headline" not in artifact:
            task, metrics = next(iter(results["harness"].items()))
            metric = next(
                (k for k in ("acc_norm", "acc", "bits_per_byte") if k in metrics), next(iter(metrics))
            )
            artifact["headline"] = {"metric": f"{task}/{metric}", "value": metrics[metric]}
    if results.get("samples"):
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
