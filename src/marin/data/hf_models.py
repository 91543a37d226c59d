"""One lock for building a Hugging Face model in this process.

transformers builds a model (`from_pretrained`, `from_config`, a class's `__init__`) under context
managers that swap process-wide state and put it back on exit: `PreTrainedModel.tie_weights`, the
`torch.nn.init` functions and torch's default dtype. Two threads building at once (steps on a
`ThreadCluster`, or any caller's threads) interleave those swaps, and the one that exits last puts back
what the other had swapped in: from then on every model in the process skips weight tying or
initialisation. Every place marin builds a transformers model holds this lock around the build.
"""

from __future__ import annotations

import threading

HF_MODEL_BUILD_LOCK = threading.RLock()
