"""Datasets from outside the package (edgesync/data/datasets.py): a `module:loader` reference with `dataset.args`,
trained on in the simulator, and the refusals."""
from __future__ import annotations

import pytest

from edgesync.config import ScenarioError, load_scenario

from test_outside_algorithms import installed, run, scenario  # noqa: F401 - the fixture is used by name


def test_an_outside_dataset_with_arguments_trains_in_the_simulator(tmp_path):
    data = {**scenario("local_sgd", local_steps=5), "dataset": {"name": "ext_fixture:stripes", "args": {"n": 400}},
            "model": {"name": "ext_fixture:tiny_net"}, "stop": {"time_budget_s": 60, "max_updates": 15}}
    assert load_scenario(data).dataset.id == 'ext_fixture:stripes{"n":400}'
    rows = run(data, tmp_path)
    assert rows[-1]["updates"] == 15 and rows[-1]["test_acc"] > 0.5  # four stripe bands: chance is 0.25


@pytest.mark.parametrize("dataset, says", [
    ({"name": "imagenet"}, "dataset.name: unknown dataset; known names: fashion_mnist"),
    ({"name": "ext_fixture:NOT_A_SPEC"}, "names a dict, not a callable that loads a dataset"),
    ({"name": "cifar10", "args": {"n": 3}}, "cifar10 is built in and takes none"),
])
def test_a_dataset_that_cannot_be_loaded_is_refused_with_the_reason(dataset, says):
    with pytest.raises(ScenarioError) as err:
        load_scenario({**scenario("local_sgd"), "dataset": dataset})
    assert says in str(err.value)
