"""Evaluation: perplexity and bits-per-byte suites, the lm-eval-harness bridge, samples, sweep reports.

Everything here runs inside a step (see `marin.experiment.evaluate`) on a model exported by a train
step as a Hugging Face checkpoint. The harness bridge needs the `[eval]` extra.
"""
