"""The harness's `generate_until` answered by our own layers' batched, KV-cached generator.

For a model we trained, `marin.experiment` gives the evaluation a token generator,
`generate(prompts, max_new_tokens, eos_id) -> new token ids per prompt` (`marin.training.generate`
over the export loaded into our own layers): the evaluation layer cannot import training, so the
generator is handed down. `generate_until` turns the harness's requests into its calls exactly as
lm-eval's `HFLM.generate_until` turns them into Hugging Face's `generate`: the same normalised
generation settings, the context encoded by the harness's own `tok_batch_encode` and cut on the left
to leave room for the new tokens, a row stopped at the model's generation EOS ids as `generate`
stops it, the continuation decoded by its `tok_decode` and cut at the first stop sequence (EOS's
text included). Greedy decoding of the same model then gives the same text;
`tests/marin/evaluation/test_own_generation.py` checks it for each architecture.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

TokenGenerator = Callable[[Sequence[Sequence[int]], int, int | None], list[list[int]]]


def generate_until(
    lm: Any, generate: TokenGenerator, requests: Sequence[tuple[str, dict]], batch_size: int
) -> list[str]:
    """The text for each greedy `(context, gen_kwargs)` request, as `lm` (an `HFLM`) would give it."""
    from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs, postprocess_generated_text

    eos_text = lm.tok_decode(lm.eot_token_id, skip_special_tokens=False)
    # Hugging Face's `generate` stops a row at the model's generation config's EOS ids (none: it goes
    # on, and decoding drops the EOS it passed); ours stops at one id, and the rest are cut here.
    configured = getattr(getattr(lm.model, "generation_config", None), "eos_token_id", None)
    stops = [configured] if isinstance(configured, int) else list(configured or [])
    out: list[str | None] = [None] * len(requests)
    groups: dict[str, list[int]] = {}
    for i, (_, gen_kwargs) in enumerate(requests):
        groups.setdefault(repr(sorted(gen_kwargs.items(), key=str)), []).append(i)
    for members in groups.values():
        kwargs = normalize_gen_kwargs(dict(requests[members[0]][1]), lm.max_gen_toks)
        until = handle_stop_sequences(kwargs.pop("until", None), eos=eos_text)
        max_gen_toks = int(kwargs.pop("max_gen_toks"))
        max_ctx_len = lm.max_length - max_gen_toks
        for start in range(0, len(members), max(1, batch_size)):
            batch = members[start : start + batch_size]
            encoded, mask = lm.tok_batch_encode(
                [requests[i][0] for i in batch], left_truncate_len=max_ctx_len
            )
            prompts = [
                [t for t, real in zip(row, m, strict=True) if real]
                for row, m in zip(encoded.tolist(), mask.tolist(), strict=True)
            ]
            new = generate(prompts, max_gen_toks, stops[0] if len(stops) == 1 else None)
            for i, tokens in zip(batch, new, strict=True):
                tokens = tokens[: next((n for n, t in enumerate(tokens) if t in stops), len(tokens))]
                text = lm.tok_decode(tokens)
                out[i] = postprocess_generated_text(generation=text, stop=until, think_end_token=None)
    return [text or "" for text in out]
