"""A training process with every recipe on, for the resume tests:
`python recipes_child.py CACHE OTHER_CACHE OUT STEPS [KILL_AFTER]`.

Muon with a WSD schedule in two cycles, an EMA, the z-loss, skipped bad steps, document masking, and
a mixture schedule over two caches; with KILL_AFTER it SIGKILLs itself once step KILL_AFTER is recorded.
"""

import sys

from train_child import KillAfterStep, tiny_config

from marin.training.datasets import DatasetInput
from marin.training.mixture import MixtureSchedule
from marin.training.optim import MuonConfig
from marin.training.schedules import WSD
from marin.training.trainer import TrainJob, train


def recipes_job(cache: str, other: str, out: str, steps: int, callbacks=()) -> TrainJob:
    """The run: tiny_config with every recipe of issue 24 on."""
    config = tiny_config(
        steps,
        optimizer=MuonConfig(adam_learning_rate=3e-3, schedule=WSD(warmup=2, cycles=2, rewarmup=1)),
        ema=0.9,
        z_loss=1e-4,
        skip_bad_steps=5.0,
        document_masking=True,
        checkpoint_every=2,
        callbacks=callbacks,
    )
    mixture = MixtureSchedule.of(
        ["stories", "other"], [(0, {"stories": 1.0}), (steps // 2, {"stories": 1, "other": 1})]
    )
    datasets = (DatasetInput("stories", cache, 1.0), DatasetInput("other", other, 0.0))
    return TrainJob(config=config, datasets=datasets, output_path=out, mixture=mixture)


if __name__ == "__main__":
    cache, other, out, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    kill_after = int(sys.argv[5]) if len(sys.argv) > 5 else None
    train(recipes_job(cache, other, out, steps, (KillAfterStep(kill_after),) if kill_after else ()))
