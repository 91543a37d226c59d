"""The UI tests share one prefix, made once per session by running a real experiment."""

from __future__ import annotations

import pytest

from tests.marin.ui.prefix import build_pipeline, build_token_cache, run_experiment, write_experiment


@pytest.fixture(scope="session")
def ui_prefix(tmp_path_factory):
    """(prefix, experiment file): two versions of `train`, a failed step, a hostile one, a token cache."""
    folder = tmp_path_factory.mktemp("ui")
    prefix = folder / "outputs"
    experiment = write_experiment(folder)
    run_experiment(experiment, prefix, "0.005")
    run_experiment(experiment, prefix, "0.01")
    build_token_cache(folder, prefix)
    (prefix / "outside-link").symlink_to("/etc")  # a symlink out of the prefix, which the UI must not follow
    return prefix, experiment


@pytest.fixture(scope="session")
def pipeline(tmp_path_factory):
    """(folder, prefix) after the real steps ran: tokenize -> train x2 -> evaluate, and a sweep report."""
    folder = tmp_path_factory.mktemp("pipeline")
    prefix = folder / "outputs"
    build_pipeline(folder, prefix)
    return folder, prefix
