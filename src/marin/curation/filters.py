"""Per-document steps: language ID, quality rules, decontamination (extraction lives in `extract`).

Each is a frozen, picklable callable `f(record, text) -> (record | None, drop_reason | None)` that
`marin.curation.steps.run_document_step` applies to every document of every shard.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from marin.curation.rules import apply_rules


@lru_cache(maxsize=1)
def _identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def identify_language(text: str) -> tuple[str, float]:
    """(ISO 639-1 code, probability) from py3langid's bundled model (97 languages, offline)."""
    lang, score = _identifier().classify(text.replace("\n", " "))
    return lang, float(score)


@dataclass(frozen=True)
class FilterLanguage:
    """Keep documents identified as one of `languages` with probability >= `min_score`."""

    languages: tuple[str, ...] = ("en",)
    min_score: float = 0.65
    text_key: str = "text"
    name: str = "language"

    def describe(self) -> dict:
        import py3langid

        return {
            "identifier": "py3langid",
            "identifier_version": getattr(py3langid, "__version__", "unknown"),
            "languages": list(self.languages),
            "min_score": self.min_score,
            "text_key": self.text_key,
        }

    def input_text(self, record: dict):
        return record.get(self.text_key)

    def __call__(self, record: dict, text: str) -> tuple[dict | None, str | None]:
        lang, score = identify_language(text)
        if lang not in self.languages:
            return None, f"language.other:{lang}"
        if score < self.min_score:
            return None, "language.low_score"
        return {**record, "language": lang, "language_score": round(score, 4)}, None


@dataclass(frozen=True)
class FilterQuality:
    """Apply the rules in order; the first that fails names the drop. A rule may also rewrite the text (C4)."""

    rules: tuple
    text_key: str = "text"
    name: str = "quality"

    def describe(self) -> dict:
        from marin.curation.rules import describe_rule

        return {"rules": [describe_rule(r) for r in self.rules], "text_key": self.text_key}

    def input_text(self, record: dict):
        return record.get(self.text_key)

    def __call__(self, record: dict, text: str) -> tuple[dict | None, str | None]:
        out, reason = apply_rules(self.rules, text)
        if out is None:
            return None, reason
        return (record if out == text else {**record, self.text_key: out}), None


def word_ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    """The lower-cased word n-grams of a text (decontamination's unit of overlap)."""
    from marin.curation.minhash import _TOKEN

    words = _TOKEN.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass(frozen=True)
class DecontaminateSpec:
    """Decontamination against `against` (inputs as in documents.py); `prepare()` reads them at run time."""

    ngram: int
    against: tuple[str, ...]
    against_key: str = "text"
    text_key: str = "text"
    bad_records: str = "fail"
    name: str = "decontaminate"
    # the text field of each `against` input, where one differs from `against_key` (a TextDataset's
    # text_field); empty when every input uses against_key
    against_fields: tuple[str, ...] = ()

    def describe(self) -> dict:
        out = {
            "ngram": self.ngram,
            "against": list(self.against),
            "against_key": self.against_key,
            "text_key": self.text_key,
        }
        if self.against_fields:
            out["against_fields"] = list(self.against_fields)
        return out

    def field_of(self, index: int) -> str:
        return self.against_fields[index] if self.against_fields else self.against_key

    def prepare(self) -> Decontaminate:
        from marin.curation.documents import read_records, resolve_inputs
        from zephyr.io import ShardStats

        banned: set[int] = set()
        stats = ShardStats()
        for index, spec in enumerate(self.against):
            key = self.field_of(index)
            for shard in resolve_inputs((spec,)):
                for _where, _line, record in read_records(shard, self.bad_records, stats):
                    text = record.get(key)
                    if isinstance(text, str):
                        banned.update(hash_ngram(g) for g in word_ngrams(text, self.ngram))
        return Decontaminate(self.ngram, frozenset(banned), self.text_key)


@dataclass(frozen=True)
class Decontaminate:
    """Drop documents that share any word `ngram`-gram with the evaluation texts (hashed n-grams in `banned`)."""

    ngram: int
    banned: frozenset
    text_key: str = "text"
    name: str = "decontaminate"

    def input_text(self, record: dict):
        return record.get(self.text_key)

    def __call__(self, record: dict, text: str) -> tuple[dict | None, str | None]:
        if any(hash_ngram(g) in self.banned for g in word_ngrams(text, self.ngram)):
            return None, "decontaminate.ngram_overlap"
        return record, None


def hash_ngram(gram: tuple[str, ...]) -> int:
    import xxhash

    return xxhash.xxh64_intdigest(" ".join(gram).encode())
