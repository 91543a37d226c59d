"""Errors raised by evaluation steps; each names the step or file involved and what to do."""

from __future__ import annotations

from marin.execution.errors import MarinError


class CheckpointNotReadyError(MarinError):
    """The model step to evaluate has no finished Hugging Face export."""


class EvalDataError(MarinError, ValueError):
    """An evaluation dataset cannot be read or does not fit the model."""


class HarnessError(MarinError):
    """The lm-eval-harness bridge cannot run (missing extra, unknown task, bad results)."""


class SuiteError(MarinError, ValueError):
    """An unknown suite, task or dataset name (the message suggests the nearest known one)."""


class ModelSourceError(MarinError, ValueError):
    """The model to evaluate cannot be found: no such folder, no config.json, a hub id that cannot be resolved."""
