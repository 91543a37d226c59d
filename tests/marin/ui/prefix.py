"""A prefix the UI tests read: a small experiment run by the real StepRunner.

`raw` writes data shards in every format the data page reads (one record is hostile HTML), `train`
writes a metrics.jsonl (run twice with another learning rate: two versions of one step), `evil`
has a hostile name and hash_attrs, `broken` fails, `pinned` leaves a superseded copy, and `tokens` is a
real token cache.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

EXPERIMENT = textwrap.dedent("""
    import gzip
    import json
    import os
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    from marin.execution.step_spec import StepSpec

    HOSTILE = "<script>alert('record')</script>"

    def make_raw(path):
        rows = [{"id": i, "text": HOSTILE if i == 3 else f"row {i}"} for i in range(45)]
        lines = "".join(json.dumps(r) + "\\n" for r in rows)
        data = Path(path, "data")
        data.mkdir()
        (data / "a.jsonl").write_text(lines)
        (data / "b.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
        (data / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines.encode()))
        pq.write_table(pa.Table.from_pylist(rows), str(data / "d.parquet"), row_group_size=10)
        (data / "e.txt").write_text("".join(f"line {i}\\n" for i in range(30)))
        print("raw wrote", HOSTILE)
        return {"documents": len(rows)}

    def train_curve(lr, path):
        from marin.execution.context import current
        assert Path(current().path_of("raw"), "data", "a.jsonl").exists()
        with open(Path(path, "metrics.jsonl"), "w") as f:
            for step in range(1, 11):
                loss = 5.0 / step ** (lr * 100)
                row = {"step": step, "tokens": step * 512, "loss": loss, "lr": lr, "tokens_per_s": 1000.0 + step}
                if step % 5 == 0:
                    row.update(eval_loss=loss + 0.1, eval_bpb=(loss + 0.1) / 2)
                f.write(json.dumps(row) + "\\n")
        return {"headline": {"metric": "final_loss", "value": loss}, "final_loss": loss}  # as train_lm's

    def evil_step(path):
        print("</pre><script>alert('log')</script>")

    def broken():
        raise ValueError("broken on purpose <b>not bold</b>")

    import functools
    LR = float(os.environ.get("UI_TEST_LR", "0.005"))
    raw = StepSpec(name="raw", fn=make_raw)
    train = StepSpec(name="train", fn=functools.partial(train_curve, LR), deps=[raw], hash_attrs={"lr": LR, "batch": 4})
    evil = StepSpec(name="evil<img src=x onerror=alert(1)>", fn=evil_step, deps=[train],
                    hash_attrs={"note": "</script><script>alert(2)</script>"})
    broken_step = StepSpec(name="broken", fn=broken, deps=[raw])
    # A fixed output path: the second run (another lr) moves the first output aside as superseded.
    pinned = StepSpec(name="pinned", fn=evil_step, output_path="pinned", hash_attrs={"lr": LR})
""")


def write_experiment(folder: Path) -> Path:
    """The experiment file, written into `folder`."""
    path = folder / "ui_experiment.py"
    path.write_text(EXPERIMENT)
    return path


def run_experiment(file: Path, prefix: Path, lr: str) -> None:
    """Run every step of `file` under `prefix` with learning rate `lr` (`broken` fails, as it should)."""
    from marin.execution.discover import load_steps
    from marin.execution.errors import StepFailedError
    from marin.execution.step_runner import StepRunner

    os.environ["UI_TEST_LR"] = lr
    try:
        steps = load_steps(str(file))
        try:
            StepRunner(prefix=str(prefix), progress=False).run(steps)
        except StepFailedError:
            pass
    finally:
        os.environ.pop("UI_TEST_LR", None)


def build_token_cache(folder: Path, prefix: Path) -> None:
    """A real token cache under `prefix` (a byte-level BPE trained on the embedded stories)."""
    from marin.data.corpus import SOURCE_NAME, stories
    from marin.data.tokenizer_training import train_byte_level_bpe
    from marin.execution.step_runner import StepRunner
    from marin.experiment.data import tokenized
    from zephyr import ZephyrConfig

    tokenizer = folder / "tokenizer"
    train_byte_level_bpe(stories(0, 200), 384, str(tokenizer))
    cache = tokenized(
        "tokenized/stories",
        tokenizer=str(tokenizer),
        source=SOURCE_NAME,
        sample_count=60,
        validation_fraction=0.1,
        zephyr=ZephyrConfig(backend="sync"),
    )
    StepRunner(prefix=str(prefix), progress=False).run([cache])


def chatter(stop_file: str, output_path: str) -> dict:
    """A step that logs a line every quarter second until `stop_file` appears (a RUNNING step to watch)."""
    import time

    for tick in range(2400):
        print(f"tick {tick}", flush=True)
        if os.path.exists(stop_file):
            return {"ticks": tick}
        time.sleep(0.25)
    raise TimeoutError(f"{stop_file} never appeared")


def build_pipeline(folder: Path, prefix: Path) -> None:
    """tokenize -> train two tiny runs (two learning rates) -> evaluate the first (with our harness tasks), and a
    sweep report of both."""
    from experiments.llama import llama_nano
    from fray.cluster import ResourceConfig
    from marin.data.corpus import SOURCE_NAME, stories
    from marin.data.tokenizer_training import train_byte_level_bpe
    from marin.evaluation.harness import OWN_TASKS
    from marin.execution.step_runner import StepRunner
    from marin.experiment.data import tokenized
    from marin.experiment.evaluate import evaluate, sweep_report
    from marin.experiment.train import train_lm
    from marin.training.optim import AdamConfig
    from zephyr import ZephyrConfig

    tokenizer = folder / "tokenizer"
    train_byte_level_bpe(stories(0, 200), 384, str(tokenizer))
    cache = tokenized(
        "tokenized/stories",
        tokenizer=str(tokenizer),
        source=SOURCE_NAME,
        sample_count=80,
        validation_fraction=0.1,
        zephyr=ZephyrConfig(backend="sync"),
    )
    runs = [
        train_lm(
            name=f"checkpoints/nano-lr{lr:g}",
            model=llama_nano,
            optimizer=AdamConfig(learning_rate=lr),
            datasets={cache: 1.0},
            batch_size=2,
            seq_len=128,
            num_train_steps=6,
            resources=ResourceConfig.with_cpu(),
            steps_per_eval=3,
            checkpoint_every=6,
        )
        for lr in (6e-3, 1e-3)
    ]
    evaluation = evaluate(
        "eval/nano",
        model=runs[0],
        datasets=[cache],
        prompts=("Once upon a time",),
        harness_tasks=OWN_TASKS,
        harness_items=4,
    )
    report = sweep_report("reports/lr", {"lr=6e-3": runs[0], "lr=1e-3": runs[1]})
    StepRunner(prefix=str(prefix), progress=False).run([*runs, evaluation, report])
