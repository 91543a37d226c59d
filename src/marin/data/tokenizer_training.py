"""Train a byte-level BPE tokenizer (Hugging Face `tokenizers`) and save it as AutoTokenizer files.

Byte-level BPE with no normalizer round-trips any UTF-8 text exactly, which the token caches rely on.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable

from marin.data.tokenizer import copy_local_tree

BOS_TOKEN = "<|begin_of_text|>"
EOS_TOKEN = "<|end_of_text|>"
PAD_TOKEN = "<|pad|>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, PAD_TOKEN)


class TokenizerTrainingError(ValueError):
    """The training parameters cannot produce a tokenizer (vocabulary too small, no text)."""


def train_byte_level_bpe(texts: Iterable[str], vocab_size: int, dest: str, min_frequency: int = 2) -> None:
    """Train a byte-level BPE of `vocab_size` entries (special tokens included) on `texts`; save to `dest`.

    `dest` (a local folder or fsspec URL) then holds tokenizer.json, tokenizer_config.json and
    special_tokens_map.json, loadable with `transformers.AutoTokenizer.from_pretrained(dest)`;
    EOS is `<|end_of_text|>`, BOS `<|begin_of_text|>`, PAD `<|pad|>`.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(SPECIAL_TOKENS):
        raise TokenizerTrainingError(
            f"vocab_size={vocab_size} is too small for a byte-level BPE: it needs at least "
            f"{len(alphabet) + len(SPECIAL_TOKENS)} (256 bytes + {len(SPECIAL_TOKENS)} special tokens)"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    seen = 0

    def counted() -> Iterable[str]:
        nonlocal seen
        for text in texts:
            seen += 1
            yield text

    tok.train_from_iterator(counted(), trainer=trainer)
    if seen == 0:
        raise TokenizerTrainingError("no text to train the tokenizer on: the source yielded no documents")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        clean_up_tokenization_spaces=False,
        model_max_length=1 << 30,
    )
    with tempfile.TemporaryDirectory(prefix="marin-bpe-") as tmp:
        fast.save_pretrained(tmp)
        copy_local_tree(tmp, dest)
