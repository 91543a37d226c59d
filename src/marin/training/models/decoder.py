"""The decoder every dense architecture (and the mixture-of-experts) is assembled from, and its shared config.

`DecoderConfig` holds the fields Llama, Qwen3 and OLMo 2 share; an architecture subclasses it,
names itself, picks its parts through three class attributes (`QK_NORM`, `NORM_PLACEMENT`, and
`feed_forward()` for the mlp) and supplies its Hugging Face adapter. `Decoder` is the module:
token embedding, `num_layers` blocks (attention and feed-forward with their norms), final norm,
output projection, and the loss.

`forward(tokens, targets=None)` returns logits, or with targets `(loss, aux_losses)`: the mean
cross-entropy over targets not equal to -100 (`layers.causal_lm_loss`), and the feed-forwards'
auxiliary losses summed over layers (empty for dense models), plus the `z_loss` when asked. The
trainer minimises `loss + sum(aux_losses.values())` and logs each term. `document_eos=` keeps
attention within documents (`marin.training.document_masking`) for every architecture built here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import ClassVar, Self

import torch
from torch import nn

from marin.execution.arguments import Checked
from marin.training.document_masking import DocumentMask
from marin.training.errors import TrainingConfigError
from marin.training.models.layers import (
    AttentionConfig,
    FeedForwardConfig,
    KVCache,
    LayerCache,
    QKNorm,
    RMSNorm,
    SwiGLUConfig,
    causal_lm_loss,
    causal_lm_loss_with_z,
    rope_tables,
)


class NormPlacement(StrEnum):
    """Where a block's norms sit. PRE: on each sublayer's input (Llama, Qwen3: `input_layernorm`,
    `post_attention_layernorm`). POST: on each sublayer's output, before the residual add (OLMo 2:
    `post_attention_layernorm`, `post_feedforward_layernorm`)."""

    PRE = "pre"
    POST = "post"


_POSITIVE = ("hidden_dim", "intermediate_dim", "num_layers", "num_heads", "max_seq_len")


@dataclass(frozen=True)
class DecoderConfig(Checked):
    """The shape of a decoder-only transformer; each architecture's config subclasses it.

    `vocab_size=None` means "the tokenizer's vocabulary": the trainer resolves it from the token
    cache before building the model (`with_vocab_size`). `max_seq_len` is the longest sequence the
    model trains on; RoPE has no table to outgrow, but the trainer refuses longer ones. `head_dim`
    None is `hidden_dim // num_heads`; `num_kv_heads` None is `num_heads` (no grouping).

    `output_multiplier` α scales the logits (`α · lm_head(h)`), with `lm_head` initialised α times
    smaller so the initial logits do not change. Under Adam, which moves each weight by about the
    learning rate per step whatever its scale, this multiplies the output layer's effective learning
    rate by α. Tiny models need it: with a unit-RMS final hidden state of width d, each logit can
    move only about d · lr per step, which for d = 32 and lr = 6e-4 is too little to learn even the
    unigram distribution in 100 steps. The export folds α into the output weights.
    """

    architecture: ClassVar[str]  # the registry's name (models.base.register)
    QK_NORM: ClassVar[QKNorm] = QKNorm.NONE
    NORM_PLACEMENT: ClassVar[NormPlacement] = NormPlacement.PRE

    hidden_dim: int
    intermediate_dim: int
    num_layers: int
    num_heads: int
    num_kv_heads: int | None = None
    max_seq_len: int = 2048
    vocab_size: int | None = None
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    init_std: float = 0.02
    output_multiplier: float = 1.0
    head_dim: int | None = None

    def __post_init__(self) -> None:
        name = type(self).__name__
        for field in _POSITIVE:
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise TrainingConfigError(f"{name}.{field} must be a positive int, got {value!r}")
        if self.head_dim is None and self.hidden_dim % self.num_heads:
            raise TrainingConfigError(
                f"{name}.hidden_dim={self.hidden_dim} is not divisible by num_heads={self.num_heads}; "
                "change one, or set head_dim"
            )
        if self.head_dim is not None and (not isinstance(self.head_dim, int) or self.head_dim <= 0):
            raise TrainingConfigError(
                f"{name}.head_dim must be a positive int or None, got {self.head_dim!r}"
            )
        if self.attention_head_dim % 2:
            raise TrainingConfigError(f"{name}: head_dim={self.attention_head_dim} must be even for RoPE")
        if self.num_heads % self.kv_heads:
            raise TrainingConfigError(
                f"{name}.num_heads={self.num_heads} is not a multiple of num_kv_heads={self.kv_heads}"
            )
        if not self.output_multiplier > 0:
            raise TrainingConfigError(f"{name}.output_multiplier must be > 0, got {self.output_multiplier!r}")
        if self.tie_embeddings and self.output_multiplier != 1.0:
            raise TrainingConfigError(
                f"{name}.output_multiplier needs untied embeddings (tie_embeddings=False): the export "
                "folds it into the output weights"
            )
        if self.vocab_size is not None and (
            isinstance(self.vocab_size, bool) or not isinstance(self.vocab_size, int) or self.vocab_size <= 0
        ):
            raise TrainingConfigError(
                f"{name}.vocab_size must be a positive int or None, got {self.vocab_size!r}"
            )

    @property
    def attention_head_dim(self) -> int:
        """The width of one attention head: `head_dim`, or `hidden_dim // num_heads`."""
        return self.head_dim if self.head_dim is not None else self.hidden_dim // self.num_heads

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    def with_vocab_size(self, vocab_size: int) -> Self:
        """This config with `vocab_size` filled in (used when it was left to the tokenizer)."""
        return replace(self, vocab_size=vocab_size)

    def attention(self) -> AttentionConfig:
        """The attention part of every block."""
        return AttentionConfig(
            hidden_dim=self.hidden_dim,
            num_heads=self.num_heads,
            num_kv_heads=self.kv_heads,
            head_dim=self.attention_head_dim,
            qk_norm=self.QK_NORM,
            norm_eps=self.norm_eps,
        )

    def feed_forward(self) -> FeedForwardConfig:
        """The feed-forward part of every block (a SwiGLU; a mixture-of-experts returns its own)."""
        return SwiGLUConfig(self.hidden_dim, self.intermediate_dim)

    def build(self) -> Decoder:
        """The model, randomly initialised from the global torch RNG (seed it first)."""
        return Decoder(self)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        """The repeated units of `model`: FSDP shards each, activation checkpointing and compile wrap each."""
        return list(model.layers)

    def num_parameters(self, vocab_size: int | None = None, *, include_embeddings: bool = True) -> int:
        """The parameter count, computed from the shapes (matches `sum(p.numel())` of the module)."""
        vocab = vocab_size if vocab_size is not None else self.vocab_size
        if vocab is None and include_embeddings:
            raise TrainingConfigError(
                "num_parameters needs a vocab_size: the config leaves it to the tokenizer"
            )
        block = self.attention().num_parameters() + self.feed_forward().num_parameters() + 2 * self.hidden_dim
        body = self.num_layers * block + self.hidden_dim
        if not include_embeddings:
            return body
        return body + vocab * self.hidden_dim * (1 if self.tie_embeddings else 2)

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token: 6·N_matmul + 12·L·H·Q·T (PaLM appendix B).

        N_matmul counts the weights one token multiplies by: attention projections, the feed-forward's
        active weights, and the output projection (also when tied to the input table, which itself
        is a lookup); norms are left out. The attention term 12·L·H·Q·T is the score and value
        matmuls, forward and backward, with H·Q = heads × head_dim and T = seq_len; as is customary
        it ignores causal masking.
        """
        if self.vocab_size is None:
            raise TrainingConfigError("flops_per_token needs a resolved vocab_size")
        per_layer = self.attention().matmul_parameters() + self.feed_forward().matmul_parameters()
        matmul = self.num_layers * per_layer + self.vocab_size * self.hidden_dim
        attention_width = self.num_heads * self.attention_head_dim
        return 6.0 * matmul + 12.0 * self.num_layers * attention_width * seq_len


class Block(nn.Module):
    """One transformer layer: attention and feed-forward, each with a residual and an RMSNorm."""

    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.placement = config.NORM_PLACEMENT
        d, eps = config.hidden_dim, config.norm_eps
        if self.placement == NormPlacement.PRE:
            self.input_layernorm = RMSNorm(d, eps)
            self.self_attn = config.attention().build()
            self.post_attention_layernorm = RMSNorm(d, eps)
            self.mlp = config.feed_forward().build()
        else:
            self.self_attn = config.attention().build()
            self.post_attention_layernorm = RMSNorm(d, eps)
            self.mlp = config.feed_forward().build()
            self.post_feedforward_layernorm = RMSNorm(d, eps)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        documents: DocumentMask | None = None,
        cache: LayerCache | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The layer's output and its feed-forward's auxiliary losses (empty for a dense one);
        attention stays within documents when `documents` is given, and extends the layer's part
        of a KV cache when `cache` is."""
        if self.placement == NormPlacement.PRE:
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, documents, cache)
            out = self.mlp(self.post_attention_layernorm(x))
            out, aux = out if isinstance(out, tuple) else (out, {})
            return x + out, aux
        x = x + self.post_attention_layernorm(self.self_attn(x, cos, sin, documents, cache))
        out = self.mlp(x)
        out, aux = out if isinstance(out, tuple) else (out, {})
        return x + self.post_feedforward_layernorm(out), aux


class Decoder(nn.Module):
    """Token embedding, `num_layers` blocks, final norm, output projection; names as Hugging Face's
    `*ForCausalLM` without its `model.` prefix."""

    def __init__(self, config: DecoderConfig):
        super().__init__()
        if config.vocab_size is None:
            raise TrainingConfigError(
                f"{type(config).__name__} needs a resolved vocab_size; call config.with_vocab_size(tokenizer size)"
            )
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_dim)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_dim, config.norm_eps)
        self.lm_head = nn.Linear(config.hidden_dim, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal(0, init_std) weights; residual output projections (`o_proj`, `down_proj`, also an
        expert bank's) scaled by 1/sqrt(2·layers) (GPT-2); norms 1; `lm_head` / output_multiplier."""
        config = self.config
        std = config.init_std
        residual_std = std / math.sqrt(2 * config.num_layers)
        for name, param in self.named_parameters():
            if param.dim() == 1:
                nn.init.ones_(param)
            elif name.removesuffix(".weight").endswith(("o_proj", "down_proj")):
                nn.init.normal_(param, mean=0.0, std=residual_std)
            elif name == "lm_head.weight" and not config.tie_embeddings:
                nn.init.normal_(param, mean=0.0, std=std / config.output_multiplier)
            else:
                nn.init.normal_(param, mean=0.0, std=std)

    @staticmethod
    def _cached_positions(
        tokens: torch.Tensor, cache: KVCache, valid: torch.Tensor | None, masked: bool
    ) -> torch.Tensor:
        """The positions (batch, 1, seq) of `tokens` continuing `cache`'s rows, the cache's step begun."""
        if masked:
            raise TrainingConfigError("a KV cache decodes one sequence per row; it takes no document mask")
        if valid is None:
            if tokens.shape[1] == 1 and cache.length:
                return cache.begin_one().unsqueeze(1)
            valid = torch.ones(tokens.shape, dtype=torch.bool, device=tokens.device)
        return cache.begin(valid.to(torch.bool)).unsqueeze(1)

    def forward(
        self,
        tokens: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        document_eos: int | None = None,
        documents: DocumentMask | None = None,
        z_loss: float = 0.0,
        cache: KVCache | None = None,
        valid: torch.Tensor | None = None,
        per_row: bool = False,
        last: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Logits (batch, seq, vocab) for `tokens` (batch, seq); with `targets`, `(loss, aux_losses)`.

        `document_eos`: attention stays within the documents that token id ends, and positions
        restart at each (`marin.training.document_masking`); `documents` gives such a mask built
        otherwise (`DocumentMask.from_ids`). `z_loss` > 0 adds the z-loss of that coefficient to the
        auxiliary losses as `z_loss` (`layers.causal_lm_loss_with_z`). `per_row`: the loss of each
        row, shape (batch,) (validation scores windows one by one; not with `z_loss`).

        `cache` (a `layers.KVCache`, for generation): `tokens` continue the sequences cached so far,
        which they attend to along with themselves, and their keys and values are added to it;
        `valid` (batch, seq) marks which tokens are real (False: padding, as left-padded prompts
        have), default all. `marin.training.generate` decodes this way. `last`: the logits of the last
        position only, (batch, 1, vocab) (all a decoding step needs of a prompt)."""
        config = self.config
        if cache is not None:
            masked = documents is not None or document_eos is not None
            positions = self._cached_positions(tokens, cache, valid, masked)
        elif valid is not None:
            raise TrainingConfigError("valid= marks the padding of a KV cache's step; give cache= too")
        else:
            if document_eos is not None:
                documents = DocumentMask.of(tokens, document_eos)
            if documents is None:
                positions = torch.arange(tokens.shape[1], device=tokens.device)
            else:
                positions = documents.positions.unsqueeze(1)  # (batch, 1, seq): one rotation per token
        if cache is None:
            cos, sin = rope_tables(config.attention_head_dim, positions, config.rope_theta)
        else:
            cos, sin = cache.rotations(positions, config.attention_head_dim, config.rope_theta)
        x = self.embed_tokens(tokens)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        aux: dict[str, torch.Tensor] = {}
        for i, layer in enumerate(self.layers):
            if cache is None:
                x, layer_aux = layer(x, cos, sin, documents)
            else:
                x, layer_aux = layer(x, cos, sin, None, cache.layer(i))
            for name, value in layer_aux.items():
                aux[name] = aux[name] + value if name in aux else value
        if last:
            x = x[:, -1:]
        logits = self.lm_head(self.norm(x))
        if config.output_multiplier != 1.0:
            logits = logits * config.output_multiplier
        if targets is None:
            return logits
        if z_loss:
            loss, aux["z_loss"] = causal_lm_loss_with_z(logits, targets, z_loss)
            return loss, aux
        return causal_lm_loss(logits, targets, per_row=per_row), aux
