"""Names a step looks up only when it runs are checked by `marin plan`: a misspelt in-loop evaluation
task, a suite or harness task of `evaluate()`, a tokenizer without a chat template given to `sft()`,
a LoRA target the model does not have, and an experiment file that shadows a module. Each is one
`error:` line naming the field and the nearest known name, exit 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(300)

BASE = textwrap.dedent("""
    from marin.experiment.data import tokenized, train_tokenizer
    from marin.experiment.evaluate import evaluate
    from marin.experiment.posttrain import sft
    from marin.experiment.train import train_lm
    from marin.posttrain.lora import LoraConfig
    from marin.training.models import LlamaConfig
    from marin.training.optim import AdamConfig

    bpe = train_tokenizer(name="tokenizers/bpe", source="marin://tinystories-synth", vocab_size=384)
    chat_bpe = train_tokenizer(name="tokenizers/chat-bpe", source="marin://tinystories-synth", vocab_size=384,
                               chat_template="llama3")
    stories = tokenized(name="tokenized/stories", source="marin://tinystories-synth", tokenizer=bpe)
    tiny = LlamaConfig(hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2, max_seq_len=64)


    def base(tokenizer, **extra):
        data = tokenized(name="tokenized/stories", source="marin://tinystories-synth", tokenizer=tokenizer)
        return train_lm(name="checkpoints/base", model=tiny, optimizer=AdamConfig(learning_rate=1e-3),
                        datasets={data: 1.0}, batch_size=4, seq_len=64, num_train_steps=10, **extra)


""")

# (the experiment's last line, what its error line must say after `exp.py:LINE: `)
MISTAKES = {
    "in-loop eval task": (
        'model = train_lm(name="checkpoints/nano", model=tiny, optimizer=AdamConfig(learning_rate=1e-3), '
        'datasets={stories: 1.0}, batch_size=4, seq_len=64, num_train_steps=10, eval_tasks=("marin_story_ending",))',
        "train_lm 'checkpoints/nano': eval_tasks: unknown task 'marin_story_ending': did you mean "
        "'marin_story_endings'?",
    ),
    "evaluation harness task": (
        'ev = evaluate("evaluations/base", model=base(bpe), harness_tasks=("marin_text_perplexty",))',
        "evaluation 'evaluations/base': harness_tasks: unknown task 'marin_text_perplexty': did you mean "
        "'marin_text_perplexity'?",
    ),
    "evaluation suite": (
        'ev = evaluate("evaluations/base", model=base(bpe), suite="cor")',
        "evaluation 'evaluations/base': suite='cor': unknown suite 'cor': did you mean 'core'?",
    ),
    "a tokenizer without a chat template": (
        'chat = sft("checkpoints/chat", model=base(bpe), dataset="marin://tinystories-qa", '
        "optimizer=AdamConfig(learning_rate=1e-3), batch_size=4, seq_len=64, num_train_steps=10)",
        "sft 'checkpoints/chat': the tokenizer of its model (train_tokenizer 'tokenizers/bpe') has no chat "
        "template; train it with train_tokenizer(..., chat_template='llama3'), or fine-tune a model whose "
        "tokenizer has one",
    ),
    "a LoRA target the model lacks": (
        'chat = sft("checkpoints/chat", model=base(chat_bpe), dataset="marin://tinystories-qa", '
        "optimizer=AdamConfig(learning_rate=1e-3), batch_size=4, seq_len=64, num_train_steps=10, "
        'lora=LoraConfig(targets=("q_proj", "v_prj")))',
        "sft 'checkpoints/chat': LoRA target 'v_prj' matches no linear layer of the model: did you mean "
        "'v_proj'? (or 'all-linear' for all of them)",
    ),
}


def _plan(folder, file: str) -> subprocess.CompletedProcess:
    """`marin plan FILE` as a user types it: the console script (`python -m` would itself put the
    folder, and a shadowing file in it, ahead of everything on the import path)."""
    env = {**os.environ, "MARIN_PREFIX": str(folder / "out")}
    marin = os.path.join(os.path.dirname(sys.executable), "marin")
    return subprocess.run(
        [marin, "plan", file], cwd=folder, env=env, capture_output=True, text=True, timeout=240
    )


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_marin_plan_catches_a_name_the_step_would_look_up_only_when_it_runs(tmp_path, mistake):
    line, message = MISTAKES[mistake]
    source = BASE + line + "\n"
    (tmp_path / "exp.py").write_text(source)
    number = len(source.splitlines())
    assert _one_error_line(_plan(tmp_path, "exp.py")) == f"error: exp.py:{number}: {message}"


def test_the_same_experiment_without_the_mistake_plans(tmp_path):
    line = (
        'chat = sft("checkpoints/chat", model=base(chat_bpe, eval_tasks=("marin_story_endings",)), '
        'dataset="marin://tinystories-qa", optimizer=AdamConfig(learning_rate=1e-3), batch_size=4, seq_len=64, '
        'num_train_steps=10, lora=LoraConfig(targets=("q_proj", "v_proj")))'
    )
    (tmp_path / "exp.py").write_text(BASE + line + "\n")
    done = _plan(tmp_path, "exp.py")
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize(
    ("name", "shadowed"), [("concurrent", "the standard library's module"), ("torch", "the installed module")]
)
def test_an_experiment_file_that_shadows_a_module_is_one_line_saying_how_to_rename_it(
    tmp_path, name, shadowed
):
    (tmp_path / f"{name}.py").write_text(
        'from marin.execution.step_spec import StepSpec\n\nstep = StepSpec(name="x", fn=lambda: 1)\n'
    )
    assert _one_error_line(_plan(tmp_path, f"{name}.py")) == (
        f"error: {name}.py: the file's name shadows {shadowed} {name!r}, which every import of {name!r} (by "
        f"marin, by libraries, in the workers) would then load instead; rename it, e.g. to {name}_experiment.py"
    )


def test_a_file_named_like_a_folder_without_init_on_the_path_plans(tmp_path):
    """A folder without __init__.py (a namespace package: `experiment/` beside the tests, say) yields
    to any module of its name, so `experiment.py` shadows nothing and plans."""
    (tmp_path / "lib" / "experiment").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    (work / "experiment.py").write_text(
        'from marin.execution.step_spec import StepSpec\n\nstep = StepSpec(name="x", fn=lambda: 1)\n'
    )
    env = {**os.environ, "MARIN_PREFIX": str(work / "out"), "PYTHONPATH": str(tmp_path / "lib")}
    marin = os.path.join(os.path.dirname(sys.executable), "marin")
    done = subprocess.run(
        [marin, "plan", "experiment.py"], cwd=work, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
