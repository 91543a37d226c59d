"""SFT's and DPO's evaluation scores a batch with the same loss the run trains with."""

from __future__ import annotations

import pytest
import torch

from marin.data.chat import ChatData
from marin.posttrain.dpo import DpoObjective
from marin.posttrain.sft import SftObjective
from marin.training.config import TrainConfig
from marin.training.eval_metrics import eval_metrics, score_sums
from marin.training.loading import exported_model
from marin.training.objective import EvalBatch, RunContext
from marin.training.optim import AdamConfig

QA = "marin://tinystories-qa"


@pytest.mark.parametrize("kind", ["sft", "dpo"])
def test_the_evaluation_loss_equals_the_training_objective_on_the_same_batch(kind, chat_model_dir, tmp_path):
    weights = exported_model(chat_model_dir)
    config = TrainConfig(
        model=weights.model_config,
        optimizer=AdamConfig(learning_rate=1e-3),
        batch_size=4,
        seq_len=448,
        num_train_steps=1,
        document_masking=kind == "sft",
    )
    data = ChatData(source=QA, sample_count=12)
    objective = (SftObjective if kind == "sft" else DpoObjective)(data, weights=weights.hf_path)
    model_config = objective.open(RunContext(config, 0, 1, torch.device("cpu"), str(tmp_path)))
    torch.manual_seed(0)
    model = model_config.build()
    objective.prepare_model(model)
    with torch.no_grad():  # the policy moves away from DPO's reference (the starting weights)
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    batch = objective.batch_stream(objective.train_loader(), prefetch=1).next()
    options = {"document_eos": objective.eos_id} if kind == "sft" else {}
    model.eval()
    with torch.no_grad():
        trained = objective.loss(model, batch.inputs, batch.targets, options).loss.item()
        sums = score_sums(objective, model, [EvalBatch(batch.inputs, batch.targets)], options)
    scores = eval_metrics(sums)
    assert scores["eval_loss"] == pytest.approx(trained, abs=1e-6)
    units = batch.inputs.shape[0] // (2 if kind == "dpo" else 1)  # windows, or pairs of rows
    assert scores["eval_loss_n"] == units and scores["eval_loss_stderr"] > 0
    if (
        kind == "sft"
    ):  # windows hold different numbers of reply tokens: the mean is the tokens', not the windows'
        counts = (batch.targets != -100).sum(-1)
        assert len(set(counts.tolist())) > 1
