"""Suite-wide settings: no test may reach the network, and the tests find the repository's modules."""

import os

# Hugging Face libraries must never download anything during the tests.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Steps run on threads of the test process unless a test picks a cluster: the engine's tests share
# in-process state with their steps (barriers, counters), and a process per step would slow the
# suite. The product default (no MARIN_CLUSTER) is fray's LocalCluster, tested in tests/fray.
os.environ.setdefault("MARIN_CLUSTER", "thread")
