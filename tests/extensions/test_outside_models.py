"""Models from outside the package (edgesync/models/__init__.py): a `module:builder` reference with `model.args`,
an installed entry point, and a torchvision.models builder as it is."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from edgesync.config import ScenarioError, load_scenario
from edgesync.models import build_model, model_id, parse_model_id

from test_outside_algorithms import FIXTURE, installed, run, scenario  # noqa: F401 - the fixture is used by name


def test_a_model_id_carries_its_arguments_through_one_string():
    assert model_id("cnn") == "cnn" and parse_model_id("cnn") == ("cnn", {})
    ident = model_id("ext_fixture:tiny_net", {"width": 4, "a": [1, 2]})
    assert ident == 'ext_fixture:tiny_net{"a":[1,2],"width":4}' and parse_model_id(ident)[1] == {"a": [1, 2], "width": 4}


def test_an_outside_model_with_arguments_trains_in_the_simulator(tmp_path):
    data = {**scenario("local_sgd"), "model": {"name": "ext_fixture:tiny_net", "args": {"width": 4}}}
    sc = load_scenario(data)
    model = build_model(sc.model.id, 10, 1)
    assert model[0].out_channels == 4  # the builder got its argument
    rows = run(data, tmp_path)
    assert rows[-1]["updates"] == 3 and 0.0 <= rows[-1]["test_acc"] <= 1.0


def test_a_torchvision_builder_is_a_model_as_it_is():
    model = build_model("torchvision.models:resnet18", num_classes=7, in_channels=3)  # takes no in_channels
    assert model.fc.out_features == 7
    assert model.eval()(torch.zeros(1, 3, 32, 32)).shape == (1, 7)


@pytest.mark.parametrize("model, says", [
    ({"name": "nonet"}, "model.name: unknown model; known names: cnn, mlp, vgg_small, resnet18"),
    ({"name": "ext_fixture:NOT_A_SPEC"}, "names a dict, not a callable that builds a model"),
    ({"name": "cnn", "args": {"width": 3}}, "cnn is built in and takes none"),
    ({"name": "ext_fixture:tiny_net", "args": {"depth": 3}}, "unexpected keyword argument 'depth'"),
])
def test_a_model_that_cannot_be_built_is_refused_with_the_reason(model, says):
    with pytest.raises((ScenarioError, ValueError)) as err:
        sc = load_scenario({**scenario("local_sgd"), "model": model})
        build_model(sc.model.id, 10, 1)
    assert says in str(err.value)
