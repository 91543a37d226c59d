"""Every kind of user mistake, made in a real experiment file and run by `marin run` as a real process,
is one `error:` line naming what to fix (at most a short hint after it), exit code 2, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

TRAIN = """
from experiments.llama import llama_nano
from marin.experiment.data import tokenized
from marin.experiment.train import train_lm
from marin.training.optim import AdamConfig

data = tokenized(name="tokenized/docs", paths=["{docs}"], tokenizer="{tokenizer}")
model = train_lm(
    name="checkpoints/nano",
    model=llama_nano,
    optimizer=AdamConfig({optimizer}),
    datasets={{data: 1.0}},
    batch_size=4,
    seq_len=64,
    {steps},
)
"""

TOKENIZE = """
from marin.experiment.data import tokenized

docs = tokenized(name="tokenized/docs", paths=["{docs}"], tokenizer="{tokenizer}")
"""

# (experiment source, what the error line must say): the did-you-mean names the right field.
MISTAKES = {
    "misspelt keyword": (
        TRAIN.replace("{optimizer}", "learning_rate=6e-4").replace("{steps}", "num_train_step=20"),
        "exp.py:8: train_lm 'checkpoints/nano': unknown keyword num_train_step=; did you mean num_train_steps?",
    ),
    "misspelt keyword of a tokenize step": (
        TOKENIZE.replace('tokenizer="{tokenizer}"', 'tokenizer="{tokenizer}", sample_cont=5'),
        "exp.py:4: tokenized 'tokenized/docs': unknown keyword sample_cont=; did you mean sample_count?",
    ),
    "wrong type": (
        TRAIN.replace("{optimizer}", 'learning_rate="3e-4"').replace("{steps}", "num_train_steps=20"),
        "exp.py:11: AdamConfig: learning_rate='3e-4' is a str, expected float (write 3e-4 without quotes)",
    ),
    "misspelt keyword of a plain function": (
        "from marin.data.corpus import stories\n\nfirst = list(stories(strat=0, stop=3))\n",
        "exp.py:3: TypeError: stories() got an unexpected keyword argument 'strat'; did you mean start?",
    ),
    "syntax error": (
        'from marin.experiment.data import tokenized\n\ndocs = tokenized(name="a" tokenizer="b")\n',
        "exp.py:3: SyntaxError: invalid syntax. Perhaps you forgot a comma?",
    ),
    "import error": (
        "from marin.experiment.datasets import tokenized\n",
        "exp.py:1: ModuleNotFoundError: No module named 'marin.experiment.datasets'",
    ),
    "missing path": (
        TOKENIZE.replace("{docs}", "{missing}"),
        "error: step 'tokenized/docs': input '{missing}' matches no file; fix the path or glob",
    ),
    "malformed record": (
        TOKENIZE.replace("{docs}", "{bad}"),
        "step 'tokenized/docs' failed: malformed record at {bad}:2: invalid JSON",
    ),
    "empty input": (
        TOKENIZE.replace("{docs}", "{empty}"),
        "step 'tokenized/docs' failed: the source yielded 0 documents: {empty}; check the paths",
    ),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """A tiny tokenizer and the data files the experiments read: good, malformed, empty, missing."""
    from marin.data.corpus import stories
    from marin.data.tokenizer_training import train_byte_level_bpe

    root = tmp_path_factory.mktemp("inputs")
    train_byte_level_bpe(stories(0, 200), 300, str(root / "tokenizer"))
    (root / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in stories(0, 50)))
    (root / "bad.jsonl").write_text('{"text": "fine"}\n{"text": "cut off\n')
    (root / "empty.jsonl").write_text("")
    return {
        "tokenizer": str(root / "tokenizer"),
        "docs": str(root / "docs.jsonl"),
        "bad": str(root / "bad.jsonl"),
        "empty": str(root / "empty.jsonl"),
        "missing": str(root / "nowhere" / "*.jsonl"),
    }


def _fill(text: str, files: dict[str, str]) -> str:
    for name, path in files.items():
        text = text.replace("{" + name + "}", path)
    return text.replace("{{", "{").replace("}}", "}")


def _marin_run(folder, **env_vars: str) -> subprocess.CompletedProcess:
    """`marin run exp.py` in `folder`, a real process with the user's environment (no MARIN_*)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARIN_")} | env_vars
    return subprocess.run(
        [sys.executable, "-m", "marin.cli", "run", "exp.py", "--prefix", str(folder / "out")],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_a_mistake_is_one_error_line_naming_what_to_fix_exit_2_and_no_traceback(mistake, files, tmp_path):
    source, expected = (_fill(textwrap.dedent(part), files) for part in MISTAKES[mistake])
    (tmp_path / "exp.py").write_text(source)
    ran = _marin_run(tmp_path)
    lines = ran.stderr.splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
    assert ran.returncode == 2, ran.stderr
    assert len(errors) == 1, ran.stderr
    assert expected in lines[errors[0]], ran.stderr
    assert len(lines) - errors[0] <= 2, ran.stderr  # the error line and at most one hint
    assert "Traceback" not in ran.stderr + ran.stdout


def test_traceback_shows_the_full_error_when_asked(files, tmp_path):
    (tmp_path / "exp.py").write_text(_fill(TOKENIZE.replace("{docs}", "{bad}"), files))
    ran = _marin_run(tmp_path, MARIN_TRACEBACK="1")
    assert ran.returncode == 2, ran.stderr
    assert "Traceback (most recent call last)" in ran.stderr
    assert ran.stderr.count("--- worker traceback ---") == 1, ran.stderr  # the full error, printed once
    assert ran.stderr.splitlines()[-2].startswith("error: step 'tokenized/docs' failed: malformed record at")
