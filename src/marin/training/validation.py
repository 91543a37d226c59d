"""The validation windows of language modelling: what `LanguageModeling.eval_batches` scores.

Windows of up to `seq_len + 1` tokens are taken in order from each dataset's validation split, up to
`max_tokens` per dataset; the split's tail that fills no whole window is left out. Each carries the
split's average bytes per token, so bits per byte are estimated from the tokens predicted: a
training-time estimate, where the evaluation step (`marin.experiment.evaluate`) counts each
document's own bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from marin.training.datasets import OpenedDataset
from marin.training.objective import EvalBatch


def validation_batches(
    datasets: Sequence[OpenedDataset],
    *,
    seq_len: int,
    max_tokens: int,
    batch_size: int,
    device: torch.device,
    rank: int = 0,
    world_size: int = 1,
    lockstep: bool = False,
) -> Iterator[EvalBatch]:
    """This rank's batches of validation windows (rows of `seq_len` inputs and their next tokens).

    Rank r scores windows r, r + world_size, ...; the sums over ranks are the whole score.
    `lockstep` (FSDP, which gathers each block's weights from every rank) makes every rank run as many
    forwards as rank 0, which has the most windows: a rank out of windows runs a filler
    (`scored=False`).
    """
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
        info = {"bytes_per_token": split.num_bytes / split.num_tokens}
        for i in range(0, batches, per_batch):
            rows = [split.tokens(w * stride, w * stride + window) for w in mine[i : i + per_batch]]
            if not rows:
                filler = torch.zeros((1, window), dtype=torch.long, device=device)
                yield EvalBatch(filler[:, :-1], filler[:, 1:], scored=False)
                continue
            tokens = torch.from_numpy(np.stack(rows).astype(np.int64)).to(device)
            yield EvalBatch(tokens[:, :-1], tokens[:, 1:], info=info)
