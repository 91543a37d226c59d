"""`marin plot-lr FILE.py`: the schedules of an experiment's train steps, drawn from the trainer's own formula."""

import subprocess
import textwrap

from click.testing import CliRunner

from marin.cli import main
from marin.experiment.lr_plot import schedule_curve, train_steps
from tests.shell_env import ROOT, fresh_env

EXPERIMENT = textwrap.dedent(
    """
    from experiments.llama import llama_nano
    from marin.experiment.data import tokenized
    from marin.experiment.train import train_lm
    from marin.training.optim import AdamConfig, MuonConfig
    from marin.training.schedules import WSD, Cosine

    data = tokenized("tokenized/plot", tokenizer="gpt2", source="marin://tinystories-synth", sample_count=10)
    common = dict(model=llama_nano, datasets={data: 1.0}, batch_size=2, seq_len=64, num_train_steps=200)
    wsd = train_lm(
        name="checkpoints/wsd",
        optimizer=AdamConfig(learning_rate=1e-3, schedule=WSD(warmup=10, decay_shape="1-sqrt")),
        **common,
    )
    muon_optimizer = MuonConfig(adam_learning_rate=1e-3, schedule=Cosine(warmup=10))
    muon = train_lm(name="checkpoints/muon", optimizer=muon_optimizer, **common)
    """
)


def test_plot_lr_draws_every_train_step_with_the_rates_the_trainer_sets(tmp_path):
    experiment = tmp_path / "experiment.py"
    experiment.write_text(EXPERIMENT)
    out = tmp_path / "lr.png"
    result = CliRunner().invoke(main, ["plot-lr", str(experiment), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "checkpoints/wsd: AdamConfig, 200 steps, peak 0.001 (steps 9–159), last 0.0001" in result.output
    (name, handle), (_, muon) = train_steps(str(experiment))
    curve = schedule_curve(name, handle)
    assert curve.rates["lr"] == [handle.optimizer.lr_at(s, 200) for s in range(200)]
    assert set(schedule_curve("m", muon).rates) == {"lr", "adam_lr"}


def test_plot_lr_of_a_file_without_train_steps_is_one_error_line(tmp_path):
    experiment = tmp_path / "none.py"
    experiment.write_text("x = 1\n")
    result = CliRunner().invoke(main, ["plot-lr", str(experiment), "--out", str(tmp_path / "lr.png")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {experiment} declares no train_lm(...) step; plot-lr draws the schedules of train steps"
    ]


def test_the_documented_plot_lr_commands_draw_the_schedules_and_annealing_tutorials(tmp_path):
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    commands = (
        "marin plot-lr experiments/tutorials/schedules.py --out lr-schedules.png",
        "marin plot-lr experiments/tutorials/annealing.py --out annealing-lr.png",
    )
    done = subprocess.run(
        " && ".join(commands),
        shell=True,
        cwd=tmp_path,
        env=fresh_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for png in ("lr-schedules.png", "annealing-lr.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    assert done.stdout.count("AdamConfig, 400 steps") == 5
    assert (
        "checkpoints/nano-anneal-cooldown: AdamConfig, 60 steps, after 300 steps it continues" in done.stdout
    )
