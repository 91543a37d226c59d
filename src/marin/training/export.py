"""Export a trained model as a Hugging Face `LlamaForCausalLM` folder.

Our parameter names are Hugging Face's without the `model.` prefix on the decoder, and RoPE uses
the same rotate-half layout, so the export renames and copies; no weight is permuted.
"""

from __future__ import annotations

import inspect
import json

from safetensors.torch import save as save_safetensors
from torch import nn

import storage
from marin.training.model import LlamaConfig


def hf_config_dict(config: LlamaConfig, *, eos_id: int | None = None, bos_id: int | None = None) -> dict:
    """The `config.json` of the export, built through the installed transformers' LlamaConfig."""
    import transformers

    kwargs = dict(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_dim,
        intermediate_size=config.intermediate_dim,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.kv_heads,
        head_dim=config.head_dim,
        hidden_act="silu",
        max_position_embeddings=config.max_seq_len,
        rms_norm_eps=config.norm_eps,
        tie_word_embeddings=config.tie_embeddings,
        initializer_range=config.init_std,
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        architectures=["LlamaForCausalLM"],
    )
    # transformers 5 moved rope_theta into rope_parameters; 4.x takes it directly.
    if "rope_parameters" in inspect.signature(transformers.LlamaConfig.__init__).parameters:
        kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": config.rope_theta}
    else:
        kwargs["rope_theta"] = config.rope_theta
    hf = transformers.LlamaConfig(**kwargs)
    return hf.to_dict()


def hf_state_dict(model: nn.Module) -> dict:
    """Our weights under Hugging Face's names (tied output weights are stored once, as HF does).

    The output multiplier is folded into `lm_head.weight`, which HF's Llama has no multiplier for.
    """
    multiplier = model.config.output_multiplier
    tensors = {}
    for name, param in model.named_parameters():
        tensor = param.detach().to("cpu").float()
        if name == "lm_head.weight" and multiplier != 1.0:
            tensor = tensor * multiplier
        hf_name = name if name.startswith("lm_head.") else f"model.{name}"
        tensors[hf_name] = tensor.contiguous()
    return tensors


def from_hf_state_dict(tensors: dict, config: LlamaConfig) -> dict:
    """The inverse of `hf_state_dict`: Hugging Face Llama weights under our names (for `init_from`).

    The output multiplier is divided back out of `lm_head.weight`; with tied embeddings a stored
    `lm_head.weight` is dropped (ours is the embedding's). Rotary caches HF may store are ignored.
    """
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


def export_hf(
    model: nn.Module,
    config: LlamaConfig,
    out_dir: str,
    *,
    tokenizer_dir: str | None = None,
    eos_id: int | None = None,
    bos_id: int | None = None,
) -> str:
    """Write `config.json`, `model.safetensors` (metadata format=pt) and the tokenizer files."""
    storage.makedirs(out_dir)
    if tokenizer_dir:
        for name in storage.list_names(tokenizer_dir):
            data = storage.read_bytes(storage.join(tokenizer_dir, name))
            if data is not None:
                storage.write_bytes(storage.join(out_dir, name), data)
    weights = save_safetensors(hf_state_dict(model), metadata={"format": "pt"})
    storage.write_bytes(storage.join(out_dir, "model.safetensors"), weights)
    # config.json last: its presence is what marks the export as complete
    config_json = json.dumps(hf_config_dict(config, eos_id=eos_id, bos_id=bos_id), indent=2)
    storage.write_atomic(storage.join(out_dir, "config.json"), config_json.encode())
    return out_dir
