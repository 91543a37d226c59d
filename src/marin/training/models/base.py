"""The model seam: the `ModelConfig` protocol every architecture's config implements, and the registry.

An architecture is one module of `marin.training.models` holding a frozen config class decorated
with `@register` (and imported by the package's `__init__`, its one registration). Everything else,
the trainer, FSDP, checkpoints, export, `init_from`, validation, metrics and `load_model`, works
through this protocol and never names an architecture:

- `architecture` (class attribute): the registry's name, e.g. "llama"; `hf`: its `HFAdapter`.
- `vocab_size` (None: the tokenizer's, see `with_vocab_size`) and `max_seq_len`.
- `build()`: the `nn.Module`, randomly initialised; `model(tokens)` returns logits (batch, seq,
  vocab) and `model(tokens, targets)` returns `(loss, aux_losses)`: the mean cross-entropy over the
  targets that are not -100, and a dict of named, already weighted auxiliary losses (empty for a
  dense model) that the trainer adds to the objective and logs. Any module of the model may also
  have `step_metrics() -> dict[str, float]` (what to log that is not a loss, e.g. per-expert token
  fractions); the trainer calls it after each step and adds the result to the step's record (it
  runs on every rank: a module sums over ranks itself if it must).
- `blocks(model)`: the repeated units, each sharded by FSDP and wrapped by activation
  checkpointing and compile.
- `num_parameters(vocab_size=None, include_embeddings=True)` and `flops_per_token(seq_len)` (which
  counts the parameters one token uses: a mixture-of-experts its active experts).

A config's cache key is its key fields (`marin.execution.keyed`) plus `"architecture"`, except for
Llama, the default architecture, whose keys predate the others (`model_key`).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, Self

from marin.execution.keyed import key_fields
from marin.training.errors import TrainingConfigError

DEFAULT_ARCHITECTURE = "llama"  # a model key names its architecture unless it is this one


class HFAdapter(Protocol):
    """How an architecture maps to Hugging Face: its `config.json` and its state-dict names, both ways."""

    model_type: str  # config.json's "model_type", e.g. "llama"
    model_types: tuple[str, ...]  # every "model_type" it reads (several where a config field picks the class)
    hf_class: str  # the transformers class AutoModelForCausalLM loads, e.g. "LlamaForCausalLM"

    def config_json(self, config: Any, *, eos_id: int | None = None, bos_id: int | None = None) -> dict: ...

    def from_config_json(self, hf: Mapping[str, Any]) -> Any:
        """Our config for a Hugging Face `config.json` of this model type."""
        ...

    def to_hf_state_dict(self, config: Any, weights: Mapping[str, Any]) -> dict:
        """Our named weights (`named_parameters()`) under Hugging Face's names, as HF stores them."""
        ...

    def from_hf_state_dict(self, config: Any, tensors: Mapping[str, Any]) -> dict:
        """Hugging Face's weights under our names (what `named_parameters()` of `config.build()` has)."""
        ...


class ModelConfig(Protocol):
    """What every architecture's frozen config provides (see the module docstring)."""

    architecture: ClassVar[str]
    hf: ClassVar[HFAdapter]
    vocab_size: int | None
    max_seq_len: int

    def with_vocab_size(self, vocab_size: int) -> Self: ...

    def build(self) -> Any: ...

    def blocks(self, model: Any) -> list[Any]: ...

    def num_parameters(self, vocab_size: int | None = None, *, include_embeddings: bool = True) -> int: ...

    def flops_per_token(self, seq_len: int) -> float: ...


_REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: make `cls` (a frozen dataclass implementing ModelConfig) a known architecture."""
    name = getattr(cls, "architecture", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} needs a class attribute `architecture` naming it")
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:
        raise TypeError(f"{cls.__name__} must be a frozen dataclass")
    for method in ("build", "blocks", "num_parameters", "flops_per_token", "with_vocab_size"):
        if not callable(getattr(cls, method, None)):
            raise TypeError(f"{cls.__name__} lacks {method}() of the ModelConfig protocol")
    if getattr(cls, "hf", None) is None:
        raise TypeError(f"{cls.__name__} needs a class attribute `hf`, its Hugging Face adapter")
    known = _REGISTRY.get(name)
    if known is not None and known.__qualname__ != cls.__qualname__:
        raise TypeError(f"architecture {name!r} is registered already, by {known.__qualname__}")
    _REGISTRY[name] = cls
    return cls


def architectures() -> dict[str, type]:
    """Every registered architecture's name and config class (the built-in ones loaded)."""
    importlib.import_module("marin.training.models")
    return dict(_REGISTRY)


def architecture(name: str) -> type:
    """The config class of architecture `name`; TrainingConfigError naming the known ones otherwise."""
    known = architectures()
    if name not in known:
        raise TrainingConfigError(f"unknown architecture {name!r}; known: {', '.join(sorted(known))}")
    return known[name]


def is_model_config(value: Any) -> bool:
    """Whether `value` is a config of a registered architecture."""
    cls = architectures().get(getattr(type(value), "architecture", None) or "")
    return cls is not None and isinstance(value, cls)


def model_key(config: Any) -> dict[str, Any]:
    """A model config's key form: its key fields, and its architecture unless it is the default (Llama)."""
    fields = key_fields(config)
    if config.architecture == DEFAULT_ARCHITECTURE:
        return fields
    return {"architecture": config.architecture, **fields}


def config_to_json(config: Any) -> dict[str, Any]:
    """`{"architecture": name, "config": {field: value}}`: what a checkpoint records of its model."""
    return {"architecture": config.architecture, "config": dataclasses.asdict(config)}


def config_from_json(record: Mapping[str, Any]) -> Any:
    """The inverse of `config_to_json`."""
    cls = architecture(record["architecture"])
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    return cls(**{k: v for k, v in record["config"].items() if k in names})


def config_from_hf(hf: Mapping[str, Any]) -> Any:
    """Our config for a Hugging Face `config.json`, by its `model_type`; an error names what we support."""
    model_type = hf.get("model_type")
    by_type = {kind: cls for cls in architectures().values() for kind in cls.hf.model_types}
    if model_type not in by_type:
        raise TrainingConfigError(
            f"a Hugging Face model of type {model_type!r} has no marin architecture; supported: "
            f"{', '.join(sorted(by_type))}"
        )
    return by_type[model_type].hf.from_config_json(hf)
