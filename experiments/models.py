"""Model sizes of every architecture, side by side: `from experiments.models import qwen3_nano`.

`vocab_size` is left to the tokenizer (None): the trainer takes it from the token cache. Parameter
counts are given at the Llama 3 / Marin tokenizer's 128,256 entries, and without embeddings; they are
`ModelConfig.num_parameters` and are checked against the instantiated modules by
tests/marin/training/models/test_sizes.py. The nano sizes are the demo's shape in each family
(2 layers, width 32, logits scaled by `output_multiplier=8` so they learn in 100 steps at lr 6e-4;
see experiments/llama.py). The ~150M and ~1B sizes follow each family's published shapes: Qwen3's
tied embeddings, grouped KV heads and 128-wide heads; OLMo 2 1B's width, depth and MLP.

| name | layers | hidden | heads (kv) | head dim | MLP | tied | params @128,256 vocab | non-embedding |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| `llama_nano` | 2 | 32 | 2 (2) | 16 | 128 | no | 8,241,312 | 32,928 |
| `llama_150m` | 6 | 512 | 8 (8) | 64 | 1792 | no | 154,147,328 | 22,813,184 |
| `llama_1_4b` | 16 | 2048 | 16 (8) | 128 | 7168 | no | 1,431,373,824 | 906,037,248 |
| `qwen3_nano` | 2 | 32 | 2 (2) | 16 | 128 | no | 8,241,376 | 32,992 |
| `qwen3_150m` | 12 | 640 | 10 (5) | 64 | 1792 | yes | 138,134,656 | 56,050,816 |
| `qwen3_1b` | 16 | 2048 | 16 (8) | 128 | 6144 | yes | 1,068,046,336 | 805,378,048 |
| `olmo2_nano` | 2 | 32 | 2 (2) | 16 | 128 | no | 8,241,440 | 33,056 |
| `olmo2_150m` | 6 | 512 | 8 (8) | 64 | 1792 | no | 154,153,472 | 22,819,328 |
| `olmo2_1b` | 16 | 2048 | 16 (16) | 128 | 8192 | no | 1,599,211,520 | 1,073,874,944 |
| `moe_nano` | 2 | 32 | 2 (2) | 16 | 8 × 64, top 2 | no | 8,315,680 | 107,296 |
| `moe_30m` | 4 | 128 | 2 (2) | 64 | 8 × 224, top 2 | no | 35,854,464 | 3,020,928 |
| `moe_1b` | 16 | 1024 | 16 (8) | 64 | 8 × 1536, top 2 | no | 917,169,152 | 654,500,864 |

The mixture-of-experts sizes (`MoEConfig`, OLMoE's layout) each route a token to 2 of 8 experts
per layer, each expert half as wide as the MLP of a dense twin, so a token uses about the twin's
parameters (plus the routers' 8 × hidden per layer and the QK-norms') while the model holds four
times the feed-forward weights: `moe_nano` is `llama_nano`'s twin, `moe_30m` `llama_30m`'s
(benchmarks/moe_throughput.py trains the two against each other), `moe_1b` the MoE of
benchmarks/train_gpu_mfu.py (`MOE_SIZES`). What one token uses (`MoEConfig.active_parameters`):

| name | active params @128,256 vocab | active non-embedding |
| --- | --- | --- |
| `moe_nano` | 8,241,952 | 33,568 |
| `moe_30m` | 33,790,080 | 956,544 |
| `moe_1b` | 464,184,320 | 201,516,032 |
"""

from experiments.llama import REFERENCE_VOCAB_SIZE, llama_1_4b, llama_150m, llama_nano
from marin.training.models import MoEConfig, Olmo2Config, Qwen3Config

NANO_SHAPE = dict(
    hidden_dim=32,
    intermediate_dim=128,
    num_layers=2,
    num_heads=2,
    num_kv_heads=2,
    max_seq_len=2048,
    output_multiplier=8.0,
)
"""`llama_nano`'s shape, which every family's nano size has (see experiments/llama.py for the multiplier)."""

qwen3_nano = Qwen3Config(**NANO_SHAPE)
qwen3_150m = Qwen3Config(
    hidden_dim=640,
    intermediate_dim=1792,
    num_layers=12,
    num_heads=10,
    num_kv_heads=5,
    head_dim=64,
    tie_embeddings=True,
    max_seq_len=4096,
)
qwen3_1b = Qwen3Config(
    hidden_dim=2048,
    intermediate_dim=6144,
    num_layers=16,
    num_heads=16,
    num_kv_heads=8,
    head_dim=128,
    tie_embeddings=True,
    max_seq_len=4096,
)

olmo2_nano = Olmo2Config(**NANO_SHAPE)
olmo2_150m = Olmo2Config(hidden_dim=512, intermediate_dim=1792, num_layers=6, num_heads=8, max_seq_len=4096)
olmo2_1b = Olmo2Config(hidden_dim=2048, intermediate_dim=8192, num_layers=16, num_heads=16, max_seq_len=4096)

moe_nano = MoEConfig(
    hidden_dim=32,
    intermediate_dim=64,
    num_layers=2,
    num_heads=2,
    num_kv_heads=2,
    max_seq_len=2048,
    output_multiplier=8.0,
)
moe_30m = MoEConfig(
    hidden_dim=128, intermediate_dim=224, num_layers=4, num_heads=2, num_kv_heads=2, max_seq_len=4096
)
moe_1b = MoEConfig(
    hidden_dim=1024, intermediate_dim=1536, num_layers=16, num_heads=16, num_kv_heads=8, max_seq_len=4096
)

NANO = {"llama": llama_nano, "qwen3": qwen3_nano, "olmo2": olmo2_nano, "moe": moe_nano}
"""The nano size of each architecture (what the tests train), by architecture name."""

DENSE_SIZES = {
    "llama_150m": llama_150m,
    "llama_1_4b": llama_1_4b,
    "qwen3_150m": qwen3_150m,
    "qwen3_1b": qwen3_1b,
    "olmo2_150m": olmo2_150m,
    "olmo2_1b": olmo2_1b,
}
"""The ~150M and ~1B size of each dense family, by name (what benchmarks/train_gpu_mfu.py runs)."""

MOE_SIZES = {"moe_1b": moe_1b}
"""The mixture-of-experts sizes benchmarks/train_gpu_mfu.py runs beside DENSE_SIZES."""

DOCUMENTED_PARAMETER_COUNTS: dict[str, tuple[int, int]] = {
    "llama_nano": (8_241_312, 32_928),
    "llama_150m": (154_147_328, 22_813_184),
    "llama_1_4b": (1_431_373_824, 906_037_248),
    "qwen3_nano": (8_241_376, 32_992),
    "qwen3_150m": (138_134_656, 56_050_816),
    "qwen3_1b": (1_068_046_336, 805_378_048),
    "olmo2_nano": (8_241_440, 33_056),
    "olmo2_150m": (154_153_472, 22_819_328),
    "olmo2_1b": (1_599_211_520, 1_073_874_944),
    "moe_nano": (8_315_680, 107_296),
    "moe_30m": (35_854_464, 3_020_928),
    "moe_1b": (917_169_152, 654_500_864),
}
"""name -> (parameters at REFERENCE_VOCAB_SIZE, parameters without embeddings), as in the table above."""

ACTIVE_PARAMETER_COUNTS: dict[str, tuple[int, int]] = {
    "moe_nano": (8_241_952, 33_568),
    "moe_30m": (33_790_080, 956_544),
    "moe_1b": (464_184_320, 201_516_032),
}
"""MoE name -> (parameters one token uses at REFERENCE_VOCAB_SIZE, the same without embeddings)."""

__all__ = [
    "ACTIVE_PARAMETER_COUNTS",
    "DENSE_SIZES",
    "DOCUMENTED_PARAMETER_COUNTS",
    "MOE_SIZES",
    "NANO",
    "NANO_SHAPE",
    "REFERENCE_VOCAB_SIZE",
    "llama_1_4b",
    "llama_150m",
    "llama_nano",
    "moe_1b",
    "moe_30m",
    "moe_nano",
    "olmo2_1b",
    "olmo2_150m",
    "olmo2_nano",
    "qwen3_1b",
    "qwen3_150m",
    "qwen3_nano",
]
