"""Device-profile kinds from outside the package (emulation/profiles.py `outside_kind`): a client profile whose `kind`
is a `module:Class` reference or an entry point of edgesync.profiles runs in the simulator and live like a built-in
kind, travels to other processes as the name the scenario used, and is refused in one line when it cannot be used.

The kind is tests/extensions/fixture_ext's `burst`: every `every`-th step takes `high` times as long, the others ×1."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from edgesync.config import ScenarioError, load_scenario
from edgesync.emulation import profiles
from edgesync.emulation.profiles import FactorSampler, parse_profile
from edgesync.extensions import API_VERSION
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario

from test_outside_algorithms import installed, scenario  # noqa: F401 - the fixture is used by name

REFERENCE = "ext_fixture.profiles:BurstProfile"


@pytest.fixture(autouse=True)
def fresh_kinds(installed, monkeypatch):  # noqa: F811 - the imported fixture, asked for first
    monkeypatch.setattr(profiles, "_OUTSIDE", {})


def with_burst(kind: str, runtime: str = "sim", **keys) -> dict:
    """Two clients, the second a `burst` device: ×`high` on every `every`-th step."""
    return {**scenario("ssgd", batch_size=16), "runtime": runtime,
            "clients": ["x1", {"profile": {"kind": kind, **keys}}]}


def client_rows(out: Path) -> dict[int, dict]:
    return {r["client"]: r for r in read_jsonl(out / "clients.jsonl")}


@pytest.mark.parametrize("kind", [REFERENCE, "burst"], ids=["reference", "entry point"])
def test_an_outside_kind_slows_its_client_in_the_simulator(kind, tmp_path):
    sc = load_scenario(with_burst(kind, high=5, every=2))
    assert sc.clients[1].profile.label == "burst(x5/2)"
    assert sc.resolved()["clients"][1]["profile"] == {"kind": kind, "high": 5.0, "every": 2}  # the name as written
    run_scenario(sc, tmp_path / "run", progress=False)
    fast, burst = client_rows(tmp_path / "run").values()
    assert burst["profile"] == "burst(x5/2)" and burst["steps"] == fast["steps"] >= 3
    # the simulator's steps last their factors: 1, 5, 1, 5, … times the x1 client's
    factors = FactorSampler(sc.clients[1].profile, seed=sc.seed, rank=1)
    expected = sum(factors.next() for _ in range(burst["steps"]))
    assert burst["compute_s"] == pytest.approx(expected * fast["compute_s"] / fast["steps"], rel=1e-6)
    records = json.loads((tmp_path / "run" / "extensions.json").read_text())
    assert [(r["kind"], r["name"], r["distribution"], r["version"]) for r in records] == [
        ("profile", kind, "ext-fixture", "0.3.1")]


@pytest.mark.ray
def test_an_outside_kind_on_ray_workers_gives_the_serial_simulators_rows(tmp_path):
    """Ray workers are fresh processes: they resolve the kind from the pickled profile, as the name written."""
    pytest.importorskip("ray")
    data = with_burst(REFERENCE, high=5, every=2)
    run_scenario(load_scenario(data), tmp_path / "serial", progress=False)
    run_scenario(load_scenario({**data, "sim": {**data["sim"], "backend": "ray"}}), tmp_path / "ray", progress=False)
    keep = ("client", "profile", "steps", "compute_s")
    assert ([{k: r[k] for k in keep} for r in client_rows(tmp_path / "ray").values()]
            == [{k: r[k] for k in keep} for r in client_rows(tmp_path / "serial").values()])


def test_an_outside_kind_paces_a_live_client_process(tmp_path):
    """`edgesync run` on loopback: each client is a process of its own that resolves the kind from its SETUP."""
    sc = load_scenario({**with_burst("burst", runtime="live", high=9, every=2),
                        "stop": {"time_budget_s": 60, "max_updates": 6}})
    run_scenario(sc, tmp_path / "run", progress=False)
    assert read_jsonl(tmp_path / "run" / "metrics.jsonl")[-1]["updates"] == 6
    burst = client_rows(tmp_path / "run")[1]
    assert burst["profile"] == "burst(x9/2)" and burst["steps"] >= 6
    # its throttle held every step to at least its factor × the shared base step: ×1, ×9, ×1, ×9, …
    factors = FactorSampler(sc.clients[1].profile, seed=sc.seed, rank=1)
    least = sum(factors.next() for _ in range(burst["steps"])) * burst["base_step_s"]
    assert burst["compute_s"] >= 0.95 * least, burst  # ×1 throughout would be about a fifth of it


def test_an_outside_kind_travels_as_the_name_the_scenario_used(tmp_path):
    """What a live client or a Flower node gets (the dumped mapping, re-parsed) and what a simulator worker or a
    Ray task gets (the pickled profile), each in a fresh process that has resolved nothing yet."""
    given = [parse_profile({"kind": kind, "high": 3, "every": 2}) for kind in (REFERENCE, "burst")]
    (tmp_path / "dumped.json").write_text(json.dumps([p.model_dump(mode="json") for p in given]))
    (tmp_path / "pickled.pkl").write_bytes(pickle.dumps(given))
    code = ("import json, pickle, sys\n"
            "from edgesync.emulation.profiles import FactorSampler, parse_profile\n"
            "dumped = [parse_profile(d) for d in json.load(open(sys.argv[1]))]\n"
            "pickled = pickle.load(open(sys.argv[2], 'rb'))\n"
            "for p in dumped + pickled:\n"
            "    s = FactorSampler(p, seed=1, rank=0)\n"
            "    print(p.kind, p.label, [s.next() for _ in range(4)])\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "dumped.json"), str(tmp_path / "pickled.pkl")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    expected = [f"{kind} burst(x3/2) [1.0, 3.0, 1.0, 3.0]" for kind in (REFERENCE, "burst")]
    assert done.stdout.splitlines() == expected * 2


@pytest.mark.parametrize("kind, keys, says", [
    ("ext_fixture.profiles:NotAProfile", {}, "names the class NotAProfile, not a DeviceProfile subclass"),
    ("ext_fixture:HALFSTEP", {}, "names an instance of AlgorithmSpec, not a DeviceProfile subclass"),
    ("ext_fixture.profiles:Unversioned", {}, f"declares no edgesync API version (set api_version=\"{API_VERSION}\""),
    ("ext_fixture.profiles:Future", {}, f"written for edgesync API 2.0, this edgesync provides API {API_VERSION}"),
    ("no_such_lab.devices:Phone", {}, "cannot import 'no_such_lab.devices'"),
    ("ext_fixture.profiles:Missing", {}, "ext_fixture.profiles has no attribute 'Missing'"),
    ("burst", {"hihg": 2}, "hihg: unknown key (did you mean 'high'?); kind burst takes high, every"),
    (REFERENCE, {"high": 0.5}, "high 0.5 must be greater than or equal to 1"),
    ("bursty", {}, "unknown profile kind 'bursty': expected 'constant', 'gamma', 'trace' or 'burst', or a"),
])
def test_a_kind_that_cannot_be_used_is_refused_in_one_line(kind, keys, says):
    with pytest.raises(ScenarioError) as err:
        load_scenario(with_burst(kind, **keys))
    assert len(str(err.value).splitlines()) == 1
    assert "clients.1.profile: " in str(err.value) and says in str(err.value), str(err.value)


def test_a_built_in_kind_names_an_unknown_key_and_the_allowed_ones():
    with pytest.raises(ScenarioError, match=r"v_tsk: unknown key \(did you mean 'v_task'\?\); kind gamma takes "
                                            r"machines, mean, v_task, v_mach$"):
        load_scenario(with_burst("gamma", v_tsk=0.2))


def test_edgesync_validate_and_plugins_know_the_kind(tmp_path):
    from typer.testing import CliRunner
    from edgesync.cli.app import app
    (tmp_path / "burst.yaml").write_text(yaml.safe_dump(with_burst("burst", every=0)))
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "burst.yaml")], terminal_width=400)
    assert result.exit_code == 2 and "clients.1.profile" in result.output and "every" in result.output, result.output
    result = CliRunner().invoke(app, ["plugins"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"profile burst = {REFERENCE}  (ext-fixture 0.3.1" in result.output and "): ok" in result.output
