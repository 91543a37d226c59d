"""Mixture-of-experts sizes (`marin.training.models.MoEConfig`), each the twin of a dense size.

Every size has 8 experts per layer and routes each token to 2, with each expert half as wide as the
dense twin's MLP: a token uses the dense model's parameters plus the routers' (8 × hidden per layer)
and the QK-norms', while the model holds four times the feed-forward weights. They export as
OLMoE (`OlmoeForCausalLM`). Counts are at the Llama 3 / Marin tokenizer's 128,256 entries (untied
embeddings) and are checked against the modules by tests/marin/training/models/test_sizes.py.

| name       | twin of     | layers | hidden | heads (kv) | experts  | params @128,256 | active      | active, no emb. |
| ---------- | ----------- | ------ | ------ | ---------- | -------- | --------------- | ----------- | --------------- |
| `moe_nano` | llama_nano  | 2      | 32     | 2 (2)      | 8 × 64   | 8,315,680       | 8,241,952   | 33,568          |
| `moe_30m`  | llama_30m   | 4      | 128    | 2 (2)      | 8 × 224  | 35,854,464      | 33,790,080  | 956,544         |
| `moe_1b`   |             | 16     | 1024   | 16 (8)     | 8 × 1536 | 917,169,152     | 464,184,320 | 201,516,032     |

"experts" is experts per layer × each expert's MLP width; "active" counts what one token uses.
`moe_nano` scales its logits by `output_multiplier=8`, as `llama_nano` does (see experiments/llama.py).
`moe_30m` is what benchmarks/moe_throughput.py trains against `llama_30m`; `moe_1b` is the MoE case of
benchmarks/train_gpu_mfu.py.
"""

from marin.training.models import MoEConfig

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

DOCUMENTED_PARAMETER_COUNTS: dict[str, tuple[int, int]] = {
    "moe_nano": (8_315_680, 107_296),
    "moe_30m": (35_854_464, 3_020_928),
    "moe_1b": (917_169_152, 654_500_864),
}
"""name -> (parameters at the reference vocabulary, parameters without embeddings)."""

ACTIVE_PARAMETER_COUNTS: dict[str, tuple[int, int]] = {
    "moe_nano": (8_241_952, 33_568),
    "moe_30m": (33_790_080, 956_544),
    "moe_1b": (464_184_320, 201_516_032),
}
"""name -> (parameters one token uses, the same without embeddings), as in the table above."""
