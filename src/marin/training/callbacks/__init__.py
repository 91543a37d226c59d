"""Callbacks: everything the training loop does besides the train step (see `base` for the contract).

Each built-in callback is a module of its own and a dataclass of its settings; the trainer
assembles them from the run's config (`marin.training.trainer.default_callbacks`) and adds the
user's (`train_lm(..., callbacks=(MyCallback(),))`). They run after each step in order of priority:

| priority | callback | settings (from TrainConfig) |
| --- | --- | --- |
| 10 | `WeightAverage` (`ema`) | `decay` (`ema`), `export` (`export_ema`) |
| 100 | `Evaluation` (`evaluation`) | `every` (`steps_per_eval`) |
| 200 | `FlopsAccount` (`flops`) | none |
| 500 | the user's, in the order given | their own |
| 700 | `Exports` (`exports`) | `every` (`export_every`) |
| 800 | `MetricsWriter` (`metrics`) | none |
| 900 | `Checkpointing` (`checkpointing`) | `every` (`checkpoint_every`), `every_minutes` (`checkpoint_every_minutes`) |
| 1000 | `ProgressBar` (`progress`) | none |

So a user callback sees the step's evaluation and FLOPs, what it adds to the record is written, and
a stop it requests is checkpointed in the same step. Each callback's state is saved under its name.
"""

from marin.training.callbacks.base import USER_PRIORITY, Callback, StepOutput, TrainerView
from marin.training.callbacks.stop_after import StopAfter

__all__ = ["USER_PRIORITY", "Callback", "StepOutput", "StopAfter", "TrainerView"]
