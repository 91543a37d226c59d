"""sft() and dpo() as cached steps: their exports chat through transformers, LoRA adapters load with PEFT."""

from __future__ import annotations

import json
import os

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

import storage
from marin.data.chat import ChatData
from marin.execution.artifact import read_artifact
from marin.execution.errors import MarinError
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.posttrain import dpo, sft
from marin.posttrain.lora import LoraConfig
from marin.training.optim import AdamConfig
from marin.training.schedules import Cosine

QA = "marin://tinystories-qa"
RECIPE = dict(
    optimizer=AdamConfig(learning_rate=3e-3, schedule=Cosine(warmup=1)),
    batch_size=2,
    seq_len=448,
    num_train_steps=3,
    cpu_threads=1,
    checkpoint_every_minutes=None,
)


def _steps(model_dir: str):
    data = ChatData(source=QA, sample_count=6)
    chat = sft("checkpoints/sft", model=model_dir, dataset=data, **RECIPE)
    lora = LoraConfig(rank=2, targets=("q_proj", "v_proj"))
    adapted = sft("checkpoints/sft-lora", model=model_dir, dataset=data, lora=lora, **RECIPE)
    aligned = dpo("checkpoints/dpo", model=chat, dataset=data, beta=0.2, **RECIPE)
    return chat, adapted, aligned


def test_post_training_steps_run_cache_and_export_models_that_chat(chat_model_dir, tmp_path):
    prefix = str(tmp_path / "prefix")
    handles = _steps(chat_model_dir)
    run = StepRunner(prefix=prefix, progress=False).run([lower(h) for h in handles])
    outputs = [run.output_path(lower(h)) for h in handles]
    chat_out, lora_out, dpo_out = outputs

    # a second run of the same declarations reuses every step
    again = StepRunner(prefix=prefix, progress=False).plan([lower(h) for h in _steps(chat_model_dir)])
    assert {s.name: str(s.state) for s in again.steps} == {h.name: "cached" for h in handles}

    sft_result = read_artifact(chat_out).result
    assert sft_result["objective"] == "sft" and sft_result["conversations"] == 6
    assert 0 < sft_result["target_tokens"] < sft_result["tokens"]
    generation = json.loads(storage.read_bytes(f"{chat_out}/hf/generation_config.json"))
    tokenizer = AutoTokenizer.from_pretrained(f"{chat_out}/hf")
    assert generation["eos_token_id"] == [
        tokenizer.convert_tokens_to_ids("<|eot_id|>"),
        tokenizer.eos_token_id,
    ]
    chat = pipeline("text-generation", model=f"{chat_out}/hf", tokenizer=tokenizer)
    reply = chat([{"role": "user", "content": "Who is this story about?"}], max_new_tokens=4, do_sample=False)
    assert reply[0]["generated_text"][-1]["role"] == "assistant"

    dpo_metrics = [json.loads(line) for line in storage.read_bytes(f"{dpo_out}/metrics.jsonl").splitlines()]
    assert {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies"} <= dpo_metrics[
        -1
    ].keys()
    assert read_artifact(dpo_out).result["pairs"] == 6

    # LoRA: PEFT loads the adapter onto the starting model's export, and it computes the merged export's logits
    peft = pytest.importorskip("peft")
    lora_result = read_artifact(lora_out).result
    assert lora_result["adapter_path"] == f"{lora_out}/adapter"
    base = AutoModelForCausalLM.from_pretrained(chat_model_dir, dtype=torch.float32)
    adapted = peft.PeftModel.from_pretrained(base, lora_result["adapter_path"]).eval()
    merged = AutoModelForCausalLM.from_pretrained(f"{lora_out}/hf", dtype=torch.float32).eval()
    tokens = torch.randint(0, base.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(adapted(tokens).logits, merged(tokens).logits, atol=1e-5)
    checkpoint = os.path.join(lora_out, "checkpoints", "step-00000003")
    full_checkpoint = os.path.join(chat_out, "checkpoints", "step-00000003")
    size = {p: os.path.getsize(os.path.join(p, "model.safetensors")) for p in (checkpoint, full_checkpoint)}
    assert size[checkpoint] < 0.05 * size[full_checkpoint]  # the adapters alone


def test_declarations_refuse_what_cannot_run_with_one_line(chat_model_dir):
    data = ChatData(source=QA, sample_count=6)
    cases = [
        (
            lambda: dpo("d", model=chat_model_dir, dataset=data, beta=0.0, **RECIPE),
            "beta must be a number > 0",
        ),
        (
            lambda: sft(
                "s", model=chat_model_dir, dataset=data, lora=LoraConfig(), parallelism="fsdp", **RECIPE
            ),
            "LoRA with parallelism='fsdp' is not supported",
        ),
        (
            lambda: sft("s", model=chat_model_dir, dataset=data, lora=LoraConfig(), ema=0.99, **RECIPE),
            "drop ema or lora",
        ),
        (lambda: sft("s", model=42, dataset=data, **RECIPE), "sft 's': model=42 is an int"),
    ]
    for declare, message in cases:
        with pytest.raises(MarinError) as caught:
            lower(declare())
        assert message in str(caught.value) and "\n" not in str(caught.value)
