"""The harness bridge must cost little: `evaluate()` against `lm_eval.simple_evaluate` called directly (issue 22).

One export (a byte-level BPE on the embedded corpus and a random Llama, as `eval_perplexity.py` builds)
and one set of task files: `--items` story-ending items (multiple choice) and as many stories scored
with `loglikelihood_rolling` (a perplexity set). Each case runs in a fresh interpreter, the way a user
meets it, best of `--rounds` interleaved rounds:
- `ours`: an experiment's `evaluate(..., model=FOLDER, harness_tasks=(task,))` run by
  `StepRunner().run` on the default cluster, into a fresh prefix; everything counted (planning, the
  worker, loading, scoring, intervals, writing results, items and samples);
- `direct`: `lm_eval.simple_evaluate(model="hf", ...)` on the same export and the same task files, as
  a user of the harness would call it.
Figures: items/s of each and the ratio ours / direct (goal >= 0.95) for the multiple-choice task and
for the perplexity set; and, inside `ours`, the share of the evaluation's wall time its intervals take
(every metric's interval recomputed from the step's items.json; goal <= 5%).

Usage: `python benchmarks/eval_bridge.py [--items 500] [--rounds 3]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fresh import fresh_json, load_average  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TASKS = {"multiple_choice": "marin_story_endings", "perplexity": "marin_text_perplexity"}
BATCH_SIZE = 8


def prepare(folder: str, items: int) -> None:
    """The export, the stories file, and the task files both cases score."""
    from eval_perplexity import build_export

    from marin.data.corpus import CORPUS_SIZE, stories
    from marin.evaluation.harness import write_own_tasks

    build_export(os.path.join(folder, "export"))
    texts = [str(s) for s in stories(CORPUS_SIZE - items, CORPUS_SIZE)]
    with open(os.path.join(folder, "stories.jsonl"), "w") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in texts)
    write_own_tasks(os.path.join(folder, "harness"), texts, items, seed=0)


def ours(folder: str, task: str, items: int) -> dict:
    """evaluate() of the export on one task, by the StepRunner, into a fresh prefix."""
    start = time.perf_counter()
    from marin.evaluation.documents import TextDataset
    from marin.execution.lazy import lower
    from marin.execution.step_runner import StepRunner
    from marin.experiment.evaluate import evaluate

    ev = evaluate(
        "eval/bench",
        model=os.path.join(folder, "export"),
        harness_tasks=(task,),
        harness_stories=TextDataset("stories", (os.path.join(folder, "stories.jsonl"),)),
        harness_items=items,
        batch_size=BATCH_SIZE,
    )
    run = StepRunner(prefix=tempfile.mkdtemp(prefix="bench-out-", dir=folder), progress=False).run([ev])
    wall = time.perf_counter() - start
    out = run.output_path(lower(ev))
    with open(os.path.join(out, "items.json"), "rb") as f:
        scored = json.load(f)["harness"][task]
    with open(os.path.join(out, ".executor_status"), "rb") as f:
        events = json.load(f)["events"]
    import numpy as np

    from marin.evaluation.harness import item_metric

    aggregation = {"acc": "mean", "acc_norm": "mean", "bits_per_byte": "bits_per_byte"}
    start = time.perf_counter()
    for name, m in scored.items():
        agg = aggregation.get(name, "weighted_perplexity")
        per_item = (
            m["values"] if m["weights"] is None else np.stack([-np.asarray(m["values"]), m["weights"]], 1)
        )
        item_metric(name, agg, per_item, 1000, 0)
    intervals = time.perf_counter() - start
    step_s = events[-1]["time"] - next(e["time"] for e in events if e["state"] == "RUNNING")
    return {"wall_s": wall, "intervals_s": intervals, "step_s": step_s}


def direct(folder: str, task: str, items: int) -> dict:
    """lm_eval.simple_evaluate on the same export and task files."""
    start = time.perf_counter()
    import lm_eval
    from lm_eval.tasks import TaskManager
    from transformers import AutoTokenizer

    from marin.evaluation.perplexity import prefix_token_id

    export = os.path.join(folder, "export")
    lm_eval.simple_evaluate(
        model="hf",
        model_args={
            "pretrained": export,
            "dtype": "float32",
            "device": "cpu",
            "add_bos_token": False,
            "prefix_token_id": prefix_token_id(AutoTokenizer.from_pretrained(export)),
        },
        tasks=[task],
        task_manager=TaskManager(
            include_defaults=False, include_path=os.path.join(folder, "harness", "tasks")
        ),
        batch_size=BATCH_SIZE,
    )
    return {"wall_s": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=3, metavar=("CASE", "FOLDER", "TASK"))
    args = parser.parse_args()
    if args.child:
        case, folder, task = args.child
        print(json.dumps((ours if case == "ours" else direct)(folder, task, args.items)))
        return

    folder = tempfile.mkdtemp(prefix="eval-bridge-")
    prepare(folder, args.items)
    env = {"MARIN_EXPORT_CACHE": os.path.join(folder, "cache")}
    out: dict = {"benchmark": "eval_bridge", "items": args.items, "batch_size": BATCH_SIZE}
    met = True
    for kind, task in TASKS.items():
        best: dict[str, dict] = {}
        for _ in range(args.rounds):
            for case in ("ours", "direct"):
                got = fresh_json(
                    __file__, "--items", str(args.items), "--child", case, folder, task, env=env, timeout=3600
                )
                if case not in best or got["wall_s"] < best[case]["wall_s"]:
                    best[case] = got
        ratio = best["direct"]["wall_s"] / best["ours"]["wall_s"]  # items/s ours over items/s direct
        share = best["ours"]["intervals_s"] / best["ours"]["wall_s"]
        met = met and ratio >= 0.95 and share <= 0.05
        out[kind] = {
            "task": task,
            "ours_items_per_s": round(args.items / best["ours"]["wall_s"], 2),
            "direct_items_per_s": round(args.items / best["direct"]["wall_s"], 2),
            "ratio_ours_over_direct": round(ratio, 3),
            "ours_wall_s": round(best["ours"]["wall_s"], 3),
            "ours_step_s": round(best["ours"]["step_s"], 3),
            "direct_wall_s": round(best["direct"]["wall_s"], 3),
            "intervals_s": round(best["ours"]["intervals_s"], 4),
            "intervals_share_of_wall": round(share, 4),
        }
    out.update(
        goal="ratio >= 0.95 and intervals <= 5% of wall, each task", goal_met=met, load_average=load_average()
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
