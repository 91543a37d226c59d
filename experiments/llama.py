"""Llama model sizes for experiments.

`vocab_size` is left to the tokenizer (None): the trainer takes it from the token cache. Parameter
counts therefore depend on the tokenizer; the table gives them at the Llama 3 / Marin tokenizer's
128,256 entries (untied input and output embeddings), and without embeddings. They are computed by
`LlamaConfig.num_parameters` and checked against the instantiated modules by
tests/marin/training/models/test_llama.py. The other architectures' sizes are in experiments/models.py.

| name         | layers | hidden | heads (kv) | MLP   | max seq | params @128,256 vocab | non-embedding |
| ------------ | ------ | ------ | ---------- | ----- | ------- | --------------------- | ------------- |
| `llama_nano` | 2      | 32     | 2 (2)      | 128   | 2048    | 8,241,312             | 32,928        |
| `llama_30m`  | 4      | 128    | 2 (2)      | 448   | 4096    | 33,784,960            | 951,424       |
| `llama_150m` | 6      | 512    | 8 (8)      | 1792  | 4096    | 154,147,328           | 22,813,184    |
| `llama_600m` | 24     | 1024   | 16 (8)     | 3584  | 4096    | 602,457,088           | 339,788,800   |
| `llama_1_4b` | 16     | 2048   | 16 (8)     | 7168  | 4096    | 1,431,373,824         | 906,037,248   |

`llama_nano` scales its logits by `output_multiplier=8` (see `LlamaConfig`): at width 32 and the
tiny-LLM example's learning rate of 6e-4, the plain parameterization cannot move its logits far enough in 100
steps to learn even the unigram distribution (the demo's loss stayed at 6.2 nats against a unigram
entropy of 5.3); with it, the same run reaches 2.8. The export folds the multiplier into `lm_head`.
"""

from marin.training.models import LlamaConfig

REFERENCE_VOCAB_SIZE = 128_256
"""The vocabulary the documented parameter counts assume (Llama 3 / Marin tokenizer)."""

llama_nano = LlamaConfig(
    hidden_dim=32,
    intermediate_dim=128,
    num_layers=2,
    num_heads=2,
    num_kv_heads=2,
    max_seq_len=2048,
    output_multiplier=8.0,
)
llama_30m = LlamaConfig(
    hidden_dim=128, intermediate_dim=448, num_layers=4, num_heads=2, num_kv_heads=2, max_seq_len=4096
)
llama_150m = LlamaConfig(
    hidden_dim=512, intermediate_dim=1792, num_layers=6, num_heads=8, num_kv_heads=8, max_seq_len=4096
)
llama_600m = LlamaConfig(
    hidden_dim=1024, intermediate_dim=3584, num_layers=24, num_heads=16, num_kv_heads=8, max_seq_len=4096
)
llama_1_4b = LlamaConfig(
    hidden_dim=2048, intermediate_dim=7168, num_layers=16, num_heads=16, num_kv_heads=8, max_seq_len=4096
)

DOCUMENTED_PARAMETER_COUNTS: dict[str, tuple[int, int]] = {
    "llama_nano": (8_241_312, 32_928),
    "llama_30m": (33_784_960, 951_424),
    "llama_150m": (154_147_328, 22_813_184),
    "llama_600m": (602_457_088, 339_788_800),
    "llama_1_4b": (1_431_373_824, 906_037_248),
}
"""name -> (parameters at REFERENCE_VOCAB_SIZE, parameters without embeddings), as in the table above."""
