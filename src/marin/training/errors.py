"""Exception types of the trainer. Each message names the field or file and says what to do."""

from __future__ import annotations

from marin.execution.errors import MarinError


class TrainingConfigError(MarinError, ValueError):
    """A training request is wrong (shapes, sequence length, dataset weights, vocabulary); nothing ran."""


class TrainingDataError(MarinError, ValueError):
    """A token cache cannot feed training: it is empty, too short, or its vocabulary outgrows the model."""


class CheckpointError(MarinError):
    """A checkpoint is missing a file or does not match the run that tries to resume from it."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint's files do not match the checksums written when it was saved, or cannot be parsed."""


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on SIGTERM or SIGINT after writing a checkpoint; a rerun resumes from it.

    A KeyboardInterrupt, as the signal would have raised: the step was stopped, not failed.
    """
