"""A user's callback sees every step, can stop the run cleanly, and its state survives a resume, also
after a new built-in callback is added (states are saved by callback name)."""

from __future__ import annotations

import json
import os

import pytest
from train_child import tiny_config

import storage
from marin.training.callbacks import Callback
from marin.training.datasets import DatasetInput
from marin.training.errors import CheckpointError
from marin.training.trainer import TrainJob, train


class Recorder(Callback):
    """Records what it sees; stops the run after `stop_at` steps; counts steps across resumes. It uses
    only what `marin.training.callbacks.TrainerView` offers."""

    def __init__(self, stop_at: int | None = None):
        self.stop_at = stop_at
        self.seen: list[tuple[int, float]] = []
        self.events: list[str] = []
        self.total = 0  # checkpointed: steps seen over every run of the step

    def on_train_start(self, trainer) -> None:
        self.events.append(f"start@{trainer.step}")

    def on_step_end(self, trainer, step) -> None:
        self.seen.append((step.step, step.loss))
        self.total += 1
        step.record["seen_by_user"] = self.total
        if step.step == self.stop_at:
            trainer.request_stop("enough")

    def on_train_end(self, trainer, summary) -> None:
        self.events.append(f"end@{trainer.step}")

    def state_dict(self) -> dict:
        return {"total": self.total}

    def load_state_dict(self, state: dict) -> None:
        self.total = state["total"]


def test_a_user_callback_sees_every_step_stops_the_run_cleanly_and_resumes_with_its_state(
    story_cache, tmp_path
):
    out = str(tmp_path / "run")
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    first = Recorder(stop_at=5)
    summary = train(TrainJob(tiny_config(8, checkpoint_every=None, callbacks=(first,)), datasets, out))

    assert [s for s, _ in first.seen] == [1, 2, 3, 4, 5]
    assert first.events == ["start@0", "end@5"]
    records = storage.read_records(os.path.join(out, "metrics.jsonl"))
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5]
    assert [r["loss"] for r in records] == [loss for _, loss in first.seen]
    assert [r["seen_by_user"] for r in records] == [1, 2, 3, 4, 5]  # what a callback adds is written
    assert (summary["stopped"], summary["steps_done"]) == ("enough", 5)
    assert summary["final_eval_loss"] is not None  # scored, as at a normal end
    assert os.listdir(os.path.join(out, "checkpoints")) == ["step-00000005"]  # the stop wrote one
    assert os.path.exists(os.path.join(out, "hf", "model.safetensors"))  # and the export

    second = Recorder()
    resumed = train(TrainJob(tiny_config(8, checkpoint_every=None, callbacks=(second,)), datasets, out))
    assert resumed["resumed_from_step"] == 5 and resumed["stopped"] is None
    assert [s for s, _ in second.seen] == [6, 7, 8] and second.events == ["start@5", "end@8"]
    assert second.total == 8  # restored from the checkpoint, then counted on
    records = storage.read_records(os.path.join(out, "metrics.jsonl"))
    assert [r["step"] for r in records] == list(range(1, 9))


class NewBuiltIn(Callback):
    """A built-in callback with state that a later version of marin might add before the user's."""

    name = "new-built-in"
    priority = 50

    def state_dict(self) -> dict:
        return {"seen": True}


def test_a_user_callbacks_state_survives_a_resume_after_a_new_built_in_callback_is_added(
    story_cache, tmp_path, monkeypatch
):
    import marin.training.trainer as trainer_module

    out = str(tmp_path / "run")
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    first = Recorder(stop_at=5)
    train(TrainJob(tiny_config(8, checkpoint_every=None, callbacks=(first,)), datasets, out))

    defaults = trainer_module.default_callbacks
    monkeypatch.setattr(trainer_module, "default_callbacks", lambda config: [NewBuiltIn(), *defaults(config)])
    second = Recorder()
    resumed = train(TrainJob(tiny_config(8, checkpoint_every=None, callbacks=(second,)), datasets, out))
    assert resumed["resumed_from_step"] == 5
    assert second.total == 8  # its state was found under its name, not at its (moved) position
    state = json.loads(open(os.path.join(out, "checkpoints", "step-00000008", "state.json")).read())
    assert state["extra"]["callbacks"]["Recorder"] == {"total": 8}
    assert state["extra"]["callbacks"]["new-built-in"] == {"seen": True}


def test_a_checkpoint_holding_the_state_of_a_callback_the_run_lacks_is_refused_unless_dropped(
    story_cache, tmp_path
):
    out = str(tmp_path / "run")
    datasets = (DatasetInput("stories", story_cache, 1.0),)
    train(TrainJob(tiny_config(8, checkpoint_every=None, callbacks=(Recorder(stop_at=3),)), datasets, out))

    with pytest.raises(
        CheckpointError, match=r"state of callback\(s\) \['Recorder'\].*drop_callback_state=\('Recorder',\)"
    ):
        train(TrainJob(tiny_config(8, checkpoint_every=None), datasets, out))
    summary = train(
        TrainJob(tiny_config(8, checkpoint_every=None, drop_callback_state=("Recorder",)), datasets, out)
    )
    assert summary["resumed_from_step"] == 3 and summary["steps_done"] == 8
