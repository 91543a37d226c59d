"""Small local copies of the suites' hub datasets, in the same schema and folder layout as on the hub.

Each dataset is a folder with one JSONL file per config and split and a README.md whose YAML header
declares the configs (as hub dataset repos do), so `datasets.load_dataset(folder, config)` reads it
as the harness reads the hub dataset. The texts come from the embedded story corpus. Every item's
text carries a tag, `<split>#<i>`, so a test can count the few-shot examples in a prompt.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

from marin.data.corpus import stories

LETTERS = "ABCDE"


def _sentences(seed: int, count: int) -> list[str]:
    texts = list(stories(30_000 + seed * 100, 30_000 + seed * 100 + count))
    return [t.split(". ")[0].strip().rstrip(".") for t in texts]


def _write(folder: Path, configs: dict[str | None, dict[str, list[dict]]]) -> str:
    """configs: {config name (None: the default), {split: rows}} -> the folder, with its README header."""
    lines = ["---", "configs:"]
    for config, splits in configs.items():
        name = config or "default"
        lines.append(f"- config_name: {name}")
        lines.append("  data_files:")
        for split, rows in splits.items():
            path = folder / name / f"{split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            lines.append(f"  - split: {split}")
            lines.append(f"    path: {name}/{split}.jsonl")
    lines.append("---")
    (folder / "README.md").write_text("\n".join(lines) + "\n")
    return str(folder)


def _rows(
    split: str, count: int, seed: int, make: Callable[[str, list[str], random.Random], dict]
) -> list[dict]:
    rng = random.Random(f"{split}-{seed}")
    return [
        make(f"{split}#{i}", _sentences(seed * 7 + i + (0 if split == "test" else 50), 6), rng)
        for i in range(count)
    ]


def _arc(tag, s, rng):
    answer = rng.randrange(4)
    return {
        "id": tag,
        "question": f"{s[0]} ({tag})?",
        "choices": {"text": s[1:5], "label": list("ABCD")},
        "answerKey": "ABCD"[answer],
    }


def _boolq(tag, s, rng):
    return {"question": f"{s[0]} {tag}", "passage": s[1], "idx": 0, "label": rng.randrange(2)}


def _copa(tag, s, rng):
    return {
        "premise": f"{s[0]} {tag}.",
        "choice1": s[1] + ".",
        "choice2": s[2] + ".",
        "question": rng.choice(["cause", "effect"]),
        "idx": 0,
        "label": rng.randrange(2),
    }


def _csqa(tag, s, rng):
    return {
        "id": tag,
        "question": f"{s[0]} ({tag})?",
        "question_concept": "story",
        "choices": {"label": list(LETTERS), "text": s[1:6]},
        "answerKey": LETTERS[rng.randrange(5)],
    }


def _hellaswag(tag, s, rng):
    return {
        "ind": 0,
        "activity_label": f"Story {tag}",
        "ctx_a": s[0] + ".",
        "ctx_b": "then",
        "ctx": s[0] + ". then",
        "endings": s[1:5],
        "source_id": tag,
        "split": "val",
        "split_type": "indomain",
        "label": str(rng.randrange(4)),
    }


def _lambada(tag, s, rng):
    return {"text": f"{s[0]} {tag} {s[1]}"}


def _openbookqa(tag, s, rng):
    return {
        "id": tag,
        "question_stem": f"{s[0]} ({tag})",
        "choices": {"text": s[1:5], "label": list("ABCD")},
        "answerKey": "ABCD"[rng.randrange(4)],
    }


def _piqa(tag, s, rng):
    return {"goal": f"{s[0]} ({tag})", "sol1": s[1], "sol2": s[2], "label": rng.randrange(2)}


def _wsc(tag, s, rng):
    text = f"{s[0]} {tag}, and she smiled."
    loc = text.index("she")
    return {
        "text": text,
        "pronoun": "she",
        "pronoun_loc": loc,
        "quote": "she smiled",
        "quote_loc": loc,
        "options": ["The girl", "The cat"],
        "label": rng.randrange(2),
        "source": "synthetic",
    }


def _winogrande(tag, s, rng):
    return {
        "sentence": f"{s[0]} {tag}, so _ went home.",
        "option1": "Tom",
        "option2": "Sue",
        "answer": rng.choice("12"),
    }


def _agieval(tag, s, rng):
    choices = [f"({LETTERS[k]}){s[k + 1][:40]}" for k in range(5)]
    return {
        "query": f"Q: {s[0]} ({tag}) Answer Choices: {' '.join(choices)}\nA: Among A through E, the answer is",
        "choices": choices,
        "gold": [rng.randrange(5)],
    }


def _mmlu(subject):
    def make(tag, s, rng):
        return {
            "question": f"{s[0]} ({tag})?",
            "subject": subject,
            "choices": s[1:5],
            "answer": rng.randrange(4),
        }

    return make


def _paloma(tag, s, rng):
    return {"text": ". ".join(s) + f" {tag}.", "id": tag, "source": "synthetic"}


def build(root: Path, items: int = 4, shots_pool: int = 12) -> dict[str, str]:
    """Write every core dataset, two MMLU subjects and two Paloma domains; return {hub id: local folder}."""
    root.mkdir(parents=True, exist_ok=True)

    def splits(make, seed, *names, pool=shots_pool):
        return {n: _rows(n, pool if n == "train" else items, seed, make) for n in names}

    return {
        "allenai/ai2_arc": _write(
            root / "ai2_arc",
            {
                c: splits(_arc, i, "train", "validation", "test")
                for i, c in enumerate(("ARC-Easy", "ARC-Challenge"))
            },
        ),
        "aps/super_glue": _write(
            root / "super_glue",
            {
                "boolq": splits(_boolq, 3, "train", "validation"),
                "copa": splits(_copa, 4, "train", "validation"),
            },
        ),
        "tau/commonsense_qa": _write(
            root / "commonsense_qa", {None: splits(_csqa, 5, "train", "validation")}
        ),
        "Rowan/hellaswag": _write(root / "hellaswag", {None: splits(_hellaswag, 6, "train", "validation")}),
        "EleutherAI/lambada_openai": _write(root / "lambada_openai", {None: splits(_lambada, 7, "test")}),
        "allenai/openbookqa": _write(
            root / "openbookqa", {"main": splits(_openbookqa, 8, "train", "validation", "test")}
        ),
        "baber/piqa": _write(root / "piqa", {None: splits(_piqa, 9, "train", "validation")}),
        "lighteval/winograd_wsc": _write(root / "winograd_wsc", {"wsc273": splits(_wsc, 10, "test")}),
        "allenai/winogrande": _write(
            root / "winogrande", {"winogrande_xl": splits(_winogrande, 11, "train", "validation")}
        ),
        "hails/agieval-lsat-ar": _write(root / "agieval", {None: {"test": _rows("test", 6, 12, _agieval)}}),
        "cais/mmlu": _write(
            root / "mmlu",
            {
                subject: {
                    "test": _rows("test", items, 13 + k, _mmlu(subject)),
                    "validation": _rows("validation", items, 13 + k, _mmlu(subject)),
                    "dev": _rows("dev", 5, 13 + k, _mmlu(subject)),
                }
                for k, subject in enumerate(("anatomy", "astronomy"))
            },
        ),
        "allenai/paloma": _write(
            root / "paloma",
            {d: splits(_paloma, 15 + k, "val", "test") for k, d in enumerate(("c4_en", "ptb"))},
        ),
    }
