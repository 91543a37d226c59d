"""The `perplexity_gap` step: score two models on the same raw text, byte-aligned, and report the gap.

Both models score every document through the step's score cache (`score_cache`: a killed run resumes,
and a model compared again scores nothing twice), keeping every token's loss so that each byte gets
its share (`perplexity.score_documents(byte_losses=True)`). The step writes `gap.json` and `gap.md`
(`gap.GapReport`: the total, its split by byte class and by domain, and the documents and spans where
each model wins) and each model's per-document scores under `a/` and `b/` (`documents.jsonl`).
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

import storage
from marin.evaluation import stats
from marin.evaluation.document_scores import document_ids, document_records, write_document_scores
from marin.evaluation.documents import TextDataset, read_text_dataset
from marin.evaluation.gap import DocumentText, gap_report, write_report
from marin.evaluation.model_source import ModelSource
from marin.evaluation.score_cache import CACHE_DIR, DEFAULT_FLUSH_S, Ranks, ScoreCache, sibling_caches
from marin.execution.context import current
from marin.execution.keyed import NOT_KEY


@dataclass(frozen=True, kw_only=True)
class GapConfig:
    """What a `perplexity_gap` step compares: two models on raw-text datasets, and how it reports."""

    KEYED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ()

    model_a: ModelSource
    model_b: ModelSource
    datasets: tuple[TextDataset, ...]
    max_documents: int | None = None
    max_length: int | None = None
    top: int = 10
    bootstrap_iters: int = stats.ITERS
    bootstrap_seed: int = stats.SEED
    batch_size: int = field(default=8, metadata=NOT_KEY)
    score_flush_s: float = field(default=DEFAULT_FLUSH_S, metadata=NOT_KEY)


def run_perplexity_gap(config: GapConfig, output_path: str) -> dict:
    """Score both models, write the report and each side's documents; return the summary (headline: the gap)."""
    from marin.evaluation.checkpoint import load_hf_model
    from marin.evaluation.evaluation_step import model_files
    from marin.evaluation.perplexity import score_documents

    path_of = current().path_of
    docs = []
    for dataset in config.datasets:
        found = read_text_dataset(dataset)
        docs.extend(found if config.max_documents is None else found[: config.max_documents])
    cache = ScoreCache(
        storage.join(output_path, CACHE_DIR),
        sources=sibling_caches(output_path),
        ranks=Ranks(),
        run_id=uuid.uuid4().hex[:12],
        flush_s=config.score_flush_s,
    )
    sides = {}
    for side, source in (("a", config.model_a), ("b", config.model_b)):
        files = model_files(source, path_of)
        loaded = load_hf_model(files.folder, config.max_length)
        scores = score_documents(
            loaded.model,
            loaded.tokenizer,
            docs,
            loaded.max_length,
            config.batch_size,
            cache=cache,
            model_id=files.identity,
            byte_losses=True,
        )
        records = document_records(docs, scores)
        write_document_scores(storage.join(output_path, side), records)
        sides[side] = (source.label(), records, scores)
        del loaded
    cache.compact()
    texts = {
        (doc.dataset, doc_id): DocumentText(
            doc.text,
            _bits(sides["a"][2][i].byte_nll),
            _bits(sides["b"][2][i].byte_nll),
        )
        for i, (doc, doc_id) in enumerate(zip(docs, document_ids(docs), strict=True))
    }
    report = gap_report(
        sides["a"][1],
        sides["b"][1],
        labels=(sides["a"][0], sides["b"][0]),
        texts=texts,
        top=config.top,
        iters=config.bootstrap_iters,
        seed=config.bootstrap_seed,
    )
    write_report(output_path, report)
    total = report.total
    return {
        "headline": {
            "metric": "gap_bpb",
            "value": total.value,
            "stderr": total.stderr,
            "ci95": list(total.ci95) if total.ci95 else None,
            "n": total.n,
            "over": f"bits per byte of {report.a} minus {report.b}",
        },
        "a": report.a,
        "b": report.b,
        "gap_path": "gap.json",
        "score_cache": cache.counts.to_json(),
    }


def _bits(byte_nll):
    return None if byte_nll is None else byte_nll / math.log(2)
