"""Where two models differ: the bits per byte by which one beats the other, and on what text.

A perplexity gap compares two models on the same documents, byte by byte, so models with different
tokenizers compare: each token's loss is spread over the UTF-8 bytes it covers (`byte_classes`), and
everything is counted in bits per byte of the original text. The gap is `bpb(a) - bpb(b)` over all
documents (`total`): positive where b needs fewer bits (b is better). It splits exactly, with no
remainder, by what the bytes are (URLs, code, numbers, whitespace, non-ASCII, punctuation, other
text: each class contributes its bits difference over all bytes, and the contributions add up to the
total) and by domain. Every figure has a paired 95% interval: one bootstrap resamples the documents,
and each replicate computes a's and b's sums from the same draw, so what both find hard cancels.
The report also lists the documents, and (for a `perplexity_gap` step, which keeps every byte's
loss) the spans of text, where each model wins by the most bits.

`gap_report(a, b)` works on the per-document records both sides exported (`document_scores`), so
`marin gap A B` compares two finished evaluations of the same documents; the `perplexity_gap` step
scores both models itself (`run_perplexity_gap`).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import orjson

import storage
from marin.evaluation import stats
from marin.evaluation.byte_classes import CLASSES
from marin.evaluation.document_scores import DocumentScoreRecord
from marin.evaluation.errors import EvalDataError

GAP_JSON = "gap.json"
GAP_MD = "gap.md"
TOP = 10  # documents and spans listed on each side
EXCERPT_CHARS = 160
_SPAN = re.compile(r"\S+\s*|\s+")  # a span: a word and the whitespace after it


@dataclass(frozen=True)
class GapFigure:
    """One part of the gap: its bits-per-byte difference (a - b) with the paired interval and p-value."""

    name: str
    value: float
    stderr: float | None
    ci95: tuple[float, float] | None
    n: int
    p_value: float
    bytes: int
    bpb_a: float | None = None  # over this part's own bytes (None for the total's contributions)
    bpb_b: float | None = None

    def to_json(self) -> dict:
        out = asdict(self)
        out["ci95"] = list(self.ci95) if self.ci95 is not None else None
        return out


@dataclass(frozen=True)
class Excerpt:
    """A document or a span of text where one model wins: bits a - b, with where it is and what it says."""

    dataset: str
    document: str
    bits: float  # bits of a minus bits of b: negative where a wins
    bytes: int
    text: str
    start: int | None = None  # byte offset of a span in its document

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GapReport:
    """The whole comparison: the total gap, its split by byte class and by domain, and where each wins."""

    a: str
    b: str
    documents: int
    bytes: int
    total: GapFigure
    classes: list[GapFigure] = field(default_factory=list)  # contributions: they sum to the total
    domains: list[GapFigure] = field(default_factory=list)  # the gap within each domain
    a_wins: list[Excerpt] = field(default_factory=list)  # documents
    b_wins: list[Excerpt] = field(default_factory=list)
    a_wins_spans: list[Excerpt] = field(default_factory=list)
    b_wins_spans: list[Excerpt] = field(default_factory=list)
    note: str = ""

    def to_json(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "documents": self.documents,
            "bytes": self.bytes,
            "total": self.total.to_json(),
            "classes": [c.to_json() for c in self.classes],
            "domains": [d.to_json() for d in self.domains],
            "a_wins": [e.to_json() for e in self.a_wins],
            "b_wins": [e.to_json() for e in self.b_wins],
            "a_wins_spans": [e.to_json() for e in self.a_wins_spans],
            "b_wins_spans": [e.to_json() for e in self.b_wins_spans],
            "note": self.note,
        }


@dataclass(frozen=True)
class DocumentText:
    """What a report needs beyond the scores to quote text: each document's text and per-byte losses."""

    text: str
    byte_bits_a: np.ndarray | None = None
    byte_bits_b: np.ndarray | None = None


def _paired(
    name: str,
    a_bits: np.ndarray,
    b_bits: np.ndarray,
    num_bytes: np.ndarray,
    denominator_bytes: np.ndarray,
    iters: int,
    seed: int,
    own_bytes: np.ndarray | None = None,
) -> GapFigure:
    """(sum a - sum b) / sum(denominator bytes) with a paired bootstrap over documents."""
    columns = np.stack([a_bits, b_bits, denominator_bytes], axis=1)
    total = columns.sum(axis=0)
    value = float((total[0] - total[1]) / total[2]) if total[2] else float("nan")
    sums = stats.resampled_sums(columns, iters, seed) if len(a_bits) else np.zeros((0, 3))
    with np.errstate(divide="ignore", invalid="ignore"):
        replicates = (sums[:, 0] - sums[:, 1]) / sums[:, 2]
    metric = stats.Estimate(value, replicates, len(a_bits)).metric()
    finite = replicates[np.isfinite(replicates)]
    below = (np.sum(finite <= 0) + 1) / (len(finite) + 1)
    above = (np.sum(finite >= 0) + 1) / (len(finite) + 1)
    own = own_bytes if own_bytes is not None else num_bytes
    own_total = float(own.sum())
    return GapFigure(
        name,
        value,
        metric.stderr,
        metric.ci95,
        len(a_bits),
        float(min(1.0, 2 * min(below, above))),
        int(own_total),
        float(total[0] / own_total) if own_total else None,
        float(total[1] / own_total) if own_total else None,
    )


def gap_report(
    a: Sequence[DocumentScoreRecord],
    b: Sequence[DocumentScoreRecord],
    *,
    labels: tuple[str, str] = ("a", "b"),
    texts: dict[tuple[str, str], DocumentText] | None = None,
    top: int = TOP,
    iters: int = stats.ITERS,
    seed: int = stats.SEED,
) -> GapReport:
    """The gap between two models' scores of the same documents (paired by dataset and id)."""
    by_b = {(r.dataset, r.id): r for r in b}
    keys = [(r.dataset, r.id) for r in a]
    missing_b = [k for k in keys if k not in by_b]
    missing_a = len(set(by_b) - set(keys))
    if missing_b or missing_a:
        raise EvalDataError(
            f"the two sides scored different documents: {len(missing_b)} only in {labels[0]}, {missing_a} only in "
            f"{labels[1]}; compare evaluations of the same datasets"
        )
    pairs = [(r, by_b[(r.dataset, r.id)]) for r in a]
    for x, y in pairs:
        if x.bytes != y.bytes:
            raise EvalDataError(
                f"document {x.dataset}/{x.id} has {x.bytes} bytes in {labels[0]}, {y.bytes} in {labels[1]}"
            )
    bits = 1 / math.log(2)
    a_bits = np.array([x.nll * bits for x, _ in pairs])
    b_bits = np.array([y.nll * bits for _, y in pairs])
    num_bytes = np.array([x.bytes for x, _ in pairs], dtype=np.float64)
    total = _paired("total", a_bits, b_bits, num_bytes, num_bytes, iters, seed)
    classes: list[GapFigure] = []
    note = ""
    split = all(x.classes and y.classes for x, y in pairs)
    if split and pairs:
        for name in CLASSES:
            ak = np.array([x.classes[name]["nll"] * bits for x, _ in pairs])
            bk = np.array([y.classes[name]["nll"] * bits for _, y in pairs])
            own = np.array([x.classes[name]["bytes"] for x, _ in pairs], dtype=np.float64)
            classes.append(_paired(name, ak, bk, num_bytes, num_bytes, iters, seed, own_bytes=own))
    elif pairs:
        note = "no split by byte class: some documents come from a token cache, whose text is not at hand"
    domains = []
    for domain in dict.fromkeys(x.domain for x, _ in pairs):
        sel = np.array([x.domain == domain for x, _ in pairs])
        domains.append(_paired(domain, a_bits[sel], b_bits[sel], num_bytes[sel], num_bytes[sel], iters, seed))
    diffs = a_bits - b_bits
    order = np.argsort(diffs, kind="stable")

    def excerpt(i: int) -> Excerpt:
        x = pairs[i][0]
        doc = (texts or {}).get((x.dataset, x.id))
        return Excerpt(x.dataset, x.id, float(diffs[i]), x.bytes, _clip(doc.text if doc else x.excerpt or ""))

    a_wins = [excerpt(int(i)) for i in order[:top] if diffs[i] < 0]
    b_wins = [excerpt(int(i)) for i in order[::-1][:top] if diffs[i] > 0]
    a_spans, b_spans = _spans(pairs, texts or {}, top)
    return GapReport(
        labels[0],
        labels[1],
        len(pairs),
        int(num_bytes.sum()),
        total,
        classes,
        domains,
        a_wins,
        b_wins,
        a_spans,
        b_spans,
        note,
    )


def _clip(text: str, chars: int = EXCERPT_CHARS) -> str:
    return text if len(text) <= chars else text[:chars] + "…"


def _spans(pairs, texts: dict, top: int) -> tuple[list[Excerpt], list[Excerpt]]:
    """The spans of text (a word and the whitespace after it) where each model wins by the most bits."""
    found = []
    for x, _ in pairs:
        doc = texts.get((x.dataset, x.id))
        if doc is None or doc.byte_bits_a is None or doc.byte_bits_b is None:
            continue
        diff = np.cumsum(np.concatenate([[0.0], doc.byte_bits_a - doc.byte_bits_b]))
        data = doc.text.encode("utf-8")
        starts = np.append(np.flatnonzero((np.frombuffer(data, np.uint8) & 0xC0) != 0x80), len(data))
        for m in _SPAN.finditer(doc.text):
            lo, hi = int(starts[m.start()]), int(starts[m.end()])
            found.append((float(diff[hi] - diff[lo]), x.dataset, x.id, lo, hi - lo, m.group(0)))
    found.sort(key=lambda f: f[0])
    a_wins = [Excerpt(d, i, v, n, _clip(t.strip() or t), s) for v, d, i, s, n, t in found[:top] if v < 0]
    b_wins = [
        Excerpt(d, i, v, n, _clip(t.strip() or t), s) for v, d, i, s, n, t in found[::-1][:top] if v > 0
    ]
    return a_wins, b_wins


# -- rendering --------------------------------------------------------------------------------------


def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    return f"{x:.4g}"


def _interval(f: GapFigure) -> str:
    return f"[{_num(f.ci95[0])}, {_num(f.ci95[1])}]" if f.ci95 else ""


def _winner(f: GapFigure, report: GapReport) -> str:
    if f.ci95 is None or f.ci95[0] <= 0 <= f.ci95[1]:
        return ""
    return report.b if f.value > 0 else report.a


def render(report: GapReport, fmt: str = "md") -> str:
    """The report as markdown (what `marin gap` prints and Marina shows), CSV (long format) or JSON."""
    if fmt == "json":
        return orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n"
    if fmt == "csv":
        return _csv(report)
    t = report.total
    lines = [
        f"# Perplexity gap: {report.a} - {report.b}",
        "",
        f"Bits per byte of {report.a} minus {report.b} on the same {report.documents} documents "
        f"({report.bytes} bytes); positive: {report.b} needs fewer bits. Intervals are paired 95% bootstrap "
        "intervals over documents.",
        "",
        f"**total**: {_num(t.value)} {_interval(t)} (bpb {_num(t.bpb_a)} vs {_num(t.bpb_b)}, p={_num(t.p_value)})"
        + (f"; better: {_winner(t, report)}" if _winner(t, report) else "; no significant difference"),
        "",
    ]
    if report.classes:
        lines += [
            "## By byte class (contributions add up to the total)",
            "",
            "| class | bytes | share of bytes | contribution | 95% interval | bpb a | bpb b | better |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for c in report.classes:
            if not c.bytes:
                continue  # in the JSON (a zero contribution), not worth a row here
            share = c.bytes / report.bytes if report.bytes else 0.0
            lines.append(
                f"| {c.name} | {c.bytes} | {share:.1%} | {_num(c.value)} | {_interval(c)} | {_num(c.bpb_a)} | "
                f"{_num(c.bpb_b)} | {_winner(c, report)} |"
            )
        lines.append("")
    elif report.note:
        lines += [report.note, ""]
    if report.domains:
        lines += [
            "## By domain (the gap within each)",
            "",
            "| domain | documents | gap | 95% interval | bpb a | bpb b | better |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for d in report.domains:
            lines.append(
                f"| {d.name} | {d.n} | {_num(d.value)} | {_interval(d)} | {_num(d.bpb_a)} | {_num(d.bpb_b)} | "
                f"{_winner(d, report)} |"
            )
        lines.append("")
    for title, rows in (
        (f"Documents where {report.a} wins", report.a_wins),
        (f"Documents where {report.b} wins", report.b_wins),
        (f"Spans where {report.a} wins", report.a_wins_spans),
        (f"Spans where {report.b} wins", report.b_wins_spans),
    ):
        if not rows:
            continue
        lines += [f"## {title}", "", "| bits a - b | bytes | document | text |", "| --- | --- | --- | --- |"]
        for e in rows:
            text = e.text.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {_num(e.bits)} | {e.bytes} | {e.dataset}/{e.document} | {text} |")
        lines.append("")
    return "\n".join(lines)


def _csv(report: GapReport) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["kind", "name", "value", "stderr", "ci95_lo", "ci95_hi", "n", "p_value", "bytes", "bpb_a", "bpb_b"]
    )
    for kind, figures in (("total", [report.total]), ("class", report.classes), ("domain", report.domains)):
        for f in figures:
            lo, hi = f.ci95 if f.ci95 else (None, None)
            writer.writerow(
                [kind, f.name, f.value, f.stderr, lo, hi, f.n, f.p_value, f.bytes, f.bpb_a, f.bpb_b]
            )
    for kind, rows in (
        ("a_wins", report.a_wins),
        ("b_wins", report.b_wins),
        ("a_wins_span", report.a_wins_spans),
        ("b_wins_span", report.b_wins_spans),
    ):
        for e in rows:
            writer.writerow(
                [kind, f"{e.dataset}/{e.document}", e.bits, None, None, None, None, None, e.bytes, None, None]
            )
    return out.getvalue()


def gap_between_evaluations(path_a: str, path_b: str, **options) -> GapReport:
    """The gap between two finished evaluations' output folders, from their `documents.jsonl`."""
    from marin.evaluation.document_scores import DOCUMENTS_FILE, read_document_scores

    sides = []
    for path in (path_a, path_b):
        records = read_document_scores(path)
        if not records:
            raise EvalDataError(
                f"{path} has no {DOCUMENTS_FILE}: only an evaluation of datasets (perplexity) exports its "
                "documents' scores; evaluate both models with datasets=[...]"
            )
        sides.append(records)
    labels = tuple(storage.basename(p.rstrip("/")) for p in (path_a, path_b))
    if labels[0] == labels[1]:
        labels = (f"{labels[0]}#0", f"{labels[1]}#1")
    return gap_report(sides[0], sides[1], labels=labels, **options)


def write_report(folder: str, report: GapReport) -> None:
    """`gap.json` and `gap.md` under `folder`, each written whole."""
    storage.write_atomic(storage.join(folder, GAP_JSON), render(report, "json").encode())
    storage.write_atomic(storage.join(folder, GAP_MD), render(report, "md").encode())


def read_report(folder: str) -> dict | None:
    """A gap step's `gap.json`, or None."""
    data = storage.read_bytes(storage.join(folder, GAP_JSON))
    return orjson.loads(data) if data is not None else None
