"""Loss, perplexity and bits-per-byte of a causal LM over whole documents, per dataset and per domain.

Documents longer than the context are scored with the rolling windows of lm-eval-harness's
`loglikelihood_rolling` (context_len=1): the first window is the prefix token (BOS, else EOS) plus
the document's first tokens; each later window is a full context ending at the next unscored
token and scores only tokens not scored before. Every token is thus predicted exactly once, so our
bits-per-byte is the harness's `bits_per_byte` on the same text. Bytes are the UTF-8 bytes of the
original text. Averages follow Paloma: micro pools all tokens/bytes, macro is the plain mean over
datasets (and over domains). Every figure carries a bootstrap interval over documents (`summarize`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from marin.evaluation import stats
from marin.evaluation.documents import EvalDocument
from marin.evaluation.score_cache import ScoreCache, item_key

_AVERAGED = ("loss", "perplexity", "bpb")


@dataclass(frozen=True)
class Window:
    """Model input ids and the tokens its last `len(targets)` positions predict."""

    doc_index: int
    inputs: tuple[int, ...]
    targets: tuple[int, ...]


def rolling_windows(
    doc_index: int, tokens: Sequence[int], prefix_token: int, max_length: int
) -> list[Window]:
    """The harness's disjoint rolling windows over `tokens`: each token is a target exactly once."""
    tokens = list(tokens)
    if not tokens:
        return []
    first = min(max_length, len(tokens))
    windows = [Window(doc_index, tuple([prefix_token] + tokens[: first - 1]), tuple(tokens[:first]))]
    predicted = first
    while predicted < len(tokens):
        count = min(len(tokens) - predicted, max_length)
        end = predicted + count
        windows.append(
            Window(doc_index, tuple(tokens[end - max_length - 1 : end - 1]), tuple(tokens[end - count : end]))
        )
        predicted = end
    return windows


@dataclass(frozen=True)
class DocumentScore:
    """The summed negative log-likelihood (nats) of one document's tokens, and its size.

    For raw text, `class_nll` splits `nll` over the classes of its bytes (`byte_classes.CLASSES`:
    URLs, code, numbers, whitespace, ...) and `class_bytes` counts them; both are None for
    documents of a token cache, whose text is not at hand.
    """

    dataset: str
    domain: str
    nll: float
    tokens: int
    bytes: int
    class_nll: tuple[float, ...] | None = None
    class_bytes: tuple[int, ...] | None = None
    byte_nll: np.ndarray | None = None  # each byte's share of the loss (raw text, when asked for)


@dataclass(frozen=True)
class _Prepared:
    """A document's token ids and, for raw text, each token's bytes and the share of its loss per byte class."""

    tokens: list[int]
    fractions: np.ndarray | None
    class_bytes: tuple[int, ...] | None
    spans: np.ndarray | None = None


def _prepare(doc: EvalDocument, tokenizer) -> _Prepared:
    if doc.tokens is not None:
        return _Prepared(list(doc.tokens), None, None)
    if not getattr(tokenizer, "is_fast", False):  # no offsets: the loss is not split by byte class
        return _Prepared(tokenizer.encode(doc.text, add_special_tokens=False), None, None)
    from marin.evaluation import byte_classes

    encoded = tokenizer(doc.text, add_special_tokens=False, return_offsets_mapping=True)
    spans = byte_classes.token_byte_spans(doc.text, encoded["offset_mapping"])
    classes = byte_classes.byte_classes(doc.text)
    return _Prepared(
        list(encoded["input_ids"]),
        byte_classes.token_class_fractions(spans, classes),
        tuple(int(c) for c in byte_classes.class_bytes(classes)),
        spans,
    )


def tokenize_documents(docs: Sequence[EvalDocument], tokenizer) -> list[list[int]]:
    """Token ids of each document: cached ids as they are, raw text encoded without special tokens."""
    return [
        list(d.tokens) if d.tokens is not None else tokenizer.encode(d.text, add_special_tokens=False)
        for d in docs
    ]


def prefix_token_id(tokenizer) -> int:
    """The token that conditions a document's first token: EOS if the tokenizer has one, else BOS.

    Our token caches end every document with EOS and add no BOS, so in training each document
    follows an EOS; conditioning on BOS would score the first token after a token the model never
    saw. The harness bridge passes the same id as lm-eval's `prefix_token_id`, so both agree.
    """
    token = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.bos_token_id
    if token is None:
        raise ValueError("the tokenizer has neither a BOS nor an EOS token to start documents with")
    return token


def document_digest(doc: EvalDocument) -> str:
    """The digest of a document's content (its text, or its token ids): half of its items' cache keys."""
    from marin.execution.manifest import bytes_digest

    content = doc.text.encode("utf-8") if doc.text is not None else np.asarray(doc.tokens, np.int64).tobytes()
    return bytes_digest(content)


def score_documents(
    model,
    tokenizer,
    docs: Sequence[EvalDocument],
    max_length: int,
    batch_size: int = 8,
    *,
    cache: ScoreCache | None = None,
    model_id: str = "",
    byte_losses: bool = False,
) -> list[DocumentScore]:
    """Score every document with rolling windows, through `cache` (see `score_cache`): each window's
    loss (and its split by byte class) is an item, keyed by the model, the document's content, the
    window's place and the context length. Windows go in a fixed order (longest first, ties by
    position) cut into batches of `batch_size`, so reruns, resumed runs included, agree bit for bit;
    a document's loss is its windows' summed in order. `byte_losses=True` also keeps every token's loss
    (in the cache too) and gives each raw-text document its loss per byte (`DocumentScore.byte_nll`)."""
    import torch

    from marin.evaluation import byte_classes

    cache = cache if cache is not None else ScoreCache(None)
    prepared = [_prepare(d, tokenizer) for d in docs]
    prefix = prefix_token_id(tokenizer)
    windows = [w for i, p in enumerate(prepared) for w in rolling_windows(i, p.tokens, prefix, max_length)]
    first_target: list[int] = []  # each window's first target's place in its document
    seen: dict[int, int] = {}
    for w in windows:
        first_target.append(seen.get(w.doc_index, 0))
        seen[w.doc_index] = first_target[-1] + len(w.targets)
    digests = [document_digest(d) for d in docs]
    settings = {
        "max_length": max_length,
        "prefix": prefix,
        "classes": byte_classes.VERSION,
        "tokens": byte_losses,
    }
    keys = [
        item_key(model_id, settings, "window", [digests[w.doc_index], first_target[k], len(w.targets)])
        for k, w in enumerate(windows)
    ]
    # Longest first keeps padding low; the index breaks ties, so the order never depends on chance.
    order = sorted(range(len(windows)), key=lambda k: (-len(windows[k].inputs), k))
    device = next(model.parameters()).device

    def compute(indices: list[int]) -> list[list[float]]:
        batch = [windows[k] for k in indices]
        width = max(len(w.inputs) for w in batch)
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        for row, w in enumerate(batch):
            ids[row, : len(w.inputs)] = torch.tensor(w.inputs, dtype=torch.long)
        with torch.inference_mode():
            # Right padding needs no attention mask: a causal model never looks ahead at the pad.
            logits = model(ids.to(device)).logits
            # Only the positions that score a target are normalised (not the padding, nor the
            # context of a later window); one transfer per batch, not one per row.
            scored = torch.cat(
                [logits[row, len(w.inputs) - len(w.targets) : len(w.inputs)] for row, w in enumerate(batch)]
            )
            targets = torch.tensor([t for w in batch for t in w.targets], dtype=torch.long, device=device)
            per_token = (
                torch.nn.functional.cross_entropy(scored.float(), targets, reduction="none")
                .double()
                .cpu()
                .numpy()
            )
        out, start = [], 0
        for k, w in zip(indices, batch, strict=True):
            losses = per_token[start : start + len(w.targets)]
            start += len(w.targets)
            fractions = prepared[w.doc_index].fractions
            value = [float(losses.sum())]
            if fractions is not None:
                a = first_target[k]
                value += [float(v) for v in losses @ fractions[a : a + len(w.targets)]]
            if byte_losses:
                value += [float(v) for v in losses]
            out.append(value)
        return out

    values = cache.score(keys, order, batch_size, compute)
    nll = [0.0] * len(docs)
    classes = len(byte_classes.CLASSES)
    per_class = [np.zeros(classes) if p.fractions is not None else None for p in prepared]
    per_token = [np.zeros(len(p.tokens)) for p in prepared] if byte_losses else None
    for k, (w, value) in enumerate(zip(windows, values, strict=True)):
        nll[w.doc_index] += value[0]
        if per_class[w.doc_index] is not None:
            per_class[w.doc_index] += value[1 : 1 + classes]
        if per_token is not None:
            losses = value[1 + classes :] if per_class[w.doc_index] is not None else value[1:]
            per_token[w.doc_index][first_target[k] : first_target[k] + len(losses)] = losses
    return [
        DocumentScore(
            d.dataset,
            d.domain,
            nll[i],
            len(prepared[i].tokens),
            d.num_bytes,
            tuple(float(v) for v in per_class[i]) if per_class[i] is not None else None,
            prepared[i].class_bytes,
            byte_classes.byte_losses(prepared[i].spans, per_token[i], d.num_bytes)
            if per_token is not None and prepared[i].spans is not None
            else None,
        )
        for i, d in enumerate(docs)
    ]


def _columns(scores: Sequence[DocumentScore]) -> np.ndarray:
    """Per document: nll (nats), tokens, bytes."""
    return np.array([(s.nll, s.tokens, s.bytes) for s in scores], dtype=np.float64).reshape(-1, 3)


def _group(columns: np.ndarray, sums: np.ndarray) -> dict:
    """loss, perplexity and bits-per-byte of one group of documents, from its columns and resampled sums."""
    # Each column summed on its own and scaled as stats.ratio_estimate does, so any other view of
    # the same items (a contamination report's "all") gives the same number to the last bit.
    nll, tokens, num_bytes = (float(columns[:, k].sum()) for k in range(3))
    n = len(columns)
    bits = 1 / math.log(2)
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = stats.Estimate(nll / tokens if tokens else float("nan"), sums[:, 0] / sums[:, 1], n)
        bpb = stats.Estimate(
            bits * (nll / num_bytes) if num_bytes else float("nan"), bits * sums[:, 0] / sums[:, 2], n
        )
    return {"loss": loss, "perplexity": loss.map(np.exp), "bpb": bpb}


def _as_json(estimates: dict[str, stats.Estimate]) -> dict:
    return {name: e.metric().to_json() for name, e in estimates.items()}


def _stratified(
    scores: Sequence[DocumentScore], key, iters: int, seed: int
) -> tuple[dict[str, dict], dict, dict]:
    """Per group (by `key`): metrics and sizes; then the pooled micro and the plain macro estimates."""
    names = list(dict.fromkeys(key(s) for s in scores))
    columns = [_columns([s for s in scores if key(s) == name]) for name in names]
    sums = stats.stratified_sums(columns, iters, seed)
    groups = {name: _group(c, r) for name, c, r in zip(names, columns, sums, strict=True)}
    everything = np.concatenate(columns) if columns else np.zeros((0, 3))
    micro = _group(everything, sum(sums)) if columns else {}
    n = len(everything)
    macro = (
        {
            metric: stats.Estimate(
                float(np.mean([g[metric].value for g in groups.values()])),
                np.mean([g[metric].replicates for g in groups.values()], axis=0),
                n,
            )
            for metric in _AVERAGED
        }
        if groups
        else {}
    )
    per_group = {
        name: {**_as_json(groups[name]), **_sizes(c)} for name, c in zip(names, columns, strict=True)
    }
    return per_group, {**_as_json(micro), **_sizes(everything)} if columns else {}, _as_json(macro)


def _sizes(columns: np.ndarray) -> dict:
    return {
        "documents": len(columns),
        "tokens": int(columns[:, 1].sum()),
        "bytes": int(columns[:, 2].sum()),
    }


def summarize(scores: Sequence[DocumentScore], iters: int = stats.ITERS, seed: int = stats.SEED) -> dict:
    """Per-dataset and per-domain metrics, the micro average over everything, and macro averages.

    Each of loss, perplexity and bpb is a metric object (`marin.evaluation.stats`): a bootstrap over
    documents, stratified by dataset for the datasets, micro and `macro.datasets`, and by domain for
    the domains and `macro.domains`; perplexity's replicates are exp of loss's.
    """
    datasets, micro, macro_datasets = _stratified(scores, lambda s: s.dataset, iters, seed)
    domains, _, macro_domains = _stratified(scores, lambda s: s.domain, iters, seed)
    return {
        "datasets": datasets,
        "domains": domains,
        "micro": micro,
        "macro": {"datasets": macro_datasets, "domains": macro_domains},
    }
