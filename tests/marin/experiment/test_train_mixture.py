"""train_lm's mixture schedules when declared: the key of a schedule, and one error line for each bad phase."""

import textwrap

import pytest
from click.testing import CliRunner

from experiments.llama import llama_nano
from marin.cli import main
from marin.execution.lazy import lower
from marin.experiment.data import tokenized
from marin.experiment.train import train_lm
from marin.training.errors import TrainingConfigError
from marin.training.optim import AdamConfig

WEB = tokenized("tokenized/web", tokenizer="gpt2", source="marin://tinystories-synth", sample_count=10)
CODE = tokenized("tokenized/code", tokenizer="gpt2", source="marin://tinystories-synth", sample_count=20)
RUN = dict(
    name="checkpoints/mix",
    model=llama_nano,
    optimizer=AdamConfig(),
    batch_size=4,
    seq_len=64,
    num_train_steps=1000,
)


def test_a_schedule_is_keyed_by_its_phases_and_static_weights_keep_their_key():
    spec = lower(train_lm(datasets=[(0, {WEB: 1.0}), (800, {"tokenized/web": 0.5, CODE: 0.5})], **RUN))
    assert spec.hash_attrs["datasets"] == [
        {
            "start_step": 0,
            "weights": [{"step": "tokenized/web", "weight": 1.0}, {"step": "tokenized/code", "weight": 0.0}],
        },
        {
            "start_step": 800,
            "weights": [{"step": "tokenized/web", "weight": 0.5}, {"step": "tokenized/code", "weight": 0.5}],
        },
    ]
    assert {d.name for d in spec.deps} == {"tokenized/web", "tokenized/code"}
    static = lower(train_lm(datasets={WEB: 3.0, CODE: 1.0}, **RUN))
    assert static.hash_attrs["datasets"] == [
        {"step": "tokenized/web", "weight": 3.0},
        {"step": "tokenized/code", "weight": 1.0},
    ]


@pytest.mark.parametrize(
    "datasets, message",
    [
        (
            [(0, {WEB: 1.0}), (800, {WEB: 0.0})],
            r"datasets\[1\] \(step 800\): the weights sum to 0.0; give at least one",
        ),
        (
            [(0, {WEB: 1.0}), (800, {CODE: 1.0}), (800, {WEB: 1.0})],
            "datasets: phase steps must increase, but phase 2 starts",
        ),
        (
            [(0, {WEB: 1.0}), (800, {"tokenized/code": 1.0})],
            "datasets\\[1\\] \\(step 800\\) names dataset .tokenized/code., which the run does not",
        ),
    ],
)
def test_bad_schedules_are_one_error_naming_the_step_and_the_phase(datasets, message):
    with pytest.raises(TrainingConfigError, match=f"train_lm 'checkpoints/mix': {message}"):
        train_lm(datasets=datasets, **RUN)


def test_marin_plan_of_a_bad_declaration_is_one_error_line(tmp_path):
    experiment = tmp_path / "bad.py"
    experiment.write_text(
        textwrap.dedent(
            """
            from experiments.llama import llama_nano
            from marin.experiment.data import tokenized
            from marin.experiment.train import train_lm
            from marin.training.optim import MuonConfig

            data = tokenized("tokenized/web", tokenizer="gpt2", source="marin://tinystories-synth", sample_count=10)
            run = train_lm(name="checkpoints/muon", model=llama_nano, optimizer=MuonConfig(), datasets={data: 1.0},
                           batch_size=4, seq_len=64, num_train_steps=10, parallelism="fsdp")
            """
        )
    )
    result = CliRunner().invoke(main, ["plan", str(experiment), "--prefix", str(tmp_path / "out")])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(
        f"error: {experiment}:8: train_lm 'checkpoints/muon': MuonConfig needs each matrix whole"
    )
    with pytest.raises(TrainingConfigError, match="init_optimizer=True continues the optimizer of init_from"):
        train_lm(datasets={WEB: 1.0}, init_optimizer=True, **RUN)
