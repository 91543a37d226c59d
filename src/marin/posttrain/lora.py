"""LoRA (Hu et al. 2021): a frozen model whose chosen linear layers learn a low-rank update.

Each targeted `nn.Linear` W becomes `LoraLinear`: y = W x + (alpha / rank) * B A dropout(x), with A
(rank x in) initialised as `nn.Linear` initialises its weight (Kaiming-uniform) and B (out x rank) at
zero, so training starts at the model itself; only A and B train, every other parameter is frozen.
These are PEFT's definitions (`LoraConfig(r, lora_alpha, lora_dropout, target_modules)`), so:

- `save_peft_adapter` writes `adapter_config.json` and `adapter_model.safetensors` under Hugging Face
  names, which `peft.PeftModel.from_pretrained(<the HF export of the base model>, folder)` loads;
- `merged_copy` folds B A into W, giving a plain model whose export needs no PEFT.

A target names a module by its last name component (`"q_proj"` matches `layers.3.self_attn.q_proj`) or
by its full name; `"all-linear"` takes every linear layer of the transformer blocks. The output layer
and embeddings are never adapted.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import save as save_safetensors
from torch import nn

import storage
from marin.execution.errors import MarinError

ALL_LINEAR = "all-linear"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


class LoraConfigError(MarinError):
    """A LoRA configuration is invalid or names modules the model does not have."""


@dataclass(frozen=True)
class LoraConfig:
    """Which linear layers get adapters, and their shape: `rank`, `alpha` (the update is scaled by
    alpha / rank), `dropout` on the adapter's input, `targets` (module names or "all-linear")."""

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")

    def __post_init__(self) -> None:
        targets = (self.targets,) if isinstance(self.targets, str) else tuple(self.targets)
        object.__setattr__(self, "targets", targets)
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise LoraConfigError(f"LoraConfig.rank must be a positive int, got {self.rank!r}")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, int | float) or not self.alpha > 0:
            raise LoraConfigError(f"LoraConfig.alpha must be a number > 0, got {self.alpha!r}")
        if (
            isinstance(self.dropout, bool)
            or not isinstance(self.dropout, int | float)
            or not 0 <= self.dropout < 1
        ):
            raise LoraConfigError(f"LoraConfig.dropout must be in [0, 1), got {self.dropout!r}")
        if not targets or not all(isinstance(t, str) and t for t in targets):
            raise LoraConfigError(f"LoraConfig.targets must be non-empty module names, got {self.targets!r}")

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank


class LoraLinear(nn.Module):
    """A frozen linear layer (its `weight` and `bias` keep their names) plus a trainable `lora_B @ lora_A`."""

    def __init__(self, base: nn.Linear, config: LoraConfig):
        super().__init__()
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight = base.weight
        self.bias = base.bias
        for p in (self.weight, self.bias):
            if p is not None:
                p.requires_grad_(False)
        device, dtype = base.weight.device, base.weight.dtype
        self.lora_A = nn.Linear(self.in_features, config.rank, bias=False, device=device, dtype=dtype)
        self.lora_B = nn.Linear(config.rank, self.out_features, bias=False, device=device, dtype=dtype)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)
        self.dropout = nn.Dropout(config.dropout) if config.dropout else nn.Identity()
        self.scaling = config.scaling
        self.enabled = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.weight, self.bias)
        if not self.enabled:
            return y
        return y + self.lora_B(self.lora_A(self.dropout(x))) * self.scaling

    def delta_weight(self) -> torch.Tensor:
        """The update B A, scaled, as a weight of W's shape."""
        return (self.lora_B.weight @ self.lora_A.weight) * self.scaling


def adaptable_linears(model: nn.Module) -> dict[str, nn.Linear]:
    """The linear layers LoRA may adapt: those inside the transformer blocks (`layers.*`), by name."""
    return {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and name.split(".")[0] == "layers"
    }


def _matches(name: str, target: str) -> bool:
    return target == ALL_LINEAR or name == target or name.endswith("." + target)


def apply_lora(model: nn.Module, config: LoraConfig) -> list[str]:
    """Wrap `model`'s targeted linear layers in place, freeze everything else; the wrapped modules' names.

    A target that matches no module is a LoraConfigError listing the module names there are.
    """
    if any(True for _ in lora_modules(model)):
        raise LoraConfigError("the model already has LoRA adapters; apply LoRA once")
    candidates = adaptable_linears(model)
    for target in config.targets:
        if not any(_matches(name, target) for name in candidates):
            kinds = sorted({name.rsplit(".", 1)[-1] for name in candidates})
            raise LoraConfigError(
                f"LoRA target {target!r} matches no linear layer of the model; its layers are "
                f"{', '.join(kinds)} (or {ALL_LINEAR!r} for all of them)"
            )
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped = [name for name in candidates if any(_matches(name, t) for t in config.targets)]
    for name in wrapped:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, child, LoraLinear(getattr(parent, child), config))
    return wrapped


def lora_modules(model: nn.Module) -> Iterator[tuple[str, LoraLinear]]:
    """(name, module) of every LoraLinear in `model`."""
    for name, module in model.named_modules():
        if isinstance(module, LoraLinear):
            yield name, module


class Adapters(nn.Module):
    """A model's adapters gathered as one module (sharing their parameters with it): what the
    optimizer steps and a checkpoint holds, so both are the adapters' size, not the model's."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.adapters = nn.ModuleDict(
            {
                name.replace(".", "-"): nn.ModuleDict({"lora_A": m.lora_A, "lora_B": m.lora_B})
                for name, m in lora_modules(model)
            }
        )
        if not self.adapters:
            raise LoraConfigError("the model has no LoRA adapters to gather; apply_lora first")


def adapter_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapters' weights under our names (`layers.0.self_attn.q_proj.lora_A.weight`, ...)."""
    return {
        name: p.detach() for name, p in model.named_parameters() if ".lora_A." in name or ".lora_B." in name
    }


@contextlib.contextmanager
def adapters_disabled(model: nn.Module) -> Iterator[None]:
    """Within the block the model computes without its adapters: the frozen base (DPO's reference)."""
    modules = [m for _, m in lora_modules(model)]
    for m in modules:
        m.enabled = False
    try:
        yield
    finally:
        for m in modules:
            m.enabled = True


def merged_copy(model: nn.Module) -> nn.Module:
    """A copy of `model` with every adapter folded into its weight (W + scale B A) and no LoraLinear left."""
    return _unwrapped_copy(model, merge=True)


def base_copy(model: nn.Module) -> nn.Module:
    """A copy of `model` without its adapters: the frozen base model, as plain linear layers."""
    return _unwrapped_copy(model, merge=False)


def _unwrapped_copy(model: nn.Module, merge: bool) -> nn.Module:
    out = copy.deepcopy(model)
    for name, module in list(lora_modules(out)):
        linear = nn.Linear(
            module.in_features,
            module.out_features,
            bias=module.bias is not None,
            device=module.weight.device,
            dtype=module.weight.dtype,
        )
        with torch.no_grad():
            weight = module.weight + module.delta_weight().to(module.weight.dtype) if merge else module.weight
            linear.weight.copy_(weight)
            if module.bias is not None:
                linear.bias.copy_(module.bias)
        parent_name, _, child = name.rpartition(".")
        setattr(out.get_submodule(parent_name), child, linear)
    for p in out.parameters():
        p.requires_grad_(True)
    return out


def peft_adapter_config(config: LoraConfig, hf_modules: list[str], base_model: str | None) -> dict:
    """PEFT's `adapter_config.json` for adapters on the Hugging Face modules `hf_modules`.

    `target_modules` lists those modules by full name, so PEFT wraps exactly the layers we adapted.
    """
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": config.rank,
        "lora_alpha": config.alpha,
        "lora_dropout": config.dropout,
        "target_modules": sorted(hf_modules),
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "use_dora": False,
        "init_lora_weights": True,
        "modules_to_save": None,
        "inference_mode": True,
    }


def hf_module_name(model_config: Any, name: str, module: LoraLinear) -> str:
    """The Hugging Face model's name of our linear layer `name` (`layers.0.self_attn.q_proj` ->
    `model.layers.0.self_attn.q_proj` for Llama), as the architecture's adapter renames its weight."""
    renamed = model_config.hf.to_hf_state_dict(model_config, {f"{name}.weight": module.weight})
    (hf_weight,) = renamed
    return hf_weight.removesuffix(".weight")


def save_peft_adapter(
    model: nn.Module,
    model_config: Any,
    config: LoraConfig,
    out_dir: str,
    base_model: str | None = None,
) -> str:
    """Write the adapters as PEFT does: `adapter_model.safetensors` and `adapter_config.json` (last).

    PEFT's keys are the Hugging Face module names (`hf_module_name`) under `base_model.model.`;
    `base_model` is recorded as `base_model_name_or_path`.
    """
    tensors, hf_modules = {}, []
    for name, module in lora_modules(model):
        hf = hf_module_name(model_config, name, module)
        hf_modules.append(hf)
        for part in ("lora_A", "lora_B"):
            weight = getattr(module, part).weight.detach().to("cpu").float().contiguous()
            tensors[f"base_model.model.{hf}.{part}.weight"] = weight
    storage.makedirs(out_dir)
    storage.write_atomic(
        storage.join(out_dir, ADAPTER_WEIGHTS), save_safetensors(tensors, metadata={"format": "pt"})
    )
    text = json.dumps(peft_adapter_config(config, hf_modules, base_model), indent=2)
    storage.write_atomic(storage.join(out_dir, ADAPTER_CONFIG), text.encode())
    return out_dir
