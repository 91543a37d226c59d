"""Reads a marin harness task's items for lm-eval-harness (`custom_dataset: !function marin_task_data.load`).

The bridge copies this file beside the task YAMLs it renders, and writes the items as JSONL in
`../data/`. Paths in a YAML are relative to this file, so a folder kept with an evaluation's output
runs as it is, wherever it is moved. The items are read into memory (`datasets.Dataset.from_list`):
nothing is written to the Hugging Face datasets cache, however many evaluations run.
"""

import json
import os


def load(data_files, **_metadata):
    """`{split: relative JSONL path}` -> a DatasetDict of those files' records, in file order."""
    import datasets

    here = os.path.dirname(os.path.abspath(__file__))
    splits = {}
    for split, relative in data_files.items():
        with open(os.path.join(here, relative), encoding="utf-8") as f:
            splits[split] = datasets.Dataset.from_list([json.loads(line) for line in f if line.strip()])
    return datasets.DatasetDict(splits)
