"""Train a byte-level BPE tokenizer (Hugging Face `tokenizers`) and save it as AutoTokenizer files.

Byte-level BPE with no normalizer round-trips any UTF-8 text exactly, which the token caches rely on.
A chat template (`marin.data.chat_template`), when asked for, is saved with the tokenizer, and the
special tokens a built-in template uses are reserved right after BOS, EOS and PAD.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable

from marin.data.chat_template import BUILTIN_TEMPLATES
from marin.data.tokenizer import copy_local_tree

BOS_TOKEN = "<|begin_of_text|>"
EOS_TOKEN = "<|end_of_text|>"
PAD_TOKEN = "<|pad|>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, PAD_TOKEN)


class TokenizerTrainingError(ValueError):
    """The training parameters cannot produce a tokenizer (vocabulary too small, no text)."""


def chat_template_and_tokens(chat_template: str | None) -> tuple[str | None, tuple[str, ...]]:
    """The Jinja text of `chat_template` (a built-in name or a template) and the special tokens it needs."""
    if chat_template is None:
        return None, ()
    if chat_template in BUILTIN_TEMPLATES:
        return BUILTIN_TEMPLATES[chat_template]
    if "{" not in chat_template:
        raise TokenizerTrainingError(
            f"chat_template={chat_template!r} is neither a built-in template ({', '.join(BUILTIN_TEMPLATES)}) "
            "nor a Jinja template"
        )
    return chat_template, ()


def train_byte_level_bpe(
    texts: Iterable[str],
    vocab_size: int,
    dest: str,
    min_frequency: int = 2,
    chat_template: str | None = None,
) -> None:
    """Train a byte-level BPE of `vocab_size` entries (special tokens included) on `texts`; save to `dest`.

    `dest` (a local folder or fsspec URL) then holds tokenizer.json, tokenizer_config.json and
    special_tokens_map.json, loadable with `transformers.AutoTokenizer.from_pretrained(dest)`;
    EOS is `<|end_of_text|>`, BOS `<|begin_of_text|>`, PAD `<|pad|>`. `chat_template` is a built-in
    template's name ("llama3") or a Jinja template; it is saved with the tokenizer, which then chats
    through `apply_chat_template`.
    """
    template, chat_tokens = chat_template_and_tokens(chat_template)
    specials = SPECIAL_TOKENS + chat_tokens
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(specials):
        raise TokenizerTrainingError(
            f"vocab_size={vocab_size} is too small for a byte-level BPE: it needs at least "
            f"{len(alphabet) + len(specials)} (256 bytes + {len(specials)} special tokens)"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(specials),
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
    if template is not None:
        fast.chat_template = template
    with tempfile.TemporaryDirectory(prefix="marin-bpe-") as tmp:
        fast.save_pretrained(tmp)
        copy_local_tree(tmp, dest)
