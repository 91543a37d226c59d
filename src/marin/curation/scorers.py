"""What scores a document: a fastText `.bin`, a Hugging Face sequence classifier, py3langid, the rules.

Each is a frozen, picklable spec (its fields are its key) whose `load()` returns a `Scorer`, an
object with `scores(texts) -> list[float]`, loaded once per process (`load_scorer`):

- `FastTextClassifier(path, positive_label="__label__hq")`: fastText's probability of the positive
  label, exactly what `fasttext`'s own `predict(text, k=-1)` returns for it (newlines become spaces,
  as fastText predicts one line). Any fastText supervised `.bin` works: ours, or a published one
  (DCLM's labels are `__label__hq` / `__label__cc`);
- `HFClassifier(path, label=None)`: a `transformers` sequence-classification model folder; the
  softmax probability of `label` (a name from its `id2label` or an index; by default the last), or
  the raw output of a one-output (regression) head such as FineWeb-Edu's;
- `LanguageScore(language="en")`: py3langid's normalised probability of that language;
- `RulesPass(rules=...)`: 1.0 when the document passes every quality rule, else 0.0;
- `RandomScore(seed)`: a uniform number in [0, 1) from a seeded hash of the text, the control a
  filter is compared with (a random cut of the same size: `keep_top` over it).

A `path` may be `step:NAME`, the output of a `train_quality_classifier` step (its `model.bin`),
resolved where the step runs (`resolved()`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Protocol

from marin.curation.documents import STEP_PREFIX, CurationError
from marin.execution.keyed import NOT_KEY

MODEL_FILE = "model.bin"
POSITIVE_LABEL = "__label__hq"
NEGATIVE_LABEL = "__label__lq"


class Scorer(Protocol):
    """Scores a batch of texts: one float per text, in order."""

    def scores(self, texts: Sequence[str]) -> list[float]: ...


@dataclass(frozen=True)
class FastTextClassifier:
    """A fastText supervised model (`.bin`): the score is the probability of `positive_label`."""

    path: str
    positive_label: str = POSITIVE_LABEL
    kind: str = field(default="fasttext", init=False)

    def resolved(self) -> FastTextClassifier:
        return replace(self, path=_resolve_step_path(self.path, MODEL_FILE))

    def load(self) -> Scorer:
        return _FastTextScorer(load_fasttext(self.path), self.positive_label, self.path)


@dataclass(frozen=True)
class HFClassifier:
    """A Hugging Face sequence-classification model folder; `label` picks the output scored."""

    path: str
    label: str | int | None = None
    max_length: int = 512
    batch_size: int = field(default=16, metadata=NOT_KEY)
    kind: str = field(default="hf", init=False)

    def resolved(self) -> HFClassifier:
        return self

    def load(self) -> Scorer:
        return _HFScorer(self)


@dataclass(frozen=True)
class LanguageScore:
    """py3langid's probability that the document is in `language` (ISO 639-1)."""

    language: str = "en"
    kind: str = field(default="py3langid", init=False)

    def resolved(self) -> LanguageScore:
        return self

    def load(self) -> Scorer:
        return _LanguageScorer(self.language)


@dataclass(frozen=True)
class RulesPass:
    """1.0 for a document that passes every rule (names or configs, as `filter_quality` takes), else 0.0."""

    rules: tuple = ("gopher_quality", "gopher_repetition", "c4", "fineweb")
    kind: str = field(default="rules", init=False)

    def describe(self) -> dict:
        from marin.curation.rules import describe_rule, make_rules

        return {"kind": self.kind, "rules": [describe_rule(r) for r in make_rules(self.rules)]}

    def resolved(self) -> RulesPass:
        return self

    def load(self) -> Scorer:
        from marin.curation.rules import make_rules

        return _RulesScorer(make_rules(self.rules))


@dataclass(frozen=True)
class RandomScore:
    """A seeded uniform score in [0, 1) per document (xxh64 of its text): a random cut's ranking."""

    seed: int = 0
    kind: str = field(default="random", init=False)

    def resolved(self) -> RandomScore:
        return self

    def load(self) -> Scorer:
        return _RandomScorer(self.seed)


ScorerSpec = FastTextClassifier | HFClassifier | LanguageScore | RulesPass | RandomScore
SCORERS = (FastTextClassifier, HFClassifier, LanguageScore, RulesPass, RandomScore)


def _resolve_step_path(path: str, file: str) -> str:
    if not path.startswith(STEP_PREFIX):
        return path
    from marin.execution.context import current

    return current().path_of(path[len(STEP_PREFIX) :]).rstrip("/") + "/" + file


@lru_cache(maxsize=4)
def load_scorer(spec: ScorerSpec) -> Scorer:
    """The scorer of a (resolved) spec, loaded once per process."""
    return spec.load()


def load_fasttext(path: str):
    """A fastText model from any path (a remote one is downloaded to a temporary file first)."""
    import storage

    try:
        import fasttext
    except ImportError:
        raise CurationError(
            'fastText is not installed: pip install -e ".[quality]" (scripts/setup.sh installs it)'
        ) from None
    if not storage.exists(path):
        raise CurationError(f"no fastText model at {path}: give the path of a .bin file")
    if storage.is_local(path):
        return _load_fasttext_file(fasttext, storage.local_path(path))
    import tempfile

    with tempfile.TemporaryDirectory(prefix="marin-fasttext-") as tmp:
        local = os.path.join(tmp, MODEL_FILE)
        storage.download(path, local)
        return _load_fasttext_file(fasttext, local)


def _load_fasttext_file(fasttext, local: str):
    try:
        return fasttext.load_model(local)
    except ValueError as e:
        raise CurationError(f"{local} is not a fastText model: {e}") from None


class _FastTextScorer:
    def __init__(self, model, positive_label: str, path: str) -> None:
        labels = model.get_labels()
        if positive_label not in labels:
            raise CurationError(
                f"the fastText model {path} has no label {positive_label!r}; its labels are {labels}: "
                "pass positive_label= one of them"
            )
        self.model, self.positive_label = model, positive_label

    def scores(self, texts: Sequence[str]) -> list[float]:
        # multilinePredict is the batch form of predict(): the same C++ call per line, one Python call
        lines = [t.replace("\n", " ") + "\n" for t in texts]
        labels, probs = self.model.f.multilinePredict(lines, -1, 0.0, "strict")
        wanted = self.positive_label
        return [
            float(ps[names.index(wanted)]) if wanted in names else 0.0
            for names, ps in zip(labels, probs, strict=True)
        ]


class _HFScorer:
    def __init__(self, spec: HFClassifier) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from marin.data.hf_models import HF_MODEL_BUILD_LOCK

        self.spec, self.torch = spec, torch
        self.tokenizer = AutoTokenizer.from_pretrained(spec.path)
        with HF_MODEL_BUILD_LOCK:
            self.model = AutoModelForSequenceClassification.from_pretrained(spec.path).eval()
        self.index = _label_index(self.model.config, spec.label, spec.path)

    def scores(self, texts: Sequence[str]) -> list[float]:
        out: list[float] = []
        size = self.spec.batch_size
        for start in range(0, len(texts), size):
            batch = self.tokenizer(
                list(texts[start : start + size]),
                truncation=True,
                max_length=self.spec.max_length,
                padding=True,
                return_tensors="pt",
            )
            with self.torch.no_grad():
                logits = self.model(**batch).logits.float()
            if logits.shape[-1] == 1:
                out += logits[:, 0].tolist()
            else:
                out += logits.softmax(-1)[:, self.index].tolist()
        return out


def _label_index(config, label: str | int | None, path: str) -> int:
    count = config.num_labels
    if label is None:
        return count - 1
    if isinstance(label, int) and 0 <= label < count:
        return label
    names = {str(v): int(k) for k, v in (config.id2label or {}).items()}
    if label in names:
        return names[label]
    raise CurationError(f"the model {path} has no label {label!r}; its labels are {sorted(names)}")


class _LanguageScorer:
    def __init__(self, language: str) -> None:
        from marin.curation.filters import _identifier

        self.identifier, self.language = _identifier(), language
        if language not in self.identifier.nb_classes:
            raise CurationError(
                f"py3langid knows no language {language!r}; give an ISO 639-1 code such as 'en'"
            )

    def scores(self, texts: Sequence[str]) -> list[float]:
        return [self._prob(t) for t in texts]

    def _prob(self, text: str) -> float:
        for lang, p in self.identifier.rank(text.replace("\n", " ")):
            if lang == self.language:
                return float(p)
        return 0.0


class _RulesScorer:
    def __init__(self, rules: tuple) -> None:
        self.rules = rules

    def scores(self, texts: Sequence[str]) -> list[float]:
        from marin.curation.rules import apply_rules

        return [0.0 if apply_rules(self.rules, t)[0] is None else 1.0 for t in texts]


class _RandomScorer:
    def __init__(self, seed: int) -> None:
        self.seed = seed

    def scores(self, texts: Sequence[str]) -> list[float]:
        import xxhash

        return [
            xxhash.xxh64_intdigest(t.encode("utf-8", "surrogatepass"), seed=self.seed) / 2**64 for t in texts
        ]
