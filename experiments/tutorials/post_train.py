"""Post-training on a task whose answers are known: pretrain a small model, SFT it, DPO it, and score
exact match on held-out questions after each stage, with intervals.

    python -m experiments.tutorials.post_train
    POST_TRAIN_QUICK=1 python -m experiments.tutorials.post_train   # a few minutes: what the tests run

Every stage is a cached step: a tokenizer with a chat template, a token cache of the embedded
stories, a pretrained model, `sft()` on `marin://tinystories-qa` conversations (questions about each
story, whose answers the story generator knows), `dpo()` on its preference pairs (the right answer
against a plausible wrong one), and three evaluations (`evaluations/qa-base`, `evaluations/qa-sft`,
`evaluations/qa-dpo`) of the same held-out questions (stories no stage trained on) by exact match of
the greedy reply. It prints each model's exact match with its 95% interval and the paired difference
between consecutive stages (McNemar's test on the same items). Each stage is trained once, with one
seed: a difference here is between these three trained models, and seed variance is unmeasured (the
script says so); `marin.experiment.replicate` trains a stage with several seeds, and `marin compare`
then compares the stages as configurations (docs/evaluation.md, "What a difference means"). The full
run is sized for about ten minutes on a 2-core CPU; a second run finds every step cached.
"""

import os

import orjson

import storage
from marin.data.chat import ChatData
from marin.data.corpus import SOURCE_NAME as STORIES
from marin.data.tinystories_qa import SOURCE_NAME as QA
from marin.evaluation.exact_match import ITEMS_FILE, ExactMatchTask
from marin.evaluation.stats import ItemScores, paired_difference
from marin.execution.artifact import read_artifact
from marin.execution.lazy import lower
from marin.execution.step_runner import StepRunner
from marin.experiment.data import tokenized, train_tokenizer
from marin.experiment.evaluate import evaluate
from marin.experiment.posttrain import dpo, sft
from marin.experiment.train import train_lm
from marin.training.models import LlamaConfig
from marin.training.optim import AdamConfig
from marin.training.schedules import WSD, Cosine

QUICK = os.environ.get("POST_TRAIN_QUICK") == "1"
# Every stage for two steps of two rows, on a hundredth of the data and 10 questions: the tutorial
# end to end, not what it learns (the test suite's default tier runs it so; docs/testing.md).
SMOKE = os.environ.get("POST_TRAIN_SMOKE") == "1"
SCALE = 0.2 if QUICK else 1.0


def steps(n: int, quick: int | None = None) -> int:
    """`n` optimizer steps; in the quick run `quick`, else a fifth of them; two in a smoke run."""
    if SMOKE:
        return 2
    if QUICK:
        return quick if quick is not None else max(10, round(n * SCALE))
    return n


def count(n: int) -> int:
    """`n` examples; a hundredth of them (at least 8) in a smoke run."""
    return max(8, n // 100) if SMOKE else n


# A small Llama: 4 layers of width 64 (about 0.5M parameters). The output multiplier lets its logits
# move in few steps (see experiments/llama.py).
qa_llama = LlamaConfig(
    hidden_dim=64, intermediate_dim=256, num_layers=4, num_heads=2, max_seq_len=512, output_multiplier=8.0
)
trainer_options = dict(batch_size=2 if SMOKE else 8, seq_len=512)

chat_tokenizer = train_tokenizer(
    "tokenizers/marin-chat-bpe",
    source=STORIES,
    vocab_size=2048,
    sample_count=count(5000),
    chat_template="llama3",
)
stories = tokenized(
    "tokenized/tinystories-chat", tokenizer=chat_tokenizer, source=STORIES, sample_count=count(8000)
)

base_model = train_lm(
    "checkpoints/qa-base",
    model=qa_llama,
    optimizer=AdamConfig(learning_rate=3e-3, weight_decay=0.1, schedule=Cosine(warmup=20)),
    datasets={stories: 1.0},
    num_train_steps=steps(300),
    **trainer_options,
)

sft_model = sft(
    "checkpoints/qa-sft",
    model=base_model,
    dataset=ChatData(source=QA, sample_count=count(3000)),
    validation=ChatData(source=QA, split="validation", sample_count=count(100)),
    # a constant rate, then a decay over the last fifth (WSD): answering from the story, not from
    # priors, appears suddenly after a few hundred steps, and a rate that has decayed by then delays it
    optimizer=AdamConfig(learning_rate=1e-3, schedule=WSD(warmup=20, decay_fraction=0.2)),
    num_train_steps=steps(600),
    steps_per_eval=150,
    **trainer_options,
)

dpo_model = dpo(
    "checkpoints/qa-dpo",
    model=sft_model,
    dataset=ChatData(source=QA, sample_count=count(4000)),
    validation=ChatData(source=QA, split="validation", sample_count=count(100)),
    beta=0.1,
    optimizer=AdamConfig(learning_rate=3e-4, schedule=Cosine(warmup=10)),
    num_train_steps=steps(80, quick=6),
    steps_per_eval=40,
    **trainer_options,
)

held_out = ExactMatchTask(items=10 if SMOKE else 100 if QUICK else 400)
qa_base = evaluate("evaluations/qa-base", model=base_model, exact_match=held_out)
qa_sft = evaluate("evaluations/qa-sft", model=sft_model, exact_match=held_out)
qa_dpo = evaluate("evaluations/qa-dpo", model=dpo_model, exact_match=held_out)


def _item_scores(output: str) -> ItemScores:
    records = [
        orjson.loads(line) for line in storage.read_bytes(storage.join(output, ITEMS_FILE)).splitlines()
    ]
    return ItemScores(ids=[r["id"] for r in records], values=[float(r["correct"]) for r in records])


def main() -> None:
    """Run every stage, then print exact match per stage and the paired differences between stages."""
    specs = {"base": lower(qa_base), "sft": lower(qa_sft), "dpo": lower(qa_dpo)}
    # one step at a time: on a small machine, a training and an evaluation run side by side would fight
    # over its cores (each uses all of them)
    run = StepRunner(max_concurrent=1).run(list(specs.values()))
    results, scores = {}, {}
    for stage, spec in specs.items():
        output = run.output_path(spec)
        results[stage] = read_artifact(output).result["exact_match"]["exact_match"]
        scores[stage] = _item_scores(output)
    n = results["base"]["n"]
    print()
    print(f"exact match on {n} held-out questions of {QA} (validation stories), 95% Wilson intervals")
    for stage, m in results.items():
        lo, hi = m["ci95"]
        print(f"  {stage:<5} {m['value']:.3f}  [{lo:.3f}, {hi:.3f}]")
    print("  one seed per stage: differences between these trained models; seed variance is unmeasured")
    for a, b in (("sft", "base"), ("dpo", "sft")):
        d = paired_difference(scores[a], scores[b])
        lo, hi = d.difference.ci95
        verdict = "significant" if d.significant else "not significant"
        print(
            f"  {a} - {b}: {d.difference.value:+.3f}  [{lo:+.3f}, {hi:+.3f}]  McNemar p = {d.p_value:.2g} "
            f"({d.a_only} vs {d.b_only} discordant items; {verdict})"
        )


if __name__ == "__main__":
    main()
