"""Model architectures behind one seam (`base.ModelConfig`); importing this package registers the built-in ones.

Adding an architecture is one module here with a `@register`ed config, and one import line below
(docs/training.md, "Adding an architecture").
"""

from marin.training.models import llama  # noqa: F401  (registers "llama")
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

__all__ = [
    "LlamaConfig",
    "ModelConfig",
    "architecture",
    "architectures",
    "config_from_hf",
    "config_from_json",
    "config_to_json",
    "is_model_config",
    "model_key",
    "register",
]
