"""Suite-wide settings: no test may reach the network, and the tests find the repository's modules."""

import os

# Hugging Face libraries must never download anything during the tests.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
