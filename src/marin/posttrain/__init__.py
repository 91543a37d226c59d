"""Post-training: supervised fine-tuning on chat data, DPO on preference pairs, LoRA adapters for both.

It is the trainer with other losses: an SFT or DPO run is a train step whose batches and loss differ
(`sft.py`, `dpo.py`), with the same recipes, checkpoints, resume and exports. The chat format and
templates it reads are in `marin.data.chat` and `marin.data.chat_template`, below both this package
and evaluation, which prompts models in the same format. See docs/post_training.md.
"""
