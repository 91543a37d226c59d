"""Models no step of ours trained: Hugging Face folders saved by the test, evaluated by path; hub ids."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from marin.evaluation.documents import TextDataset
from marin.evaluation.errors import ModelSourceError
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.evaluate import evaluate
from tests.marin.evaluation.tiny_hf import held_out_stories

REPO = Path(__file__).resolve().parents[3]


def _save(kind: str, folder: Path, tokenizer_from: str) -> Path:
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_from)
    torch.manual_seed(1)
    if kind == "llama":
        model = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=len(tokenizer),
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=1,
                num_attention_heads=2,
                num_key_value_heads=1,
                max_position_embeddings=64,
            )
        )
    else:
        model = GPT2LMHeadModel(
            GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=1, n_head=2, n_positions=64)
        )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def folders(tiny_export, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("external")
    return {kind: _save(kind, root / kind, tiny_export) for kind in ("llama", "gpt2")}


@pytest.fixture()
def text(tmp_path) -> TextDataset:
    path = tmp_path / "eval.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in held_out_stories(3)))
    return TextDataset("stories", (str(path),))


def test_llama_and_gpt2_folders_are_evaluated_by_path(folders, text, tmp_path):
    runner = StepRunner(prefix=str(tmp_path / "out"), progress=False)
    evals = {
        kind: evaluate(f"eval/{kind}", model=str(folder), datasets=[text]) for kind, folder in folders.items()
    }
    run = runner.run(list(evals.values()))
    for kind, ev in evals.items():
        artifact = json.loads((Path(run.output_path(lower(ev))) / ".artifact.json").read_text())["result"]
        assert artifact["model"] == kind and artifact["hf_path"] == str(folders[kind])
        assert artifact["headline"]["metric"] == "bpb" and artifact["headline"]["value"] > 0
        assert artifact["headline"]["n"] == 3


def test_a_changed_weight_file_changes_the_key_and_a_moved_folder_does_not(folders, text, tmp_path):
    import shutil

    folder = tmp_path / "gpt2"
    shutil.copytree(folders["gpt2"], folder)
    runner = StepRunner(prefix=str(tmp_path / "out"), progress=False)

    def key(path: Path) -> str:
        return runner.plan([lower(evaluate("eval/gpt2", model=str(path), datasets=[text]))]).steps[0].key

    before = key(folder)
    moved = tmp_path / "elsewhere" / "gpt2"
    shutil.copytree(folder, moved)
    assert key(moved) == before
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of one weight
    weights.write_bytes(bytes(data))
    assert key(folder) != before


def test_bad_model_arguments_are_one_line_naming_the_field(tmp_path, text):
    empty = tmp_path / "no-config"
    empty.mkdir()
    with pytest.raises(
        ModelSourceError, match=r"evaluation 'eval/x': model=.*no-config.*has no config\.json"
    ):
        evaluate("eval/x", model=str(empty), datasets=[text])
    with pytest.raises(ModelSourceError, match="model='./missing': no such folder"):
        evaluate("eval/x", model="./missing", datasets=[text])
    with pytest.raises(
        ModelSourceError, match=r"not in the local cache and HF_HUB_OFFLINE is set.*hf download"
    ):
        evaluate("eval/x", model="example-org/no-such-model", datasets=[text])


def test_marin_run_prints_one_error_line_for_an_offline_hub_id(tmp_path):
    experiment = tmp_path / "exp.py"
    experiment.write_text(
        "from marin.experiment.evaluate import evaluate\n"
        "ev = evaluate('eval/hub', model='example-org/no-such-model', suite='core')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "marin.cli", "run", str(experiment), "--prefix", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        f"error: {experiment}:2: evaluation 'eval/hub': model='example-org/no-such-model'"
    )
    assert "Traceback" not in done.stderr
