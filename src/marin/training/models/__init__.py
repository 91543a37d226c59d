"""Model architectures behind one seam (`base.ModelConfig`); importing this package registers the built-in ones.

Adding an architecture is one module here with a `@register`ed config, and one import line below
(docs/training.md, "Adding an architecture").
"""

from marin.training.models import llama, moe, olmo2, qwen3  # noqa: F401  (each registers its architecture)
from marin.training.models.base import (
    ModelConfig,
    architecture,
    architectures,
    config_from_hf,
    config_from_json,
    config_to_json,
    is_model_config,
    model_key,
    register,
)
from marin.training.models.llama import LlamaConfig
from marin.training.models.moe import MoEConfig
from marin.training.models.olmo2 import Olmo2Config
from marin.training.models.qwen3 import Qwen3Config

__all__ = [
    "LlamaConfig",
    "MoEConfig",
    "ModelConfig",
    "Olmo2Config",
    "Qwen3Config",
    "architecture",
    "architectures",
    "config_from_hf",
    "config_from_json",
    "config_to_json",
    "is_model_config",
    "model_key",
    "register",
]
