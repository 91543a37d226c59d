"""Marina's Scaling pages over a prefix with real scaling fits (the session's `fit_outputs`)."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from marin.ui.app import UiConfig, create_app


@pytest.fixture(scope="module")
def scaling_client(fit_outputs):
    with TestClient(create_app(UiConfig(str(fit_outputs.prefix)))) as c:
        yield c


def _rel(fit_outputs, path) -> str:
    return str(path.relative_to(fit_outputs.prefix))


def test_the_scaling_page_lists_each_fit_with_its_exponent_and_prediction(scaling_client, fit_outputs):
    page = scaling_client.get("/scaling")
    assert page.status_code == 200
    for path in (fit_outputs.train_fit, fit_outputs.eval_fit):
        assert f'href="/scaling/{quote(_rel(fit_outputs, path))}"' in page.text
    fit = json.loads((fit_outputs.train_fit / "fit.json").read_text())
    assert f"{fit['approach2']['a']:.3f}" in page.text and "at C = 1e+22" in page.text
    assert 'href="/scaling"' in scaling_client.get("/").text  # in the navigation bar


def test_a_fit_page_shows_its_plots_and_tables_with_intervals(scaling_client, fit_outputs):
    rel = _rel(fit_outputs, fit_outputs.train_fit)
    page = scaling_client.get(f"/scaling/{quote(rel)}")
    assert page.status_code == 200
    images = re.findall(r'<img src="([^"]+)"', page.text)
    assert images == [
        f"/plot/{quote(rel)}/{name}" for name in ("isoflop.png", "frontier.png", "predicted.png")
    ]
    for image in images:
        served = scaling_client.get(image)
        assert served.status_code == 200 and served.headers["content-type"] == "image/png"
        assert served.content == (fit_outputs.train_fit / image.rsplit("/", 1)[1]).read_bytes()
    fit = json.loads((fit_outputs.train_fit / "fit.json").read_text())
    lo, hi = fit["approach3"]["intervals"]["alpha"]
    assert f"[{lo:.4g}, {hi:.4g}]" in page.text  # the law's parameters with their intervals
    assert "runs/r0-eval" in page.text and page.text.count("<tr>") > 12 + 3  # every run, every budget
    output = scaling_client.get(f"/output/{quote(rel)}").text
    assert f'href="/scaling/{quote(rel)}"' in output


def test_plots_are_served_only_from_fits_and_only_by_their_names(scaling_client, fit_outputs):
    rel = _rel(fit_outputs, fit_outputs.train_fit)
    assert scaling_client.get(f"/plot/{quote(rel)}/fit.json").status_code == 404
    assert scaling_client.get(f"/plot/{quote(rel)}/../isoflop.png").status_code == 404
    eval_rel = _rel(fit_outputs, fit_outputs.eval_fit)  # a fit without plots
    assert scaling_client.get(f"/plot/{quote(eval_rel)}/isoflop.png").status_code == 404
    run_rel = _rel(fit_outputs, next(fit_outputs.prefix.glob("runs/r0-*")))
    assert scaling_client.get(f"/plot/{quote(run_rel)}/isoflop.png").status_code == 404
    assert scaling_client.get(f"/scaling/{quote(run_rel)}").status_code == 404


def test_a_fits_headline_is_its_prediction_with_the_interval_in_status_and_on_the_outputs_page(
    scaling_client, fit_outputs
):
    from marin.execution.explain import list_outputs

    result = json.loads((fit_outputs.train_fit / ".artifact.json").read_text())["result"]
    value, (lo, hi) = result["headline"]["value"], result["headline"]["ci95"]
    shown = f"predicted eval_bpb at C=1e+22 = {value:.4g} (95% CI {lo:.4g}-{hi:.4g}, n=12)"
    shown += f"; warning: {result['headline']['warning']}"  # the extrapolation, beside the number
    rows = {r.path: r for r in list_outputs(str(fit_outputs.prefix))}
    assert rows[str(fit_outputs.train_fit)].headline == shown
    assert shown in scaling_client.get("/", params={"q": "fits/train"}).text
