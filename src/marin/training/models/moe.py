"""The `moe` architecture: a decoder whose feed-forwards are mixtures of experts, and its HF adapter.

The block: a top-k softmax router, experts run as grouped matmuls, an optional shared expert, and
the router's auxiliary losses. Routing follows Hugging Face's `OlmoeSparseMoeBlock` /
`Qwen3MoeSparseMoeBlock` / `Qwen2MoeSparseMoeBlock` exactly: softmax over all experts in float32, the
top k of those probabilities, optionally renormalised to sum to one (OLMoE does not, Qwen3-MoE
does), each expert a SwiGLU, the token's output the weighted sum of its k experts' outputs (plus
Qwen2-MoE's gated shared expert). Parameter names and layouts are HF's in-memory ones
(`gate.weight` (E, H), `experts.gate_up_proj` (E, 2I, H) with the gate half first,
`experts.down_proj` (E, H, I)), so a block's state dict loads into theirs unchanged; the checkpoint
format HF writes to disk (one `experts.{e}.gate_proj.weight` ... per expert) is `experts_to_hf` /
`experts_from_hf`.

The experts run without a Python loop over tokens or experts: the (token, slot) pairs are sorted by
expert id, the sorted rows go through one `torch._grouped_mm` per projection (each expert's rows a
contiguous group, `offs` the groups' ends), and the results are put back in token order and summed
with the routing weights. Every step has a fixed shape (T·k rows), so nothing waits on the device
to learn how many tokens an expert got. On CPU this is the fastest of the vectorised ways measured
(benchmarks/moe_throughput.py, on a quiet machine): per-expert padded capacity with `bmm` pays for
its padding, and HF's Python loop over experts is no faster at 8 experts and launches a matmul per
expert on a GPU.

The block returns its output and its auxiliary losses, Switch Transformer's load-balancing loss and
ST-MoE's router z-loss, weighted but not added to anything: the model sums them over layers, and
the trainer adds them to the objective and logs each. Each block also counts how many tokens each
expert got, for the per-expert token fractions the model reports after each step.

The architecture: `MoEConfig`, a `DecoderConfig` whose feed-forward is the block, exported by `MoEHF`
as `OlmoeForCausalLM`, `Qwen3MoeForCausalLM` or (with the shared expert) `Qwen2MoeForCausalLM`, as its
`hf_format` says; `MoEDecoder.step_metrics()` reports the experts' load after each step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, ClassVar

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from marin.training.errors import TrainingConfigError
from marin.training.models.base import register
from marin.training.models.decoder import Decoder, DecoderConfig
from marin.training.models.hf import DecoderHF
from marin.training.models.layers import AttentionConfig, QKNorm, SwiGLUConfig


@dataclass(frozen=True)
class MoEFeedForwardConfig:
    """A mixture-of-experts feed-forward: `num_experts` SwiGLU experts of width `expert_dim`, each token
    routed to `top_k` of them, plus a shared expert of width `shared_expert_dim` (0: none): a SwiGLU
    every token goes through, its output scaled by sigmoid(w · x) per token (Qwen1.5/2-MoE's).

    `normalize_top_k` renormalises the k routing weights to sum to one (HF's `norm_topk_prob`: off in
    OLMoE, on in Qwen3-MoE). The auxiliary losses the block returns are already multiplied by
    `load_balancing_weight` and `router_z_weight`.
    """

    hidden_dim: int
    expert_dim: int
    num_experts: int
    top_k: int
    normalize_top_k: bool = False
    shared_expert_dim: int = 0
    load_balancing_weight: float = 0.0
    router_z_weight: float = 0.0

    def __post_init__(self) -> None:
        for name in ("hidden_dim", "expert_dim", "num_experts", "top_k", "shared_expert_dim"):
            value = getattr(self, name)
            least = 0 if name == "shared_expert_dim" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise TrainingConfigError(f"MoE {name} must be an int >= {least}, got {value!r}")
        if not 1 <= self.top_k <= self.num_experts:
            raise TrainingConfigError(
                f"MoE top_k={self.top_k} must be between 1 and num_experts={self.num_experts}"
            )
        for name in ("hidden_dim", "expert_dim", "shared_expert_dim"):
            if getattr(self, name) % 8:  # grouped_mm wants 16-byte row strides, in bf16 too
                raise TrainingConfigError(
                    f"MoE {name}={getattr(self, name)} must be a multiple of 8 (grouped matmul rows)"
                )

    def build(self) -> MoEFeedForward:
        return MoEFeedForward(self)

    def num_parameters(self) -> int:
        """Every parameter: the router, all experts, the shared expert and its gate."""
        return self._router_and_shared() + 3 * self.hidden_dim * self.num_experts * self.expert_dim

    def matmul_parameters(self) -> int:
        """The weights one token multiplies by: the router, its top_k experts, the shared expert."""
        return self._router_and_shared() + 3 * self.hidden_dim * self.top_k * self.expert_dim

    def _router_and_shared(self) -> int:
        h, shared = self.hidden_dim, self.shared_expert_dim
        return self.num_experts * h + (3 * h * shared + h if shared else 0)


def load_balancing_loss(probs: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Switch Transformer's auxiliary loss of one layer, `E · Σ_e f_e · P_e`, as HF's
    `load_balancing_loss_func` computes it: f_e the (token, slot) pairs routed to expert e over the
    number of tokens (so Σ f_e = k), P_e the mean router probability of expert e. It is k when the
    experts are evenly loaded, more otherwise, and carries gradient through P only.
    probs (T, E) float32; counts (E,) from `expert_counts`."""
    routed = counts.to(probs.dtype) / probs.shape[0]
    return probs.shape[1] * torch.dot(routed, probs.mean(dim=0))


def router_z_loss(logits: torch.Tensor) -> torch.Tensor:
    """ST-MoE's z-loss: the mean over tokens of logsumexp(logits)², in float32. logits (T, E)."""
    return torch.logsumexp(logits.float(), dim=-1).square().mean()


def expert_counts(top_experts: torch.Tensor, num_experts: int) -> torch.Tensor:
    """How many (token, slot) pairs each expert was given, int64 (E,), without a device sync."""
    flat = top_experts.reshape(-1)
    return torch.zeros(num_experts, dtype=torch.int64, device=flat.device).scatter_add_(
        0, flat, torch.ones_like(flat)
    )


class TopKRouter(nn.Module):
    """Scores each token against every expert and keeps the k most probable."""

    def __init__(self, hidden_dim: int, num_experts: int, top_k: int, normalize_top_k: bool):
        super().__init__()
        self.num_experts, self.top_k, self.normalize_top_k = num_experts, top_k, normalize_top_k
        self.weight = nn.Parameter(torch.empty(num_experts, hidden_dim).normal_(0.0, 0.02))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """For x (T, H): router logits (T, E), float32 probabilities (T, E), and the top-k weights
        (T, k, in x's dtype) and expert ids (T, k)."""
        logits = F.linear(x, self.weight)
        probs = logits.float().softmax(dim=-1)
        weights, experts = probs.topk(self.top_k, dim=-1)
        if self.normalize_top_k:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return logits, probs, weights.to(logits.dtype), experts


def _matmul_dtype(x: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    # grouped_mm is not covered by autocast: follow autocast's choice where it is on, else the weights'.
    if torch.is_autocast_enabled(x.device.type):
        return torch.get_autocast_dtype(x.device.type)
    return weight.dtype


def grouped_linear(rows: torch.Tensor, weight: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """rows (N, in) @ weight[e].T for each group e of consecutive rows (`ends`: the groups' int32 ends);
    weight (E, out, in). One `torch._grouped_mm` (float64, which it does not take, a matmul per group)."""
    if rows.dtype == torch.float64:
        starts = torch.cat([ends.new_zeros(1), ends[:-1]]).tolist()
        return torch.cat([rows[a:b] @ w.T for a, b, w in zip(starts, ends.tolist(), weight, strict=True)])
    if torch.compiler.is_compiling() and rows.dtype != torch.bfloat16:
        return _grouped_mm_outside_the_graph(rows, weight, ends)
    return torch._grouped_mm(rows, weight.transpose(-2, -1), offs=ends)


@torch.compiler.disable
def _grouped_mm_outside_the_graph(
    rows: torch.Tensor, weight: torch.Tensor, ends: torch.Tensor
) -> torch.Tensor:
    # torch.compile traces grouped_mm in bfloat16 only; other dtypes run it eagerly, between graphs.
    return torch._grouped_mm(rows, weight.transpose(-2, -1), offs=ends)


class GroupedExperts(nn.Module):
    """`num_experts` SwiGLU experts held as stacked weights and applied with grouped matmuls."""

    def __init__(self, hidden_dim: int, expert_dim: int, num_experts: int):
        super().__init__()
        self.num_experts = num_experts
        self.gate_up_proj = nn.Parameter(
            torch.empty(num_experts, 2 * expert_dim, hidden_dim).normal_(0.0, 0.02)
        )
        self.down_proj = nn.Parameter(torch.empty(num_experts, hidden_dim, expert_dim).normal_(0.0, 0.02))

    def forward(
        self, x: torch.Tensor, weights: torch.Tensor, experts: torch.Tensor, counts: torch.Tensor
    ) -> torch.Tensor:
        """x (T, H); weights and experts (T, k) from the router, counts (E,) their `expert_counts`.
        Returns Σ_slots weight · expert(x), (T, H)."""
        tokens, k = experts.shape
        order = experts.reshape(-1).argsort(stable=True)  # (token, slot) pairs by expert, tokens in order
        ends = counts.cumsum(0).to(torch.int32)
        dtype = _matmul_dtype(x, self.gate_up_proj)
        rows = x.to(dtype)[order // k]
        gate, up = grouped_linear(rows, self.gate_up_proj.to(dtype), ends).chunk(2, -1)
        out = grouped_linear(F.silu(gate) * up, self.down_proj.to(dtype), ends)
        unsort = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=order.device))
        per_slot = out.index_select(0, unsort).view(tokens, k, -1)
        return torch.bmm(weights.to(per_slot.dtype).unsqueeze(1), per_slot).squeeze(1).to(x.dtype)


class MoEFeedForward(nn.Module):
    """The MoE block: router, routed experts, optional shared expert.

    `forward(x)` returns `(output, aux_losses)`: {"load_balancing_loss", "router_z_loss"}, each
    already weighted (`MoEFeedForwardConfig`). In training mode the block also counts the (token,
    slot) pairs each expert was given; `take_routed_counts()` returns them and restarts the count.
    The count lives in a plain attribute, not a buffer, so no checkpoint or DDP broadcast sees it.
    """

    def __init__(self, config: MoEFeedForwardConfig):
        super().__init__()
        self.config = config
        self.gate = TopKRouter(config.hidden_dim, config.num_experts, config.top_k, config.normalize_top_k)
        self.experts = GroupedExperts(config.hidden_dim, config.expert_dim, config.num_experts)
        # Qwen2-MoE's shared expert: a SwiGLU every token goes through, gated per token
        shared = config.shared_expert_dim
        self.shared_expert = SwiGLUConfig(config.hidden_dim, shared).build() if shared else None
        self.shared_expert_gate = nn.Linear(config.hidden_dim, 1, bias=False) if shared else None
        self.routed_counts: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """x (..., H) -> (output of x's shape, weighted auxiliary losses over all of x's tokens)."""
        config = self.config
        flat = x.reshape(-1, x.shape[-1])
        logits, probs, weights, experts = self.gate(flat)
        counts = expert_counts(experts, config.num_experts)
        out = self.experts(flat, weights, experts, counts)
        if self.shared_expert is not None:
            out = out + torch.sigmoid(self.shared_expert_gate(flat)) * self.shared_expert(flat)
        if self.training:
            self.routed_counts = counts if self.routed_counts is None else self.routed_counts + counts
        aux = {
            "load_balancing_loss": config.load_balancing_weight * load_balancing_loss(probs, counts),
            "router_z_loss": config.router_z_weight * router_z_loss(logits),
        }
        return out.view_as(x), aux

    def take_routed_counts(self) -> torch.Tensor | None:
        """How many (token, slot) pairs each expert got since the last call, int64 (E,); None if no
        training forward ran since. Each expert's share of the load is count / total: activation
        checkpointing, which runs a block's forward twice, doubles every count of that block alike."""
        counts, self.routed_counts = self.routed_counts, None
        return counts


def experts_to_hf(
    prefix: str, gate_up_proj: torch.Tensor, down_proj: torch.Tensor
) -> dict[str, torch.Tensor]:
    """An expert bank's weights as HF checkpoints store them: `{prefix}.{e}.gate_proj.weight` (I, H),
    `up_proj` (I, H) and `down_proj` (H, I) for each expert e (`prefix` ends in `experts`)."""
    gate, up = gate_up_proj.detach().chunk(2, dim=1)
    down = down_proj.detach()
    out = {}
    for e in range(gate.shape[0]):
        out[f"{prefix}.{e}.gate_proj.weight"] = gate[e].contiguous()
        out[f"{prefix}.{e}.up_proj.weight"] = up[e].contiguous()
        out[f"{prefix}.{e}.down_proj.weight"] = down[e].contiguous()
    return out


def experts_from_hf(
    tensors: dict[str, torch.Tensor], prefix: str, num_experts: int
) -> dict[str, torch.Tensor]:
    """The inverse of `experts_to_hf`: `{prefix}.gate_up_proj` and `{prefix}.down_proj` stacked from the
    per-expert tensors it pops from `tensors`. A checkpoint already in HF's fused in-memory layout
    (`{prefix}.gate_up_proj`, `{prefix}.down_proj`) passes through."""
    if f"{prefix}.gate_up_proj" in tensors:
        return {f"{prefix}.{name}": tensors.pop(f"{prefix}.{name}") for name in ("gate_up_proj", "down_proj")}
    try:
        gate = [tensors.pop(f"{prefix}.{e}.gate_proj.weight") for e in range(num_experts)]
        up = [tensors.pop(f"{prefix}.{e}.up_proj.weight") for e in range(num_experts)]
        down = [tensors.pop(f"{prefix}.{e}.down_proj.weight") for e in range(num_experts)]
    except KeyError as e:
        raise TrainingConfigError(
            f"the Hugging Face weights have no {e.args[0]}: the model config's num_experts={num_experts} "
            "does not match the checkpoint"
        ) from None
    return {
        f"{prefix}.gate_up_proj": torch.cat([torch.stack(gate), torch.stack(up)], dim=1),
        f"{prefix}.down_proj": torch.stack(down),
    }


class MoEFormat(StrEnum):
    """The Hugging Face class a `MoEConfig` exports as, which fixes where attention normalises its
    queries and keys, and whether there is a shared expert. OLMOE: `OlmoeForCausalLM`, QK-norm over
    the whole projection. QWEN3_MOE: `Qwen3MoeForCausalLM`, QK-norm per head. QWEN2_MOE:
    `Qwen2MoeForCausalLM`, no QK-norm, and a shared expert (`shared_expert_dim` > 0), which the other
    two classes have no place for."""

    OLMOE = "olmoe"
    QWEN3_MOE = "qwen3_moe"
    QWEN2_MOE = "qwen2_moe"


_QK_NORM = {MoEFormat.OLMOE: QKNorm.FULL, MoEFormat.QWEN3_MOE: QKNorm.HEAD, MoEFormat.QWEN2_MOE: QKNorm.NONE}


class MoEHF(DecoderHF):
    """The MoE's Hugging Face adapter: `OlmoeForCausalLM`, `Qwen3MoeForCausalLM` or
    `Qwen2MoeForCausalLM`, by `hf_format`.

    Our expert banks (`mlp.experts.gate_up_proj`, `mlp.experts.down_proj`) are stored as HF's
    checkpoints store them, one `mlp.experts.{e}.{gate,up,down}_proj.weight` per expert; on load,
    either that layout or HF's in-memory stacked one is taken.
    """

    CLASSES = {
        MoEFormat.OLMOE: ("OlmoeForCausalLM", "OlmoeConfig"),
        MoEFormat.QWEN3_MOE: ("Qwen3MoeForCausalLM", "Qwen3MoeConfig"),
        MoEFormat.QWEN2_MOE: ("Qwen2MoeForCausalLM", "Qwen2MoeConfig"),
    }

    def __init__(self) -> None:
        super().__init__("olmoe", "OlmoeForCausalLM", "OlmoeConfig")
        self.model_types = tuple(str(f) for f in MoEFormat)

    def classes(self, config: Any) -> tuple[str, str]:
        return self.CLASSES[config.hf_format]

    def config_kwargs(self, config: Any) -> dict[str, Any]:
        kwargs = super().config_kwargs(config) | dict(
            num_experts=config.num_experts,
            num_experts_per_tok=config.top_k,
            norm_topk_prob=config.normalize_top_k,
            router_aux_loss_coef=config.load_balancing_coef,
        )
        if config.hf_format != MoEFormat.OLMOE:  # the Qwen classes could mix in dense layers; ours has none
            kwargs |= dict(
                moe_intermediate_size=config.intermediate_dim, decoder_sparse_step=1, mlp_only_layers=[]
            )
        if config.hf_format == MoEFormat.QWEN2_MOE:
            kwargs |= dict(shared_expert_intermediate_size=config.shared_expert_dim, qkv_bias=False)
        return kwargs

    def from_config_json(self, hf: Mapping[str, Any]) -> Any:
        kind = hf.get("model_type")
        where = f"Hugging Face {kind} config"
        if kind in (MoEFormat.QWEN3_MOE, MoEFormat.QWEN2_MOE):
            if kind == MoEFormat.QWEN2_MOE and hf.get("qkv_bias", True):
                raise TrainingConfigError(f"{where} has q, k and v biases (qkv_bias); ours has none")
            if hf.get("mlp_only_layers") or int(hf.get("decoder_sparse_step", 1)) != 1:
                raise TrainingConfigError(
                    f"{where} has dense layers (mlp_only_layers / decoder_sparse_step); ours are all MoE"
                )
            if hf.get("use_sliding_window"):
                raise TrainingConfigError(
                    f"{where} uses sliding-window attention; ours attends to every position"
                )
            hf = {**hf, "intermediate_size": hf["moe_intermediate_size"]}
        elif hf.get("clip_qkv") is not None:
            raise TrainingConfigError(f"{where} clips q, k and v (clip_qkv={hf['clip_qkv']}); ours does not")
        return super().from_config_json(hf)

    def extra_fields(self, hf: Mapping[str, Any]) -> dict[str, Any]:
        return dict(
            num_experts=int(hf.get("num_experts") or hf["num_local_experts"]),  # Qwen3-MoE writes the latter
            top_k=int(hf["num_experts_per_tok"]),
            normalize_top_k=bool(hf.get("norm_topk_prob", False)),
            load_balancing_coef=float(hf.get("router_aux_loss_coef", 0.01)),
            hf_format=MoEFormat(hf["model_type"]),
            shared_expert_dim=int(hf["shared_expert_intermediate_size"])
            if hf["model_type"] == "qwen2_moe"
            else 0,
        )

    def to_hf_state_dict(self, config: Any, weights: Mapping[str, Any]) -> dict:
        tensors = super().to_hf_state_dict(config, weights)
        for i in range(config.num_layers):
            prefix = f"model.layers.{i}.mlp.experts"
            tensors |= experts_to_hf(
                prefix, tensors.pop(f"{prefix}.gate_up_proj"), tensors.pop(f"{prefix}.down_proj")
            )
        return tensors

    def from_hf_state_dict(self, config: Any, tensors: Mapping[str, Any]) -> dict:
        tensors = dict(tensors)
        stacked = {}
        for i in range(config.num_layers):
            stacked |= experts_from_hf(tensors, f"model.layers.{i}.mlp.experts", config.num_experts)
        return super().from_hf_state_dict(config, tensors | stacked)


@register
@dataclass(frozen=True)
class MoEConfig(DecoderConfig):
    """A decoder whose every feed-forward is a mixture of experts (the shared fields are `DecoderConfig`'s).

    `intermediate_dim` is one expert's width; each token goes to `top_k` of `num_experts` experts
    (plus a gated shared expert of width `shared_expert_dim`, if not 0: `hf_format="qwen2_moe"`).
    `normalize_top_k` is HF's `norm_topk_prob`. `load_balancing_coef` and `router_z_coef` weight the
    mean over layers of each layer's load-balancing loss and router z-loss, so their meaning does not
    depend on depth (`load_balancing_coef` is HF's `router_aux_loss_coef`; HF's classes have no z-loss).
    `hf_format` picks the Hugging Face class of the export and with it the QK-norm (`MoEFormat`).
    """

    architecture: ClassVar[str] = "moe"
    hf: ClassVar[MoEHF] = MoEHF()

    num_experts: int = 8
    top_k: int = 2
    normalize_top_k: bool = False
    shared_expert_dim: int = 0
    load_balancing_coef: float = 0.01
    router_z_coef: float = 0.001
    hf_format: MoEFormat = MoEFormat.OLMOE

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "hf_format", MoEFormat(self.hf_format))
        if self.intermediate_dim % 8:
            raise TrainingConfigError(
                f"MoEConfig.intermediate_dim={self.intermediate_dim} (each expert's width) must be a multiple of 8"
            )
        self.feed_forward()  # checks the router and expert shapes
        if (self.hf_format == MoEFormat.QWEN2_MOE) != bool(self.shared_expert_dim):
            raise TrainingConfigError(
                f"MoEConfig: shared_expert_dim={self.shared_expert_dim} with hf_format='{self.hf_format}': a "
                "shared expert is Qwen2-MoE's (hf_format='qwen2_moe', whose class always has one); OLMoE and "
                "Qwen3-MoE have none"
            )
        if self.hf_format == MoEFormat.OLMOE and self.attention_head_dim * self.num_heads != self.hidden_dim:
            raise TrainingConfigError(
                f"MoEConfig: hf_format='olmoe' needs head_dim × num_heads = hidden_dim (OLMoE's QK-norm "
                f"spans hidden_dim); got {self.attention_head_dim} × {self.num_heads}; use hf_format='qwen3_moe'"
            )

    def attention(self) -> AttentionConfig:
        return replace(super().attention(), qk_norm=_QK_NORM[self.hf_format])

    def feed_forward(self) -> MoEFeedForwardConfig:
        return MoEFeedForwardConfig(
            hidden_dim=self.hidden_dim,
            expert_dim=self.intermediate_dim,
            num_experts=self.num_experts,
            top_k=self.top_k,
            normalize_top_k=self.normalize_top_k,
            shared_expert_dim=self.shared_expert_dim,
            load_balancing_weight=self.load_balancing_coef / self.num_layers,
            router_z_weight=self.router_z_coef / self.num_layers,
        )

    def build(self) -> MoEDecoder:
        return MoEDecoder(self)

    def active_parameters(self, vocab_size: int | None = None, *, include_embeddings: bool = True) -> int:
        """The parameters one token uses: `num_parameters` less the experts it is not routed to."""
        idle = (self.num_experts - self.top_k) * 3 * self.hidden_dim * self.intermediate_dim
        return self.num_parameters(vocab_size, include_embeddings=include_embeddings) - self.num_layers * idle


class MoEDecoder(Decoder):
    """The decoder with mixture-of-experts feed-forwards; `step_metrics()` reports the experts' load."""

    def step_metrics(self) -> dict[str, float]:
        """Each expert's share of the routed tokens since the last call, averaged over layers
        (`expert_fraction_{e}`), and the largest and smallest share of any expert in any layer;
        summed over processes when there are several (every process calls this after each step)."""
        per_layer = [m.take_routed_counts() for m in self.modules() if isinstance(m, MoEFeedForward)]
        if any(c is None for c in per_layer):
            return {}
        counts = torch.stack(per_layer).double()
        if dist.is_initialized() and dist.get_world_size() > 1:
            dist.all_reduce(counts)
        fractions = counts / counts.sum(dim=1, keepdim=True)
        mean = fractions.mean(dim=0).tolist()
        metrics = {f"expert_fraction_{e}": value for e, value in enumerate(mean)}
        metrics["expert_fraction_max"] = fractions.max().item()
        metrics["expert_fraction_min"] = fractions.min().item()
        return metrics
