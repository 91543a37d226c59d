"""Export a trained model as a Hugging Face folder of its architecture's class (`ModelConfig.hf`).

The folder holds `config.json` (written last: its presence marks the export complete),
`model.safetensors` (metadata format=pt) and the tokenizer's files; `AutoModelForCausalLM` and
`AutoTokenizer.from_pretrained` load it. What the names and config fields become is the
architecture's adapter's business (`marin.training.models.hf.DecoderHF` for the decoders).
"""

from __future__ import annotations

import json

from safetensors.torch import save as save_safetensors
from torch import nn

import storage
from marin.training.models import ModelConfig


def hf_state_dict(model: nn.Module, config: ModelConfig) -> dict:
    """`model`'s weights under Hugging Face's names, as its architecture stores them."""
    return config.hf.to_hf_state_dict(config, dict(model.named_parameters()))


def export_hf(
    model: nn.Module,
    config: ModelConfig,
    out_dir: str,
    *,
    tokenizer_dir: str | None = None,
    eos_id: int | None = None,
    bos_id: int | None = None,
) -> str:
    """Write `config.json`, `model.safetensors` and the tokenizer files of `model` into `out_dir`."""
    storage.makedirs(out_dir)
    if tokenizer_dir:
        for name in storage.list_names(tokenizer_dir):
            data = storage.read_bytes(storage.join(tokenizer_dir, name))
            if data is not None:
                storage.write_bytes(storage.join(out_dir, name), data)
    weights = save_safetensors(hf_state_dict(model, config), metadata={"format": "pt"})
    storage.write_bytes(storage.join(out_dir, "model.safetensors"), weights)
    config_json = json.dumps(config.hf.config_json(config, eos_id=eos_id, bos_id=bos_id), indent=2)
    storage.write_atomic(storage.join(out_dir, "config.json"), config_json.encode())
    return out_dir
