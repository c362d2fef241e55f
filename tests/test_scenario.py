"""Scenario files: what loads, and what each mistake is reported as (file, key path, value, need)."""
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgesync import algorithms
from edgesync.cli import app
from edgesync.emulation.profiles import ConstantProfile, GammaProfile
from edgesync.config import Scenario, ScenarioError, load_scenario
from edgesync.config.overrides import apply_override, parse_override

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"

BASE = """\
name: t
clients: [x1, x1, x1]
algorithms:
  - {name: ssgd, lr: 0.1}
  - {name: asgd, lr: 0.05}
"""


@pytest.fixture
def write(tmp_path):
    """write(text) -> path of a scenario file holding `text`."""
    def _write(text: str, name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path
    return _write


def _problems(path, overrides=()) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, list(overrides))
    return str(info.value).splitlines()


def _line(lines: list[str], needle: str) -> str:
    hits = [line for line in lines if needle in line]
    assert hits, f"no line mentions {needle!r}: {lines}"
    return hits[0]


# -- files that load ---------------------------------------------------------------------------------

def test_quickstart_loads():
    # Execute
    sc = load_scenario(QUICKSTART)
    # Assert: what the file says
    assert sc.name == "quickstart"
    assert [c.profile for c in sc.clients] == [ConstantProfile(factor=f) for f in (1, 1, 1, 10)]
    assert [(a.name, a.lr, a.batch_size) for a in sc.algorithms] == [("ssgd", 0.1, 32), ("asgd", 0.05, 32)]
    assert sc.stop.budget_base_steps == 4000 and sc.stop.time_budget_s is None
    assert sc.stop.target_acc == 0.80 and sc.stop.stop_at_target


def test_defaults_fill_what_the_file_leaves_out(write):
    # Execute
    sc = load_scenario(write(BASE.replace("name: t\n", ""), name="my-run.yaml"))
    # Assert
    assert sc.name == "my-run"  # the file's stem when the file has no name
    assert sc.seed == 0 and sc.partition.kind == "iid" and sc.model.name == "cnn"
    assert sc.algorithms[0].batch_size == 32 and sc.algorithms[0].weight_decay == 0.0
    assert sc.algorithms[0].momentum == 0.0


def test_clients_as_a_count_are_undisturbed(write):
    # Execute
    sc = load_scenario(write(BASE.replace("clients: [x1, x1, x1]", "clients: 3")))
    # Assert
    assert sc.profiles == [ConstantProfile(factor=1)] * 3
    assert [c.device for c in sc.clients] == ["cpu"] * 3


def test_clients_as_profile_strings(write):
    # Execute
    sc = load_scenario(write(BASE.replace("clients: [x1, x1, x1]", "clients: [x1, x10, ×2.5]")))
    # Assert
    assert [p.factor for p in sc.profiles] == [1.0, 10.0, 2.5]
    assert [p.label for p in sc.profiles] == ["x1", "x10", "x2.5"]


def test_gamma_profile_mapping(write):
    # Prepare
    text = BASE.replace("clients: [x1, x1, x1]", """clients:
  - profile: {kind: gamma, machines: homogeneous, mean: 2.0, v_mach: 0.1}
  - {profile: gamma-hetero, device: cuda:0}
""")
    # Execute
    sc = load_scenario(write(text))
    # Assert
    assert sc.profiles[0] == GammaProfile(machines="homogeneous", mean=2.0, v_task=0.1, v_mach=0.1)
    assert sc.profiles[1] == GammaProfile(machines="heterogeneous", mean=1.0, v_task=0.1, v_mach=0.6)
    assert sc.clients[1].device == "cuda:0"


def test_same_algorithm_twice_with_labels(write):
    # Prepare
    text = BASE.replace("  - {name: asgd, lr: 0.05}\n",
                        "  - {name: asgd, lr: 0.05, label: asgd-slow}\n  - {name: asgd, lr: 0.2, label: asgd-fast}\n")
    # Execute
    sc = load_scenario(write(text))
    # Assert
    assert [a.key for a in sc.algorithms] == ["ssgd", "asgd-slow", "asgd-fast"]
    assert [a.lr for a in sc.algorithms] == [0.1, 0.05, 0.2]


def test_resolved_round_trips(write):
    # Prepare
    text = BASE.replace("clients: [x1, x1, x1]", """clients:
  - x10
  - profile: {kind: gamma, machines: homogeneous, v_mach: 0.1}
    partition: {kind: dirichlet, alpha: 0.3}
""")
    sc = load_scenario(write(text))
    # Execute
    again = load_scenario(sc.resolved())
    # Assert
    assert again == sc
    assert sc.resolved()["clients"][0]["profile"] == {"kind": "constant", "factor": 10.0}


# -- files that do not ------------------------------------------------------------------------------

def test_unknown_key_names_file_and_key_path(write):
    # Prepare
    path = write(BASE + "stop: {time_budgt_s: 5}\n")
    # Execute
    lines = _problems(path)
    # Assert
    line = _line(lines, "stop.time_budgt_s")
    assert line.startswith(f"{path}: stop.time_budgt_s: ")
    assert "unknown key" in line


def test_bad_value_type_names_key_and_value(write):
    # Execute
    lines = _problems(write(BASE.replace("lr: 0.05", "lr: abc")))
    # Assert
    line = _line(lines, "algorithms.1.lr")
    assert "'abc'" in line and "number" in line
    assert "asgd" not in line.split(":")[1]  # pydantic's union tag is not part of the key path


def test_out_of_range_value(write):
    # Execute
    lines = _problems(write(BASE + "stop: {time_budget_s: -5}\n"))
    # Assert
    line = _line(lines, "stop.time_budget_s")
    assert "greater than 0" in line and "(got -5)" in line


def test_unknown_algorithm_is_named_and_registered_ones_listed(write):
    # Execute
    lines = _problems(write(BASE.replace("{name: asgd, lr: 0.05}", "{name: sgdx}")))
    # Assert
    line = _line(lines, "algorithms.1")
    assert "unknown algorithm 'sgdx'" in line
    for name in algorithms.names():
        assert name in line


def test_algorithm_without_name(write):
    lines = _problems(write(BASE.replace("{name: asgd, lr: 0.05}", "{lr: 0.05}")))
    assert "needs a `name:`" in _line(lines, "algorithms.1")


def test_bad_profile_string_names_value_and_what_is_expected(write):
    # Execute
    lines = _problems(write(BASE.replace("clients: [x1, x1, x1]", "clients: [x1, x1, fast]")))
    # Assert
    line = _line(lines, "clients.2.profile")
    assert "'fast'" in line
    assert "expected xK" in line and "gamma-hetero" in line


def test_profile_factor_below_one(write):
    lines = _problems(write(BASE.replace("clients: [x1, x1, x1]", "clients: [x0.5]")))
    line = _line(lines, "clients.0.profile")
    assert "greater than or equal to 1" in line and "0.5" in line


@pytest.mark.parametrize("count, needle", [("0", "at least one client"), ("[]", "at least 1 item")])
def test_no_clients(write, count, needle):
    lines = _problems(write(BASE.replace("[x1, x1, x1]", count)))
    assert needle in _line(lines, "clients")


def test_duplicate_algorithms_without_labels_are_rejected(write):
    # Execute
    lines = _problems(write(BASE + "  - {name: asgd, lr: 0.2}\n"))
    # Assert
    line = _line(lines, "distinct labels")
    assert "repeated: asgd" in line and "label:" in line


def test_every_problem_is_reported_at_once(write):
    # Execute
    lines = _problems(write(BASE.replace("lr: 0.05", "lr: abc") + "seed: x\nstop: {time_budgt_s: 5}\n"))
    # Assert
    assert len(lines) == 3
    assert {line.split(": ")[1] for line in lines} == {"algorithms.1.lr", "seed", "stop.time_budgt_s"}


@pytest.mark.parametrize("text, needle", [
    ("", "the file is empty"),
    ("# only a comment\n", "the file is empty"),
    ("name: [unclosed\n", "not valid YAML"),
    ("- a\n- b\n", "a scenario is a YAML mapping, not list"),
])
def test_unusable_files(write, text, needle):
    path = write(text)
    lines = _problems(path)
    assert lines[0].startswith(f"{path}: ")
    assert needle in lines[0]


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.yaml"
    lines = _problems(path)
    assert lines == [f"{path}: cannot read the file (No such file or directory)"]


# -- sizes: a count that becomes a list is bounded, and checked before the list exists ---------------

HUGE = 100_000_000  # clients: 100000000 once made `edgesync validate` allocate 23 GB


def _validate_cli(*args: str) -> tuple[int, list[str], float]:
    """(exit code, output lines, seconds) of `edgesync validate ARGS`."""
    start = time.perf_counter()
    result = CliRunner().invoke(app, ["validate", *args], terminal_width=400)
    return result.exit_code, result.output.splitlines(), time.perf_counter() - start


@pytest.mark.parametrize("clients, problem", [
    (f"{HUGE}", f"clients: at most 10,000 clients (got {HUGE})"),
    (f"{{count: {HUGE}, profile: x2}}", f"clients.count: at most 10,000 clients (got {HUGE})"),
])
def test_cli_validate_refuses_a_huge_client_count_at_once(write, clients, problem):
    # Prepare
    path = write(BASE.replace("[x1, x1, x1]", clients))
    # Execute
    code, lines, seconds = _validate_cli(str(path))
    # Assert: one line naming file, key, value and bound; nothing was built first
    assert code == 2
    assert lines == [f"{path}: {problem}"]
    assert seconds < 0.5


def test_an_override_into_a_huge_client_count_is_refused_before_expanding_it(write):
    # `clients.3.profile=x2` turns a count into a list of clients first: that must not happen here.
    path = write(BASE.replace("[x1, x1, x1]", f"{HUGE}"))
    start = time.perf_counter()
    lines = _problems(path, ["clients.3.profile=x2"])
    assert time.perf_counter() - start < 0.5
    assert lines == [f"{path}: clients: at most 10,000 clients (got {HUGE})"]
    # The same count coming from --set is named as such.
    lines = _problems(write(BASE), [f"clients={HUGE}", "clients.3.profile=x2"])
    assert lines == [f"--set: clients: at most 10,000 clients (got {HUGE})"]


def test_the_client_bound_is_inclusive_and_holds_for_every_form():
    base = {"name": "t", "algorithms": [{"name": "ssgd"}]}
    assert len(load_scenario({**base, "clients": 10_000}).clients) == 10_000
    assert len(load_scenario({**base, "clients": {"count": 10_000}}).clients) == 10_000
    for clients, line in [(10_001, "clients: at most 10,000 clients (got 10001)"),
                          (["x1"] * 10_001, "clients: at most 10,000 clients (got a list of 10001)"),
                          ({"count": 10_001}, "clients.count: at most 10,000 clients (got 10001)")]:
        with pytest.raises(ScenarioError) as info:
            load_scenario({**base, "clients": clients})
        assert str(info.value).splitlines() == [f"<scenario>: {line}"]


# -- dataset.root ------------------------------------------------------------------------------------

def test_a_dataset_root_that_does_not_exist_is_an_error(write, tmp_path, monkeypatch):
    # Prepare: no $EDGESYNC_DATA, so the root is where this machine would read the data
    monkeypatch.delenv("EDGESYNC_DATA", raising=False)
    missing = tmp_path / "no-such-folder"
    path = write(BASE + f"dataset: {{root: {missing}}}\n")
    # Execute
    lines = _problems(path)
    # Assert: named, not replaced by another copy of the data found elsewhere
    assert lines == [f"{path}: dataset.root: no such directory on this machine (got '{missing}')"]
    assert load_scenario(path, [f"dataset.root={tmp_path}"]).dataset.root == str(tmp_path)
    assert load_scenario(path, ["dataset.root=null"]).dataset.root is None


def test_a_dataset_root_is_not_checked_where_edgesync_data_wins_over_it(write, tmp_path, monkeypatch):
    # $EDGESYNC_DATA overrides dataset.root on this machine; the root is then for the clients' machines.
    monkeypatch.setenv("EDGESYNC_DATA", str(tmp_path))
    path = write(BASE + f"dataset: {{root: {tmp_path / 'on-the-lab-machines'}}}\n")
    assert load_scenario(path).dataset.root == str(tmp_path / "on-the-lab-machines")


# -- dataset and model --------------------------------------------------------------------------------

def test_cifar10_with_resnet18_validates_without_the_data(write, tmp_path, monkeypatch):
    # validate needs no data: CIFAR-10 is looked for only when a run loads it
    monkeypatch.setenv("EDGESYNC_DATA", str(tmp_path / "no-cifar-here"))
    sc = load_scenario(write(BASE + "dataset: {name: cifar10}\nmodel: {name: resnet18}\n"))
    assert (sc.dataset.name, sc.model.name) == ("cifar10", "resnet18")


def test_the_cnn_on_cifar10_is_an_error_naming_both_keys(write):
    path = write(BASE + "dataset: {name: cifar10}\n")  # model.name defaults to cnn
    (line,) = _problems(path)
    assert line.startswith(f"{path}: ")
    assert "model.name cnn is built for 28×28 images, but dataset.name cifar10 has 32×32" in line
    assert "use model.name resnet18" in line


# -- --set overrides --------------------------------------------------------------------------------

def test_overrides_take_effect(write):
    # Execute
    sc = load_scenario(write(BASE), ["stop.time_budget_s=5", "algorithms.0.lr=0.2",
                                     "clients.1.profile=x100", "clients=2"])
    # Assert
    assert sc.stop.time_budget_s == 5
    assert sc.algorithms[0].lr == 0.2 and sc.algorithms[1].lr == 0.05
    assert sc.profiles == [ConstantProfile(factor=1)] * 2  # the last override replaced the list


def test_override_into_a_client_count(write):
    # Execute: `clients=2` first, then one of the two clients is changed
    sc = load_scenario(write(BASE), ["clients=2", "clients.1.profile=x100", "seed=7", "eval.every_s=0.5"])
    # Assert
    assert [p.factor for p in sc.profiles] == [1.0, 100.0]
    assert sc.seed == 7 and sc.eval.every_s == 0.5


def test_override_of_a_profile_given_as_a_string(write):
    # Prepare: quickstart-style `clients: [x1, x1, x1]`, a client's profile changed from the command line
    path = write(BASE)
    # Execute
    sc = load_scenario(path, ["clients.1.profile=x100", "clients.2.device=cuda:0"])
    # Assert
    assert [p.factor for p in sc.profiles] == [1.0, 100.0, 1.0]
    assert [c.device for c in sc.clients] == ["cpu", "cpu", "cuda:0"]


def test_override_of_a_count_in_the_file(write):
    sc = load_scenario(write(BASE.replace("[x1, x1, x1]", "2")), ["clients.0.profile=x10"])
    assert [p.factor for p in sc.profiles] == [10.0, 1.0]


def test_bad_override_value_names_set(write):
    # Execute
    lines = _problems(write(BASE), ["algorithms.0.lr=abc"])
    # Assert
    line = _line(lines, "algorithms.0.lr")
    assert "--set algorithms.0.lr=abc" in line and "'abc'" in line


@pytest.mark.parametrize("override, needle", [
    ("clients.5.profile=x2", "clients.5: no such list item (the list has 3)"),
    ("name.x=1", "name: is a value, not a section"),
    ("algorithms.0.lr.x=1", "algorithms.0.lr: is a value, not a section"),
    ("clients.0.profile.factor=3", "clients.0.profile: is a value, not a section"),
])
def test_override_to_a_missing_place(write, override, needle):
    lines = _problems(write(BASE), [override])
    assert lines == [f"--set: {needle}"]


@pytest.mark.parametrize("text, needle", [
    ("stop.time_budget_s", "expected KEY=VALUE"),
    ("=5", "empty key"),
    ("stop..x=5", "empty key"),
    ("seed=[1, 2", "is not valid YAML"),
])
def test_parse_override_errors(text, needle):
    with pytest.raises(ScenarioError) as info:
        parse_override(text)
    assert str(info.value).startswith("--set: ")
    assert needle in str(info.value)


@pytest.mark.parametrize("text, path, value", [
    ("algorithms.0.lr=0.1", ["algorithms", 0, "lr"], 0.1),
    ("clients.1.profile=x10", ["clients", 1, "profile"], "x10"),
    ("stop.target_acc=null", ["stop", "target_acc"], None),
    ("clients=[x1, x2]", ["clients"], ["x1", "x2"]),
    ("description=a=b", ["description"], "a=b"),
])
def test_parse_override_values_are_yaml(text, path, value):
    assert parse_override(text) == (path, value)


def test_apply_override_creates_missing_sections():
    data = {"name": "t"}
    apply_override(data, ["stop", "max_updates"], 10)
    assert data == {"name": "t", "stop": {"max_updates": 10}}


def test_apply_override_does_not_index_into_a_scalar():
    with pytest.raises(ScenarioError, match="--set: extra.0: is a value, not a section"):
        apply_override({"extra": [1, 2]}, ["extra", 0, "x"], 5)


def test_scenario_model_rejects_unknown_top_level_key():
    with pytest.raises(ScenarioError, match=r"<scenario>: runtimes: unknown key"):
        load_scenario({"name": "t", "clients": 1, "algorithms": [{"name": "ssgd"}], "runtimes": "x"})
    assert isinstance(load_scenario({"name": "t", "clients": 1, "algorithms": [{"name": "ssgd"}]}), Scenario)


# -- the CLI ----------------------------------------------------------------------------------------

def test_cli_validate_bad_file_exits_2_and_says_why(write):
    # Prepare
    path = write(BASE + "stop: {time_budgt_s: 5}\n")
    # Execute
    result = CliRunner().invoke(app, ["validate", str(path)], terminal_width=400)
    # Assert
    assert result.exit_code == 2
    assert "stop.time_budgt_s" in result.output and "unknown key" in result.output


def test_cli_validate_good_file_exits_0(write):
    # Execute
    result = CliRunner().invoke(app, ["validate", str(write(BASE))], terminal_width=400)
    # Assert
    assert result.exit_code == 0, result.output
    assert "ok" in result.output and "3 clients" in result.output and "ssgd, asgd" in result.output


def test_cli_validate_applies_set(write):
    result = CliRunner().invoke(app, ["validate", str(write(BASE)), "--set", "clients=5"], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert "5 clients" in result.output


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_shipped_scenario_validates_with_its_sweep(path):
    from edgesync.config import variants
    scenario = load_scenario(path)
    assert variants(scenario, str(path))  # every sweep combination is a valid scenario too


def test_a_budget_in_base_steps_is_seconds_at_the_runs_base_step_and_replaces_the_seconds():
    sc = load_scenario(QUICKSTART)
    assert sc.stop.for_base_step(0.0215).time_budget_s == 86.0  # 4,000 steps of 21.5 ms
    assert sc.stop.for_base_step(0.0415).time_budget_s == 166.0  # a machine twice as slow: twice the seconds
    # a budget given on the command line is the one meant, in either unit
    assert load_scenario(QUICKSTART, ["stop.time_budget_s=30"]).stop.for_base_step(0.02).time_budget_s == 30
    assert load_scenario(QUICKSTART, ["stop.time_budget_s=30", "stop.budget_base_steps=100"]).stop.time_budget_s is None
    with pytest.raises(ScenarioError, match=r"time_budget_s \(30\) and budget_base_steps \(4000\) both set the time "
                                            r"budget: keep one"):
        load_scenario({"name": "b", "stop": {"time_budget_s": 30, "budget_base_steps": 4000}})
    with pytest.raises(ScenarioError, match="time_budget_s is null and budget_base_steps is not set"):
        load_scenario({"name": "b", "stop": {"time_budget_s": None}})
