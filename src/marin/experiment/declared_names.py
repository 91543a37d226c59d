"""Names a step will look up when it runs, checked when it is declared: `marin plan` finds the typo.

A misspelt harness task in `train_lm(eval_tasks=...)` used to raise at the first in-loop
evaluation (by default the last step, before its checkpoint), and fixing it changed the key, so the
training started again from step 0; a tokenizer without a chat template given to `sft()` failed
only once the step ran. Each check here names the field and the closest known name, and is made
only where the answer is knowable without running anything (a handle's own fields, a local
folder, the Hugging Face cache); where it is not (a StepSpec, a hub model not cached), the run
still checks.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from collections.abc import Sequence
from typing import Any

from marin.evaluation.errors import SuiteError


def check_harness_tasks(where: str, field: str, tasks: Sequence[str]) -> None:
    """Refuse a name in `tasks` that is neither ours, a suite's, nor the harness's, naming the closest."""
    from marin.evaluation.harness import ALL_OWN_TASKS
    from marin.evaluation.suites import SUITES, unknown

    known = set(ALL_OWN_TASKS) | {t.harness_task for s in SUITES.values() for t in s.tasks}
    for task in tasks:
        if not isinstance(task, str) or not task:
            raise SuiteError(f"{where}: {field} takes task names (strings), got {task!r}")
        if task in known:
            continue
        try:
            from marin.evaluation.harness import known_harness_tasks

            harness_names = known_harness_tasks()
        except ImportError:
            harness_names = []  # without the [eval] extra the run itself says what to install
        if harness_names and task not in harness_names:
            raise SuiteError(f"{where}: {field}: " + unknown("task", task, sorted(known) + harness_names))


def check_chat_template(where: str, model: Any) -> None:
    """Refuse fine-tuning on chat data a model whose tokenizer is known to have no chat template."""
    from marin.data.chat_template import ChatTemplateError

    found = _tokenizer_has_template(model)
    if found is not None and not found[0]:
        raise ChatTemplateError(
            f"{where}: the tokenizer of its model ({found[1]}) has no chat template; train it with "
            "train_tokenizer(..., chat_template='llama3'), or fine-tune a model whose tokenizer has one"
        )


def check_lora_targets(where: str, model: Any, targets: Sequence[str]) -> None:
    """Refuse a LoRA target that matches no linear layer of the model, when its architecture is known."""
    from marin.posttrain.lora import ALL_LINEAR, LoraConfigError

    names = _linear_names(model)
    if names is None:
        return
    kinds = sorted({name.rsplit(".", 1)[-1] for name in names})
    for target in targets:
        if target == ALL_LINEAR or any(n == target or n.endswith("." + target) for n in names):
            continue
        close = difflib.get_close_matches(target, kinds, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}?" if close else f"its layers are {', '.join(kinds)}"
        raise LoraConfigError(
            f"{where}: LoRA target {target!r} matches no linear layer of the model: {hint} "
            f"(or {ALL_LINEAR!r} for all of them)"
        )


def _model_config(model: Any) -> Any:
    """The architecture config of a train_lm()/sft()/dpo() handle or a local model folder; None if unknown."""
    from marin.experiment.train import TrainLm

    if isinstance(model, TrainLm):
        return model.model
    inner = getattr(model, "model", None)
    if hasattr(model, "objective") and inner is not None:  # an sft()/dpo() handle: its model's
        return _model_config(inner)
    folder = _local_folder(model)
    if folder is None:
        return None
    from marin.training.loading import model_config_at

    try:
        return model_config_at(folder)
    except Exception:  # noqa: BLE001 - not a folder we can read now: the run says why
        return None


def _linear_names(model: Any) -> list[str] | None:
    config = _model_config(model)
    if config is None:
        return None
    try:
        import torch

        from marin.posttrain.lora import adaptable_linears

        sized = dataclasses.replace(config, vocab_size=config.vocab_size or 256)  # names do not depend on it
        with torch.device("meta"):  # no memory: only the module names are wanted
            return list(adaptable_linears(sized.build()))
    except Exception:  # noqa: BLE001 - an architecture that cannot be built here: the run checks
        return None


def _tokenizer_has_template(model: Any) -> tuple[bool, str] | None:
    """(whether the model's tokenizer has a chat template, which tokenizer), or None when unknowable."""
    from marin.experiment.train import TrainLm

    if isinstance(model, TrainLm):
        handle = next(iter(model.datasets), None)
        tokenizer = getattr(handle, "tokenizer", None)
        if tokenizer is None:
            return None
        if hasattr(tokenizer, "chat_template") and hasattr(tokenizer, "vocab_size"):  # train_tokenizer()
            return bool(tokenizer.chat_template), f"train_tokenizer {tokenizer.name!r}"
        return _folder_has_template(tokenizer) if isinstance(tokenizer, str) else None
    inner = getattr(model, "model", None)
    if hasattr(model, "objective") and inner is not None:  # an sft()/dpo() export keeps its template
        return _tokenizer_has_template(inner)
    return _folder_has_template(model) if isinstance(model, str | os.PathLike) else None


def _folder_has_template(location: str | os.PathLike) -> tuple[bool, str] | None:
    """Whether the tokenizer files at a local folder (or its `hf/`), or of a hub id in the Hugging Face
    cache, carry a chat template; None when they cannot be read without the network."""
    text = os.fspath(location)
    folder = _local_folder(text)
    if folder is not None:
        config = os.path.join(folder, "tokenizer_config.json")
        if not os.path.isfile(config):
            return None
        has = os.path.isfile(os.path.join(folder, "chat_template.jinja")) or bool(
            _json(config).get("chat_template")
        )
        return has, folder
    from marin.posttrain.source import looks_like_hub_id

    if not looks_like_hub_id(text):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    repo, _, revision = text.partition("@")
    cached = try_to_load_from_cache(repo, "tokenizer_config.json", revision=revision or None)
    if not isinstance(cached, str):
        return None
    template = os.path.join(os.path.dirname(cached), "chat_template.jinja")
    return bool(_json(cached).get("chat_template")) or os.path.isfile(template), repo


def _local_folder(location: Any) -> str | None:
    """A local model folder: the path given, or its `hf/` export (a train step's output)."""
    if not isinstance(location, str | os.PathLike):
        return None
    path = os.path.expanduser(os.fspath(location))
    for folder in (path, os.path.join(path, "hf")):
        if os.path.isfile(os.path.join(folder, "config.json")) or os.path.isfile(
            os.path.join(folder, "tokenizer_config.json")
        ):
            return folder
    return None


def _json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
