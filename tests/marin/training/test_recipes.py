"""The recipes in a real training run: WSD's lr step by step, scheduled mixtures' per-batch counts, the
z-loss, the EMA export against its formula, and skipped bad steps."""

import math
import os

import pytest
import torch
from safetensors.torch import load_file

import storage
from marin.training.callbacks import Callback
from marin.training.config import TrainConfig
from marin.training.datasets import DatasetInput
from marin.training.errors import TrainingConfigError
from marin.training.mixture import MixtureSchedule
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig, MuonConfig
from marin.training.schedules import WSD, Cosine
from marin.training.trainer import TrainJob, train

MODEL = LlamaConfig(
    hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2, max_seq_len=64
)
SEQ, BATCH = 32, 8


def _config(**overrides) -> TrainConfig:
    fields = dict(
        model=MODEL,
        optimizer=AdamConfig(learning_rate=3e-3, schedule=Cosine(warmup=2)),
        batch_size=BATCH,
        seq_len=SEQ,
        num_train_steps=8,
        seed=1,
        eval_max_tokens=256,
        cpu_threads=1,
    )
    fields.update(overrides)
    return TrainConfig(**fields)


def _records(out: str) -> list[dict]:
    return storage.read_records(os.path.join(out, "metrics.jsonl"))


def test_a_wsd_run_logs_the_schedules_lr_and_each_batch_takes_its_phases_largest_remainder_split(
    story_cache, other_cache, tmp_path
):
    optimizer = AdamConfig(
        learning_rate=4e-3, schedule=WSD(warmup=2, decay_fraction=0.5, decay_shape="1-sqrt")
    )
    schedule = MixtureSchedule.of(
        ["stories", "other"], [(0, {"stories": 1.0}), (3, {"stories": 1.0, "other": 2.0})]
    )
    datasets = (DatasetInput("stories", story_cache, 1.0), DatasetInput("other", other_cache, 0.0))
    out = str(tmp_path / "run")
    train(TrainJob(_config(optimizer=optimizer, z_loss=1e-3), datasets, out, mixture=schedule))
    records = _records(out)
    assert [r["lr"] for r in records] == [optimizer.lr_at(s, 8) for s in range(8)]  # exactly the formula
    before = {"stories": 0, "other": 0}
    for r in records:
        rows = tuple((r["domain_tokens"][n] - before[n]) // SEQ for n in ("stories", "other"))
        assert rows == schedule.counts(r["step"] - 1, BATCH), r["step"]
        before = r["domain_tokens"]
    assert records[-1]["domain_epochs"]["other"] > 0 and records[0]["domain_epochs"]["other"] == 0
    assert all(0 < r["z_loss"] < 1e-3 * 40 and r["ema"] is False and r["skipped_steps"] == 0 for r in records)


def test_the_exported_ema_is_the_ema_formula_over_the_saved_weights_of_every_step(story_cache, tmp_path):
    out, decay, steps = str(tmp_path / "ema"), 0.7, 4
    config = _config(
        optimizer=MuonConfig(adam_learning_rate=3e-3, schedule=Cosine(warmup=1)),
        num_train_steps=steps,
        ema=decay,
        checkpoint_every=1,
        keep_last_k=None,
    )
    summary = train(TrainJob(config, (DatasetInput("stories", story_cache, 1.0),), out))
    assert summary["exported_weights"] == "ema"
    torch.manual_seed(config.seed)  # the trainer's initial weights: the seed, then the model
    model_config = MODEL.with_vocab_size(summary["vocab_size"])
    ema = {n: p.detach().clone() for n, p in model_config.build().named_parameters()}
    for step in range(1, steps + 1):
        weights = load_file(os.path.join(out, f"checkpoints/step-{step:08d}/model.safetensors"))
        ema = {n: decay * ema[n] + (1 - decay) * weights[n] for n in ema}
    saved = load_file(os.path.join(out, f"checkpoints/step-{steps:08d}/ema.safetensors"))
    exported = model_config.hf.from_hf_state_dict(
        model_config, load_file(os.path.join(out, "hf/model.safetensors"))
    )
    for name in ema:
        assert torch.allclose(saved[name], ema[name], rtol=0, atol=1e-6), name
        assert torch.equal(exported[name], saved[name]), name
    assert not torch.equal(
        weights["lm_head.weight"], saved["lm_head.weight"]
    )  # the export is not the last step
    assert all(r["ema"] is True for r in _records(out))


class PoisonOneStep(Callback):
    """Makes step `step + 1`'s loss NaN (a NaN weight for that step only), as a bad batch would."""

    def __init__(self, step: int):
        self.step, self.saved = step, None

    def on_step_end(self, trainer, step) -> None:
        weight = trainer.model.lm_head.weight
        with torch.no_grad():
            if step.step == self.step:
                self.saved = weight[0].clone()
                weight[0] = math.nan
            elif step.step == self.step + 1:
                weight[0] = self.saved


def test_a_step_whose_loss_is_not_finite_is_skipped_and_counted(story_cache, tmp_path):
    out = str(tmp_path / "skip")
    config = _config(
        num_train_steps=6,
        skip_bad_steps=3.0,
        ema=0.9,
        callbacks=(PoisonOneStep(3),),
        checkpoint_every=1,
        keep_last_k=None,
    )
    summary = train(TrainJob(config, (DatasetInput("stories", story_cache, 1.0),), out))
    records = _records(out)
    assert [r["skipped_steps"] for r in records] == [0, 0, 0, 1, 1, 1] and records[3]["skipped"] is True
    assert summary["skipped_steps"] == 1 and math.isfinite(records[-1]["loss"])
    moments = [
        load_file(os.path.join(out, f"checkpoints/step-{s:08d}/optimizer.safetensors")) for s in (3, 4)
    ]
    assert all(torch.equal(moments[0][k], moments[1][k]) for k in moments[0])  # no update at step 4
    assert float(moments[1]["lm_head.weight/step"]) == 3.0
    emas = [load_file(os.path.join(out, f"checkpoints/step-{s:08d}/ema.safetensors")) for s in (3, 4)]
    assert all(torch.equal(emas[0][k], emas[1][k]) for k in emas[0])


def test_muon_with_fsdp_and_ema_with_fsdp_are_one_error_each():
    with pytest.raises(TrainingConfigError, match="MuonConfig needs each matrix whole.*parallelism='ddp'"):
        _config(optimizer=MuonConfig(), parallelism="fsdp")
    with pytest.raises(TrainingConfigError, match="use parallelism='ddp' with ema"):
        _config(ema=0.99, parallelism="fsdp")
    with pytest.raises(TrainingConfigError, match="skip_bad_steps must be a factor > 1"):
        _config(skip_bad_steps=0.5)
