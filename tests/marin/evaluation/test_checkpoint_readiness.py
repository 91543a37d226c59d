"""A missing, unfinished or export-less model step is refused with an error that names the step."""

from __future__ import annotations

import shutil

import pytest

from marin.evaluation.checkpoint import find_hf_export
from marin.evaluation.errors import CheckpointNotReadyError
from marin.execution import artifact, status
from marin.execution.states import StepState

STEP = "checkpoints/nano-v1"


def _mark(path, state: str) -> None:
    status.write_status(str(path), STEP, "k" * 16, [status.event(state)])


def test_missing_output_names_the_step(tmp_path):
    with pytest.raises(CheckpointNotReadyError, match=f"model step '{STEP}' has no output"):
        find_hf_export(STEP, str(tmp_path / "never-ran"))


@pytest.mark.parametrize("state", [None, StepState.RUNNING, StepState.FAILED])
def test_step_without_success_is_unfinished(tmp_path, tiny_export, state):
    shutil.copytree(tiny_export, tmp_path / "hf")
    if state:
        _mark(tmp_path, state)
    with pytest.raises(
        CheckpointNotReadyError, match=f"model step '{STEP}' is unfinished.*{state or 'missing'}"
    ):
        find_hf_export(STEP, str(tmp_path))


def test_successful_step_without_hf_config_names_the_missing_file(tmp_path, tiny_export):
    shutil.copytree(tiny_export, tmp_path / "hf")
    (tmp_path / "hf" / "config.json").unlink()
    _mark(tmp_path, StepState.SUCCESS)
    with pytest.raises(CheckpointNotReadyError, match=f"'{STEP}'.*hf/config.json is missing"):
        find_hf_export(STEP, str(tmp_path))


def test_finished_step_yields_its_export(tmp_path, tiny_export):
    shutil.copytree(tiny_export, tmp_path / "hf")
    _mark(tmp_path, StepState.SUCCESS)
    assert find_hf_export(STEP, str(tmp_path)).path == str(tmp_path / "hf")


def test_export_named_by_the_artifact_hf_path_is_used(tmp_path, tiny_export):
    shutil.copytree(tiny_export, tmp_path / "export")
    artifact.write_records(
        str(tmp_path), artifact.ExecutorInfo(name=STEP, key="k" * 16), {"hf_path": "export"}
    )
    _mark(tmp_path, StepState.SUCCESS)
    assert find_hf_export(STEP, str(tmp_path)).path == str(tmp_path / "export")
