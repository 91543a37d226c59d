"""The Hugging Face adapter of decoder architectures: `config.json` and state-dict names, both ways.

Our parameter names are Hugging Face's without the `model.` prefix of the decoder, and RoPE uses
the same rotate-half layout, so weights are renamed and copied, never permuted. The output
multiplier (`DecoderConfig.output_multiplier`), which HF's classes lack, is folded into
`lm_head.weight` on export and divided back out on import; tied embeddings are stored once.
An architecture whose weights are laid out differently (an expert bank stored per expert)
subclasses `DecoderHF` and converts those names in the two state-dict methods.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from marin.training.errors import TrainingConfigError


class DecoderHF:
    """The adapter of a `DecoderConfig` architecture: set it as the config class's `hf` attribute,
    `hf: ClassVar[DecoderHF] = DecoderHF("llama", "LlamaForCausalLM", "LlamaConfig")`, naming the
    HF model type, model class and config class (the class it is set on is the one it builds)."""

    def __init__(self, model_type: str, hf_class: str, config_class: str):
        self.model_type = model_type
        self.model_types: tuple[str, ...] = (model_type,)
        self.hf_class = hf_class
        self.config_class = config_class
        self.config_cls: type | None = None

    def __set_name__(self, owner: type, name: str) -> None:
        self.config_cls = owner

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_type!r}, {self.hf_class!r}, {self.config_class!r})"

    def classes(self, config: Any) -> tuple[str, str]:
        """The transformers model and config class `config` exports as (an architecture that
        exports as one of several HF classes, by a config field, overrides this)."""
        return self.hf_class, self.config_class

    def config_kwargs(self, config: Any) -> dict[str, Any]:
        """The transformers config's arguments for `config` (a subclass adds its architecture's own)."""
        return dict(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_dim,
            intermediate_size=config.intermediate_dim,
            num_hidden_layers=config.num_layers,
            num_attention_heads=config.num_heads,
            num_key_value_heads=config.kv_heads,
            head_dim=config.attention_head_dim,
            hidden_act="silu",
            max_position_embeddings=config.max_seq_len,
            rms_norm_eps=config.norm_eps,
            tie_word_embeddings=config.tie_embeddings,
            initializer_range=config.init_std,
            attention_bias=False,
        )

    def config_json(self, config: Any, *, eos_id: int | None = None, bos_id: int | None = None) -> dict:
        """The export's `config.json`, built through the installed transformers' config class."""
        import transformers

        hf_class, config_class = self.classes(config)
        hf_config_cls = getattr(transformers, config_class)
        kwargs = self.config_kwargs(config) | {
            "bos_token_id": bos_id,
            "eos_token_id": eos_id,
            "architectures": [hf_class],
        }
        # transformers 5 moved rope_theta into rope_parameters; 4.x takes it directly.
        if "rope_parameters" in inspect.signature(hf_config_cls.__init__).parameters:
            kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": config.rope_theta}
        else:
            kwargs["rope_theta"] = config.rope_theta
        return hf_config_cls(**kwargs).to_dict()

    def from_config_json(self, hf: Mapping[str, Any]) -> Any:
        """Our config for an HF `config.json` of this model type (bias, other activations, other RoPE
        scalings are refused: our modules have none)."""
        where = f"Hugging Face {hf.get('model_type', self.model_type)} config"
        if hf.get("attention_bias") or hf.get("mlp_bias"):
            raise TrainingConfigError(f"{where} has biases (attention_bias / mlp_bias); ours has none")
        if hf.get("hidden_act", "silu") != "silu":
            raise TrainingConfigError(f"{where} uses hidden_act={hf['hidden_act']!r}; ours is silu (SwiGLU)")
        rope = hf.get("rope_parameters") or {}
        scaling = hf.get("rope_scaling") or {}
        if rope.get("rope_type", "default") != "default" or scaling.get("rope_type", "default") != "default":
            raise TrainingConfigError(f"{where} scales RoPE ({rope or scaling}); ours is plain RoPE")
        heads = int(hf["num_attention_heads"])
        head_dim = hf.get("head_dim")
        hidden = int(hf["hidden_size"])
        return self.config_cls(
            hidden_dim=hidden,
            intermediate_dim=int(hf["intermediate_size"]),
            num_layers=int(hf["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(hf.get("num_key_value_heads") or heads),
            max_seq_len=int(hf["max_position_embeddings"]),
            vocab_size=int(hf["vocab_size"]),
            rope_theta=float(rope.get("rope_theta", hf.get("rope_theta", 10000.0))),
            norm_eps=float(hf["rms_norm_eps"]),
            tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
            init_std=float(hf.get("initializer_range", 0.02)),
            head_dim=None if head_dim is None or int(head_dim) * heads == hidden else int(head_dim),
            **self.extra_fields(hf),
        )

    def extra_fields(self, hf: Mapping[str, Any]) -> dict[str, Any]:
        """Fields of our config an architecture reads from `config.json` beyond the shared ones."""
        return {}

    def to_hf_state_dict(self, config: Any, weights: Mapping[str, Any]) -> dict:
        """Our weights under HF's names, float32 on CPU; the output multiplier folded into `lm_head`;
        a tied `lm_head` is not stored (HF ties it to the embedding on load)."""
        tensors = {}
        for name, param in weights.items():
            if name == "lm_head.weight" and config.tie_embeddings:
                continue
            tensor = param.detach().to("cpu").float()
            if name == "lm_head.weight" and config.output_multiplier != 1.0:
                tensor = tensor * config.output_multiplier
            tensors[name if name.startswith("lm_head.") else f"model.{name}"] = tensor.contiguous()
        return tensors

    def from_hf_state_dict(self, config: Any, tensors: Mapping[str, Any]) -> dict:
        """HF's weights under our names: the multiplier divided back out of `lm_head.weight`; with
        tied embeddings a stored `lm_head.weight` is dropped (ours is the embedding's); rotary
        caches HF may store are ignored."""
        out = {}
        for hf_name, tensor in tensors.items():
            if hf_name.endswith("rotary_emb.inv_freq"):
                continue
            name = hf_name.removeprefix("model.")
            if name == "lm_head.weight":
                if config.tie_embeddings:
                    continue
                if config.output_multiplier != 1.0:
                    tensor = tensor / config.output_multiplier
            out[name] = tensor
        return out
