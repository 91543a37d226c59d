"""Fixtures shared by the tests of several marin packages."""

from __future__ import annotations

import pytest

from tests.marin.scaling_laws.fit_outputs import FitOutputs, build_fit_outputs


@pytest.fixture(scope="session")
def fit_outputs(tmp_path_factory) -> FitOutputs:
    """A prefix with two real scaling fits over steps holding a known law's values (see fit_outputs.py)."""
    return build_fit_outputs(tmp_path_factory.mktemp("scaling-fit"))
