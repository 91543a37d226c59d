"""The PyTorch trainer: model architectures (`marin.training.models`), the loop and its callbacks,
checkpoints and export. `marin.training.load_model(path)` loads what a run wrote."""

from __future__ import annotations

from typing import Any

__all__ = ["load_model"]


def __getattr__(name: str) -> Any:
    if name == "load_model":  # imported on use: `import marin.training.config` stays free of it
        from marin.training.loading import load_model

        return load_model
    raise AttributeError(f"module 'marin.training' has no attribute {name!r}")
