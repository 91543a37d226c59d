"""Per-document scores of a perplexity evaluation, exported for a researcher's own analysis.

`documents.jsonl` holds one `DocumentScoreRecord` per scored document, in the order scored: its
dataset and domain, its id (its place in its dataset and the digest of its content: the ids
`items.json` and `marin compare` pair by), its loss in nats, tokens, UTF-8 bytes and bits per byte,
and for raw text the split of its loss over the classes of its bytes (`byte_classes`). Two
evaluations of the same documents, whatever their tokenizers, line up by id and by byte:
`marin gap` and the `perplexity_gap` step read these files.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import orjson

import storage
from marin.evaluation.documents import EvalDocument

DOCUMENTS_FILE = "documents.jsonl"
EXCERPT_CHARS = 160


@dataclass(frozen=True)
class DocumentScoreRecord:
    """One document's score. `classes` (raw text only): byte class -> `{"nll": nats, "bytes": n}`."""

    dataset: str
    domain: str
    id: str
    nll: float
    tokens: int
    bytes: int
    bpb: float
    classes: dict[str, dict[str, float]] | None = None
    excerpt: str | None = None  # the text's first EXCERPT_CHARS characters (raw text only)

    @classmethod
    def from_json(cls, data: dict) -> DocumentScoreRecord:
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})


def document_ids(docs: Sequence[EvalDocument]) -> list[str]:
    """Each document's id: its place in its dataset, then the first 16 hex digits of its content's digest."""
    from marin.evaluation.perplexity import document_digest

    out, index = [], {}
    for doc in docs:
        i = index.get(doc.dataset, 0)
        index[doc.dataset] = i + 1
        out.append(f"{i}:{document_digest(doc)[:16]}")
    return out


def document_records(docs: Sequence[EvalDocument], scores) -> list[DocumentScoreRecord]:
    """The records of scored documents (`perplexity.DocumentScore`s, in the documents' order)."""
    from marin.evaluation.byte_classes import CLASSES

    records = []
    for doc, doc_id, score in zip(docs, document_ids(docs), scores, strict=True):
        classes = None
        if score.class_nll is not None:
            classes = {
                name: {"nll": nll, "bytes": int(n)}
                for name, nll, n in zip(CLASSES, score.class_nll, score.class_bytes, strict=True)
            }
        bpb = score.nll / math.log(2) / score.bytes if score.bytes else float("nan")
        records.append(
            DocumentScoreRecord(
                score.dataset,
                score.domain,
                doc_id,
                score.nll,
                score.tokens,
                score.bytes,
                bpb,
                classes,
                doc.text[:EXCERPT_CHARS] if doc.text is not None else None,
            )
        )
    return records


def write_document_scores(folder: str, records: Sequence[DocumentScoreRecord]) -> None:
    """`<folder>/documents.jsonl`, written whole."""
    storage.makedirs(folder)
    storage.write_atomic(
        storage.join(folder, DOCUMENTS_FILE), b"".join(orjson.dumps(asdict(r)) + b"\n" for r in records)
    )


def read_document_scores(folder: str) -> list[DocumentScoreRecord]:
    """The records an evaluation output (or one of its `checkpoints/step-N` folders) holds; [] if none."""
    data = storage.read_bytes(storage.join(folder, DOCUMENTS_FILE))
    if data is None:
        return []
    return [DocumentScoreRecord.from_json(orjson.loads(line)) for line in data.splitlines() if line.strip()]
