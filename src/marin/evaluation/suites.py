"""Standard evaluation suites as data: each task's harness name, shots, prompt format, metric and chance.

`SUITES` maps a suite's name to its `Suite`. A `Task` says everything that decides its score, so
all of it enters an evaluation's key:

- `harness_task`: the lm-eval-harness task that builds its prompts and scores them, found in
  `harness_dir` (a folder of the harness's `tasks/`; only the folders a run needs are indexed);
- `shots`: few-shot examples before each item, drawn by the harness with the evaluation's seed;
- `format`: how the choices are put, in OLMES's terms: `cloze` (the model scores each answer's text
  as the continuation; the choices are never shown), `multiple_choice` (the choices are listed
  with letters and the model scores the letters), or `perplexity` (whole documents);
- `metric` (what the suite aggregates) and `chance` (a random guesser's expected value of it);
- `dataset_path`: None for the hub dataset the harness names, or another path (a local folder in
  the same schema, as the tests use): `Suite.with_dataset_paths`;
- `overrides`: harness config fields set over its YAML, where the YAML cannot run as the suite
  needs (agieval's answer key renders as a list, which the harness's few-shot builder refuses).

Suites: `core` (the DCLM CORE tasks with the shot counts upstream Marin uses; aggregate: the mean
of chance-centred accuracy, `(acc - chance) / (1 - chance)`), `mmlu_0shot` and `mmlu_5shot` (the 57
subjects; aggregate: accuracy over all items, as the harness's `mmlu` group weights by size) and
`paloma` (Paloma's perplexity domains; aggregate: bits-per-byte pooled over every document, with
the plain mean over domains beside it).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from marin.evaluation.errors import SuiteError


class PromptFormat(StrEnum):
    """How a task puts its items to the model (OLMES's cloze vs multiple-choice formulations)."""

    CLOZE = "cloze"
    MULTIPLE_CHOICE = "multiple_choice"
    PERPLEXITY = "perplexity"
    GENERATION = "generation"


class Aggregate(StrEnum):
    """How a suite's tasks combine into its one number."""

    CENTRED_ACCURACY = "centred_accuracy"  # mean over tasks of (acc - chance) / (1 - chance)
    POOLED_ACCURACY = "pooled_accuracy"  # accuracy over every item of every task
    BITS_PER_BYTE = "bits_per_byte"  # bits-per-byte pooled over every document


@dataclass(frozen=True)
class Task:
    """One scored task of a suite (see the module docstring for each field)."""

    name: str
    harness_task: str
    harness_dir: str
    shots: int | None  # None: the harness task's own default
    format: PromptFormat | None
    metric: str | None  # None: a task outside the suites, every metric reported alike
    chance: float | None
    dataset: str  # the hub dataset the harness task reads ("" when not known)
    dataset_path: str | None = None  # None: `dataset` from the hub
    overrides: tuple[tuple[str, str], ...] = ()  # harness config fields set over its YAML


@dataclass(frozen=True)
class Suite:
    """A named list of tasks and how they aggregate."""

    name: str
    tasks: tuple[Task, ...]
    aggregate: Aggregate

    def task(self, name: str) -> Task:
        """The task called `name`; SuiteError with a did-you-mean otherwise."""
        for task in self.tasks:
            if task.name == name:
                return task
        raise SuiteError(unknown("task", name, [t.name for t in self.tasks], where=f"suite {self.name!r}"))

    def only(self, *names: str) -> Suite:
        """The same suite with only the tasks named (for a quick look, or a test)."""
        return replace(self, tasks=tuple(self.task(n) for n in names))

    def with_dataset_paths(self, paths: Mapping[str, str]) -> Suite:
        """The same suite reading each hub dataset named in `paths` from the path given instead."""
        unused = set(paths) - {t.dataset for t in self.tasks}
        if unused:
            raise SuiteError(
                unknown(
                    "dataset",
                    sorted(unused)[0],
                    sorted({t.dataset for t in self.tasks}),
                    f"suite {self.name!r}",
                )
            )
        return replace(
            self,
            tasks=tuple(replace(t, dataset_path=paths.get(t.dataset, t.dataset_path)) for t in self.tasks),
        )


def unknown(kind: str, name: str, known: list[str], where: str = "") -> str:
    """`unknown suite 'cor': did you mean 'core'? (known: ...)`, the message for a name not in `known`."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known[:12])}"
    return f"unknown {kind} {name!r}{' in ' + where if where else ''}: {hint}"


def _core() -> Suite:
    def task(name, harness, folder, shots, fmt, metric, chance, dataset, overrides=()):
        return Task(name, harness, folder, shots, fmt, metric, chance, dataset, overrides=overrides)

    first_gold = (("doc_to_target", "{{gold[0]}}"),)

    c, mc = PromptFormat.CLOZE, PromptFormat.MULTIPLE_CHOICE
    return Suite(
        "core",
        (
            task(
                "agieval_lsat_ar",
                "agieval_lsat_ar",
                "agieval",
                3,
                mc,
                "acc",
                0.2,
                "hails/agieval-lsat-ar",
                first_gold,
            ),
            task("arc_easy", "arc_easy", "arc", 10, c, "acc_norm", 0.25, "allenai/ai2_arc"),
            task("arc_challenge", "arc_challenge", "arc", 10, c, "acc_norm", 0.25, "allenai/ai2_arc"),
            task("boolq", "boolq", "super_glue/boolq", 10, c, "acc", 0.5, "aps/super_glue"),
            task(
                "commonsense_qa", "commonsense_qa", "commonsense_qa", 10, mc, "acc", 0.2, "tau/commonsense_qa"
            ),
            task("copa", "copa", "super_glue/copa", 0, c, "acc", 0.5, "aps/super_glue"),
            task("hellaswag_0shot", "hellaswag", "hellaswag", 0, c, "acc_norm", 0.25, "Rowan/hellaswag"),
            task("hellaswag_10shot", "hellaswag", "hellaswag", 10, c, "acc_norm", 0.25, "Rowan/hellaswag"),
            task(
                "lambada_openai", "lambada_openai", "lambada", 0, c, "acc", 0.0, "EleutherAI/lambada_openai"
            ),
            task("openbookqa", "openbookqa", "openbookqa", 0, c, "acc_norm", 0.25, "allenai/openbookqa"),
            task("piqa", "piqa", "piqa", 10, c, "acc_norm", 0.5, "baber/piqa"),
            task("wsc273", "wsc273", "wsc273", 0, c, "acc", 0.5, "lighteval/winograd_wsc"),
            task("winogrande", "winogrande", "winogrande", 0, c, "acc", 0.5, "allenai/winogrande"),
        ),
        Aggregate.CENTRED_ACCURACY,
    )


MMLU_SUBJECTS = (
    "abstract_algebra", "anatomy", "astronomy", "business_ethics", "clinical_knowledge", "college_biology",
    "college_chemistry", "college_computer_science", "college_mathematics", "college_medicine", "college_physics",
    "computer_security", "conceptual_physics", "econometrics", "electrical_engineering", "elementary_mathematics",
    "formal_logic", "global_facts", "high_school_biology", "high_school_chemistry",
    "high_school_computer_science", "high_school_european_history", "high_school_geography",
    "high_school_government_and_politics", "high_school_macroeconomics", "high_school_mathematics",
    "high_school_microeconomics", "high_school_physics", "high_school_psychology", "high_school_statistics",
    "high_school_us_history", "high_school_world_history", "human_aging", "human_sexuality", "international_law",
    "jurisprudence", "logical_fallacies", "machine_learning", "management", "marketing", "medical_genetics",
    "miscellaneous", "moral_disputes", "moral_scenarios", "nutrition", "philosophy", "prehistory",
    "professional_accounting", "professional_law", "professional_medicine", "professional_psychology",
    "public_relations", "security_studies", "sociology", "us_foreign_policy", "virology", "world_religions",
)  # fmt: skip


def _mmlu(shots: int) -> Suite:
    return Suite(
        f"mmlu_{shots}shot",
        tuple(
            Task(
                f"mmlu_{subject}",
                f"mmlu_{subject}",
                "mmlu/default",
                shots,
                PromptFormat.MULTIPLE_CHOICE,
                "acc",
                0.25,
                "cais/mmlu",
            )
            for subject in MMLU_SUBJECTS
        ),
        Aggregate.POOLED_ACCURACY,
    )


PALOMA_DOMAINS = (
    "4chan_meta_sep", "c4_100_domains", "c4_en", "dolma-v1_5", "dolma_100_programing_languages",
    "dolma_100_subreddits", "falcon-refinedweb", "gab", "m2d2_s2orc_unsplit", "m2d2_wikipedia_unsplit",
    "manosphere_meta_sep", "mc4", "ptb", "redpajama", "twitterAAE_HELM_fixed", "wikitext_103",
)  # fmt: skip


def _paloma() -> Suite:
    return Suite(
        "paloma",
        tuple(
            Task(
                f"paloma_{domain}",
                f"paloma_{domain}",
                "paloma",
                0,
                PromptFormat.PERPLEXITY,
                "bits_per_byte",
                0.0,
                "allenai/paloma",
            )
            for domain in PALOMA_DOMAINS
        ),
        Aggregate.BITS_PER_BYTE,
    )


SUITES: dict[str, Suite] = {s.name: s for s in (_core(), _mmlu(0), _mmlu(5), _paloma())}


def suite(name: str | Suite) -> Suite:
    """The suite called `name` (a Suite passes through); SuiteError with a did-you-mean otherwise."""
    if isinstance(name, Suite):
        return name
    if name not in SUITES:
        raise SuiteError(unknown("suite", name, list(SUITES)))
    return SUITES[name]
