"""replicate(): one configuration with several seeds, declared in one line, evaluated and reported as one."""

from __future__ import annotations

import pickle

import pytest

from marin.execution.errors import StepDefinitionError
from marin.execution.lazy import lower
from marin.experiment.evaluate import Evaluation, evaluate, sweep_report
from marin.experiment.replicate import Replicates, replicate
from tests.marin.experiment.tiny_runs import tiny_data, tiny_model


@pytest.fixture(scope="module")
def data():
    return tiny_data()[1]


def test_replicate_sets_the_seed_and_names_each_run(data):
    models = replicate(tiny_model("checkpoints/nano", data, 5), seeds=(0, 1, 2))
    assert isinstance(models, Replicates) and isinstance(models, tuple) and models.seeds == (0, 1, 2)
    assert [m.name for m in models] == [
        "checkpoints/nano-seed0",
        "checkpoints/nano-seed1",
        "checkpoints/nano-seed2",
    ]
    specs = [lower(m) for m in models]
    assert [s.hash_attrs["seed"] for s in specs] == [0, 1, 2]
    # everything but the seed is the same configuration
    assert {k: v for k, v in specs[0].hash_attrs.items() if k != "seed"} == {
        k: v for k, v in specs[2].hash_attrs.items() if k != "seed"
    }
    assert pickle.loads(pickle.dumps(models)) == models and pickle.loads(pickle.dumps(models)).seeds == (
        0,
        1,
        2,
    )


def test_evaluate_takes_replicates_and_gives_one_evaluation_per_seed(data):
    models = replicate(tiny_model("checkpoints/nano", data, 5), seeds=(3, 7))
    evals = evaluate("eval/nano", model=models, datasets=[data])
    assert isinstance(evals, Replicates) and evals.seeds == (3, 7)
    assert all(isinstance(e, Evaluation) for e in evals)
    assert [e.name for e in evals] == ["eval/nano-seed3", "eval/nano-seed7"]
    assert [lower(e).hash_attrs["model"] for e in evals] == [
        {"step": "checkpoints/nano-seed3"},
        {"step": "checkpoints/nano-seed7"},
    ]
    positional = evaluate("eval/p", models, [data])
    assert [e.name for e in positional] == ["eval/p-seed3", "eval/p-seed7"]
    single = evaluate("eval/one", model=models[0], datasets=[data])
    assert isinstance(single, Evaluation) and pickle.loads(pickle.dumps(single)) == single


def test_a_sweep_report_takes_replicates_as_one_setting(data):
    report = sweep_report(
        "reports/r",
        {
            "lr=3e-3": replicate(tiny_model("checkpoints/a", data, 5), seeds=(0, 1)),
            "lr=1e-2": tiny_model("checkpoints/b", data, 5),
        },
    )
    assert [label for label, _ in report.models] == ["lr=3e-3 seed=0", "lr=3e-3 seed=1", "lr=1e-2"]


@pytest.mark.parametrize(
    ("seeds", "field", "message"),
    [
        ((0,), "seed", "give two or more distinct ints"),
        ((1, 1), "seed", "give two or more distinct ints"),
        ((0, 1), "data_seed", "has no field 'data_seed'"),
    ],
)
def test_replicate_refuses_what_measures_no_seed_noise(data, seeds, field, message):
    with pytest.raises(StepDefinitionError, match=message):
        replicate(tiny_model("checkpoints/nano", data, 5), seeds=seeds, field=field)


def test_marin_run_finds_a_dict_of_replicates(tmp_path):
    from marin.execution.discover import declared_steps, import_file

    path = tmp_path / "sweep.py"
    path.write_text(
        "from tests.marin.experiment.tiny_runs import tiny_data, tiny_model\n"
        "from marin.experiment.replicate import replicate\n"
        "_, data = tiny_data()\n"
        "models = {lr: replicate(tiny_model(f'checkpoints/{lr}', data, 5), seeds=(0, 1)) for lr in ('a', 'b')}\n"
    )
    found = [step.name for var, step in declared_steps(import_file(str(path))) if var == "models"]
    assert found == [
        "checkpoints/a-seed0",
        "checkpoints/a-seed1",
        "checkpoints/b-seed0",
        "checkpoints/b-seed1",
    ]
