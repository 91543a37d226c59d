"""Tokenizers: resolve a spec (hub id or local folder) to files on disk, fingerprint them, describe them.

A tokenize step copies the tokenizer's files into its own output (`tokenizer/`), so a token cache
always carries the exact tokenizer that made it; the fingerprint is a hash of `tokenizer.json`'s
content, not of its path, so the same tokenizer found at two paths has one identity.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass

import orjson

import storage
from marin.execution.errors import MarinError

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
)
"""The files of a Hugging Face fast tokenizer that we copy; `tokenizer.json` is the one required."""


class TokenizerNotFoundError(MarinError):
    """A tokenizer spec names neither a local tokenizer folder nor a hub tokenizer we can reach."""


class TokenizerUnsupportedError(MarinError):
    """The tokenizer exists but cannot be used for token caches (no fast tokenizer.json, no EOS)."""


@dataclass(frozen=True)
class TokenizerInfo:
    """What a token cache records about its tokenizer."""

    fingerprint: str
    vocab_size: int
    eos_id: int
    bos_id: int | None
    eos_token: str
    bos_token: str | None


def hf_offline() -> bool:
    """Whether Hugging Face offline mode is on (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)."""
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def is_local_tokenizer(spec: str) -> bool:
    """Whether `spec` is a folder (local or fsspec URL) holding a tokenizer.json."""
    return storage.exists(storage.join(spec, "tokenizer.json"))


def materialize_tokenizer(spec: str, dest: str) -> None:
    """Write the tokenizer named by `spec` (a folder or a hub id) as files into the folder `dest`.

    A folder's tokenizer files are copied byte for byte; a hub id is loaded with
    `transformers.AutoTokenizer` (from the local HF cache when offline) and saved with
    `save_pretrained`. Either way `dest` then loads with `AutoTokenizer.from_pretrained(dest)`.
    """
    storage.makedirs(dest)
    if is_local_tokenizer(spec):
        for name in TOKENIZER_FILES:
            data = storage.read_bytes(storage.join(spec, name))
            if data is not None:
                storage.write_atomic(storage.join(dest, name), data)
        return
    tok = load_hf_tokenizer(spec)
    with tempfile.TemporaryDirectory(prefix="marin-tok-") as tmp:
        tok.save_pretrained(tmp)
        if not os.path.exists(os.path.join(tmp, "tokenizer.json")):
            raise TokenizerUnsupportedError(
                f"tokenizer {spec!r} has no fast (Rust) version with a tokenizer.json; marin token caches "
                "need one. Convert it with transformers' PreTrainedTokenizerFast, or pick another tokenizer"
            )
        copy_local_tree(tmp, dest)


def load_hf_tokenizer(spec: str):
    """`transformers.AutoTokenizer.from_pretrained(spec)`, with an error that says how to fix a miss."""
    from transformers import AutoTokenizer  # heavy import, only when a tokenizer is really needed

    local = spec if storage.is_local(spec) else None
    if local is not None and os.path.isdir(os.path.expanduser(local)):
        return AutoTokenizer.from_pretrained(os.path.expanduser(local))
    try:
        return AutoTokenizer.from_pretrained(spec)
    except (OSError, ValueError) as e:
        if hf_offline():
            raise TokenizerNotFoundError(
                f"tokenizer {spec!r} is not in the local Hugging Face cache and Hugging Face offline mode is "
                "on (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE). Provide it locally: either run once with network "
                'access (python -c "from transformers import AutoTokenizer; '
                f"AutoTokenizer.from_pretrained('{spec}')\") "
                "to fill the cache, or save it to a folder with save_pretrained(dir) and pass that folder as the "
                "tokenizer, or use the offline demo tokenizer (experiments.marin_tokenizer with "
                "MARIN_TOKENIZER unset). "
                f"Cause: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            ) from None
        raise TokenizerNotFoundError(
            f"tokenizer {spec!r} is neither a local folder with a tokenizer.json nor a tokenizer on the Hugging "
            f"Face hub we could load: {type(e).__name__}: {e}"
        ) from None


def fingerprint_bytes(tokenizer_json: bytes) -> str:
    """The identity of a tokenizer: sha256 of its tokenizer.json content."""
    return "sha256:" + hashlib.sha256(tokenizer_json).hexdigest()


def describe_tokenizer(folder: str) -> TokenizerInfo:
    """Read a materialized tokenizer folder: fingerprint, vocab size, EOS and BOS ids."""
    tok_json = storage.read_bytes(storage.join(folder, "tokenizer.json"))
    if tok_json is None:
        raise TokenizerNotFoundError(f"no tokenizer.json in {folder!r}")
    config = orjson.loads(storage.read_bytes(storage.join(folder, "tokenizer_config.json")) or b"{}")
    special = orjson.loads(storage.read_bytes(storage.join(folder, "special_tokens_map.json")) or b"{}")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tok_json.decode("utf-8"))
    eos = _token_name(config.get("eos_token")) or _token_name(special.get("eos_token"))
    bos = _token_name(config.get("bos_token")) or _token_name(special.get("bos_token"))
    eos_id = tok.token_to_id(eos) if eos else None
    if eos_id is None:
        raise TokenizerUnsupportedError(
            f"tokenizer in {folder!r} declares no usable EOS token (eos_token={eos!r} in tokenizer_config.json); "
            "token caches end every document with EOS. Set eos_token in tokenizer_config.json"
        )
    vocab = tok.get_vocab(with_added_tokens=True)
    return TokenizerInfo(
        fingerprint=fingerprint_bytes(tok_json),
        vocab_size=max(vocab.values()) + 1,
        eos_id=eos_id,
        bos_id=tok.token_to_id(bos) if bos else None,
        eos_token=eos,
        bos_token=bos,
    )


def _token_name(value: object) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def copy_local_tree(src: str, dest: str) -> None:
    """Copy a local folder's files into `dest` (local or fsspec)."""
    storage.makedirs(dest)
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                storage.write_atomic(storage.join(dest, name), f.read())
        elif os.path.isdir(path):
            copy_local_tree(path, storage.join(dest, name))
