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
    """The summed negative log-likelihood (nats) of one document's tokens, and its size."""

    dataset: str
    domain: str
    nll: float
    tokens: int
    bytes: int


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


def score_documents(
    model, tokenizer, docs: Sequence[EvalDocument], max_length: int, batch_size: int = 8
) -> list[DocumentScore]:
    """Score every document with rolling windows; batches are formed in a fixed order, so reruns agree."""
    import torch

    token_lists = tokenize_documents(docs, tokenizer)
    prefix = prefix_token_id(tokenizer)
    windows = [w for i, toks in enumerate(token_lists) for w in rolling_windows(i, toks, prefix, max_length)]
    # Longest first keeps padding low; the index breaks ties, so the order never depends on chance.
    order = sorted(range(len(windows)), key=lambda k: (-len(windows[k].inputs), k))
    nll = [0.0] * len(docs)
    device = next(model.parameters()).device
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = [windows[k] for k in order[start : start + batch_size]]
            width = max(len(w.inputs) for w in batch)
            ids = torch.zeros((len(batch), width), dtype=torch.long)
            for row, w in enumerate(batch):
                ids[row, : len(w.inputs)] = torch.tensor(w.inputs, dtype=torch.long)
            # Right padding needs no attention mask: a causal model never looks ahead at the pad.
            logits = model(ids.to(device)).logits
            # Only the positions that score a target are normalised (not the padding, nor the
            # context of a later window); one transfer per batch, not one per row.
            scored = torch.cat(
                [logits[row, len(w.inputs) - len(w.targets) : len(w.inputs)] for row, w in enumerate(batch)]
            )
            targets = torch.tensor([t for w in batch for t in w.targets], dtype=torch.long, device=device)
            per_token = torch.nn.functional.cross_entropy(scored.float(), targets, reduction="none").double()
            bounds = torch.tensor([0] + [len(w.targets) for w in batch]).cumsum(0).tolist()
            sums = torch.stack(
                [per_token[a:b].sum() for a, b in zip(bounds, bounds[1:], strict=False)]
            ).tolist()
            for w, value in zip(batch, sums, strict=True):
                nll[w.doc_index] += value
    return [
        DocumentScore(d.dataset, d.domain, nll[i], len(token_lists[i]), d.num_bytes)
        for i, d in enumerate(docs)
    ]


def _columns(scores: Sequence[DocumentScore]) -> np.ndarray:
    """Per document: nll (nats), tokens, bytes."""
    return np.array([(s.nll, s.tokens, s.bytes) for s in scores], dtype=np.float64).reshape(-1, 3)


def _group(columns: np.ndarray, sums: np.ndarray) -> dict:
    """loss, perplexity and bits-per-byte of one group of documents, from its columns and resampled sums."""
    nll, tokens, num_bytes = (float(v) for v in columns.sum(axis=0))
    n = len(columns)
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = stats.Estimate(nll / tokens if tokens else float("nan"), sums[:, 0] / sums[:, 1], n)
        bpb = stats.Estimate(
            nll / math.log(2) / num_bytes if num_bytes else float("nan"),
            sums[:, 0] / math.log(2) / sums[:, 2],
            n,
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
