"""Data curation on zephyr: extraction, language ID, quality rules, exact and fuzzy dedup, decontamination, mixing.

The step bodies live here; `marin.experiment.curation` declares them as lazy, cached steps. See
docs/curation.md for each step's rules, thresholds and the stats.json format.
"""

from marin.curation.rules import C4, RULES, FineWeb, GopherQuality, GopherRepetition, apply_rules, make_rules

__all__ = ["C4", "RULES", "FineWeb", "GopherQuality", "GopherRepetition", "apply_rules", "make_rules"]
