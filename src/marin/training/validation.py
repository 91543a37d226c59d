"""The trainer's validation score: mean next-token loss and bits per byte over the validation splits.

Windows of up to `seq_len + 1` tokens are taken in order, up to `max_tokens` per dataset; the
split's tail that fills no whole window is left out. Bytes are estimated as the split's average
bytes per token times the tokens predicted, so this bits-per-byte is a training-time estimate; the
evaluation step (`marin.experiment.evaluate`) counts each document's own bytes.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from marin.training.datasets import OpenedDataset


@torch.no_grad()
def validation_sums(
    model: nn.Module,
    datasets: Sequence[OpenedDataset],
    *,
    seq_len: int,
    max_tokens: int,
    batch_size: int,
    rank: int = 0,
    world_size: int = 1,
    lockstep: bool = False,
    autocast: contextlib.AbstractContextManager | None = None,
    document_eos: int | None = None,
) -> list[float]:
    """This rank's [summed loss in nats, tokens predicted, bytes] over its share of the windows.

    Rank r scores windows r, r + world_size, ...; sum the lists over ranks for the whole score.
    `lockstep` (FSDP, which gathers each block's weights from every rank) makes every rank run as many
    forwards as rank 0, which has the most windows: a rank out of windows runs one and discards it.
    `document_eos` scores with document masking, as a run trained with it computes.
    """
    options = {} if document_eos is None else {"document_eos": document_eos}
    autocast = autocast or contextlib.nullcontext()
    device = next(model.parameters()).device
    nll, count, nbytes = 0.0, 0.0, 0.0
    model.eval()
    try:
        for ds in datasets:
            split = ds.validation
            if split is None:
                continue
            window = min(seq_len + 1, split.num_tokens)
            stride = window - 1
            n_windows = min(max(1, (split.num_tokens - 1) // stride), max(1, max_tokens // window))
            mine = list(range(rank, n_windows, world_size))
            per_batch = max(1, batch_size // world_size)
            batches = len(range(0, n_windows, world_size)) if lockstep else len(mine)
            for i in range(0, batches, per_batch):
                rows = [split.tokens(w * stride, w * stride + window) for w in mine[i : i + per_batch]]
                if not rows:
                    with autocast:
                        model(torch.zeros((1, window - 1), dtype=torch.long, device=device), **options)
                    continue
                tokens = torch.from_numpy(np.stack(rows).astype(np.int64)).to(device)
                with autocast:
                    loss, _ = model(tokens[:, :-1], tokens[:, 1:], **options)
                predicted = tokens[:, 1:].numel()
                nll += loss.item() * predicted  # the model's loss is the mean over the targets
                count += predicted
                nbytes += predicted * split.num_bytes / split.num_tokens
    finally:
        model.train()
    return [nll, count, nbytes]


def validation_metrics(nll: float, count: float, nbytes: float) -> dict[str, float]:
    """`eval_loss` (nats per token) and `eval_bpb` from summed sums; empty when nothing was scored."""
    if count == 0:
        return {}
    return {"eval_loss": nll / count, "eval_bpb": nll / math.log(2) / nbytes if nbytes else float("nan")}
