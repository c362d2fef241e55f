"""Device profiles: parsing, and the statistics of the gamma model (DANA App. B.3).

Expected statistics come from the model's definition, not from runs: a Γ(α, θ) draw has mean αθ and
coefficient of variation 1/√α, and α = 1/V² is chosen so that the CV is V.
"""
import numpy as np
import pytest

from edgesync.emulation.profiles import (
    NAMED, ConstantProfile, FactorSampler, GammaProfile, ProfileError, parse_profile,
)


def _cv(values) -> float:
    values = np.asarray(values)
    return float(values.std(ddof=1) / values.mean())


# -- parse_profile --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, factor", [
    ("x1", 1.0), ("x10", 10.0), ("×2.5", 2.5), ("X100", 100.0), (" x3 ", 3.0), ("x2", 2.0), ("x1.25", 1.25),
])
def test_constant_profiles_from_strings(text, factor):
    assert parse_profile(text) == ConstantProfile(factor=factor)


def test_named_gamma_profiles():
    assert parse_profile("gamma-hetero") == GammaProfile(machines="heterogeneous", mean=1.0, v_task=0.1, v_mach=0.6)
    assert parse_profile("Gamma-Homo") == GammaProfile(machines="homogeneous", mean=1.0, v_task=0.1, v_mach=0.1)


@pytest.mark.parametrize("mapping, expected", [
    ({"kind": "constant", "factor": 4}, ConstantProfile(factor=4.0)),
    ({"factor": 3}, ConstantProfile(factor=3.0)),  # kind defaults to constant
    ({"kind": "gamma"}, GammaProfile()),
    ({"kind": "gamma", "machines": "homogeneous", "mean": 2.0, "v_task": 0.2, "v_mach": 0.05},
     GammaProfile(machines="homogeneous", mean=2.0, v_task=0.2, v_mach=0.05)),
])
def test_profiles_from_mappings(mapping, expected):
    assert parse_profile(mapping) == expected


def test_profile_objects_pass_through():
    p = GammaProfile(mean=3.0)
    assert parse_profile(p) is p


def test_labels():
    assert parse_profile("×2.5").label == "x2.5"
    assert parse_profile("x10").label == "x10"
    assert parse_profile("gamma-hetero").label == "gamma-hetero(μ=1,Vm=0.6)"
    assert parse_profile("gamma-homo").label == "gamma-homo(μ=1,Vm=0.1)"


def test_unknown_name_says_what_is_expected():
    with pytest.raises(ValueError) as info:
        parse_profile("fast")
    text = str(info.value)
    assert "unknown profile 'fast'" in text
    assert "expected xK" in text and "gamma-homo" in text and "gamma-hetero" in text and "mapping" in text


@pytest.mark.parametrize("text", ["x0.5", "x0"])
def test_factor_below_one_is_refused(text):
    with pytest.raises(ValueError) as info:
        parse_profile(text)
    assert "factor" in str(info.value) and "greater than or equal to 1" in str(info.value)


@pytest.mark.parametrize("value, shown", [
    ("x0.5", "profile 'x0.5': the factor 0.5 must be greater than or equal to 1"),
    ({"factor": 0.5}, "profile {'factor': 0.5}: factor 0.5 must be greater than or equal to 1"),
    ({"kind": "gamma", "mean": 0.5}, "mean 0.5 must be greater than or equal to 1"),
])
def test_one_rule_for_factors_below_one_in_every_form(value, shown):
    """A constant factor and a gamma mean below 1 are refused alike, on one line that says why."""
    with pytest.raises(ValueError) as info:
        parse_profile(value)
    text = str(info.value)
    assert shown in text and "nothing emulates a faster device" in text and "\n" not in text


def test_a_profile_error_says_the_problem_apart_from_the_value():
    with pytest.raises(ProfileError) as info:
        parse_profile("x0")
    assert info.value.problem.startswith("the factor 0 must be greater than or equal to 1")
    with pytest.raises(ProfileError) as info:
        parse_profile("fast")
    assert info.value.problem.startswith("unknown profile: expected xK with K >= 1")


def test_a_gamma_mean_of_one_is_allowed():
    assert parse_profile({"kind": "gamma", "mean": 1}) == GammaProfile(mean=1.0)


@pytest.mark.parametrize("value, needle", [
    ("x", "unknown profile 'x'"),
    ("x-2", "unknown profile 'x-2'"),
    ("x1e3", "unknown profile 'x1e3'"),
    ({"kind": "weird"}, "unknown profile kind 'weird': expected 'constant', 'gamma' or 'trace'"),
    ({"kind": "gamma", "v_mach": 0}, "v_mach"),
    ({"kind": "gamma", "machines": "mixed"}, "machines"),
    ({"factor": 2, "speed": 1}, "speed"),
    (5, "not int"),
    (None, "not NoneType"),
])
def test_other_bad_profiles(value, needle):
    with pytest.raises(ValueError) as info:
        parse_profile(value)
    assert needle in str(info.value) and "\n" not in str(info.value)  # one line, never pydantic's block


def test_every_named_profile_parses_to_itself():
    for name, profile in NAMED.items():
        assert parse_profile(name) == profile


# -- FactorSampler -------------------------------------------------------------------------------

def test_constant_sampler_yields_k():
    sampler = FactorSampler(ConstantProfile(factor=10), seed=0, rank=3)
    assert [sampler.next() for _ in range(5)] == [10.0] * 5
    assert sampler.mean_factor == 10.0


def test_heterogeneous_steps_of_one_client():
    # Prepare
    sampler = FactorSampler(parse_profile("gamma-hetero"), seed=0, rank=0)
    # Execute
    steps = np.array([sampler.next() for _ in range(20_000)])
    # Assert: each step ~ Γ(α_task, p/α_task): mean p (this machine's), CV V_task = 0.1
    assert _cv(steps) == pytest.approx(0.1, rel=0.10)
    assert steps.mean() == pytest.approx(sampler.mean_factor, rel=0.01)
    assert (steps > 0).all()


@pytest.mark.parametrize("mean", [1.0, 2.0])
def test_heterogeneous_machines_differ(mean):
    # Prepare / Execute: 400 clients of one cluster
    profile = GammaProfile(machines="heterogeneous", mean=mean, v_task=0.1, v_mach=0.6)
    machine_means = np.array([FactorSampler(profile, seed=0, rank=r).mean_factor for r in range(400)])
    # Assert: p ~ Γ(α_mach, μ/α_mach): mean μ, CV V_mach = 0.6
    assert machine_means.mean() == pytest.approx(mean, rel=0.10)
    assert _cv(machine_means) == pytest.approx(0.6, rel=0.10)


def test_homogeneous_machines_share_one_mean():
    # Prepare
    profile = parse_profile("gamma-homo")
    samplers = [FactorSampler(profile, seed=7, rank=r) for r in range(20)]
    # Execute
    steps = np.array([samplers[3].next() for _ in range(20_000)])
    # Assert: one q for the cluster; each step ~ Γ(α_mach, q/α_mach): mean q, CV V_mach = 0.1
    assert len({s.mean_factor for s in samplers}) == 1
    assert _cv(steps) == pytest.approx(0.1, rel=0.10)
    assert steps.mean() == pytest.approx(samplers[0].mean_factor, rel=0.01)


def test_homogeneous_cluster_mean_across_seeds():
    # Prepare / Execute: q ~ Γ(α_task, μ/α_task), one per cluster (seed)
    profile = GammaProfile(machines="homogeneous", mean=1.0, v_task=0.1, v_mach=0.1)
    cluster_means = np.array([FactorSampler(profile, seed=s, rank=0).mean_factor for s in range(400)])
    # Assert: mean μ = 1, CV V_task = 0.1
    assert cluster_means.mean() == pytest.approx(1.0, rel=0.02)
    assert _cv(cluster_means) == pytest.approx(0.1, rel=0.10)


@pytest.mark.parametrize("name", ["gamma-hetero", "gamma-homo"])
def test_samples_are_reproducible_per_seed_and_rank(name):
    # Prepare
    profile = parse_profile(name)

    def draws(seed, rank):
        sampler = FactorSampler(profile, seed=seed, rank=rank)
        return [sampler.next() for _ in range(50)]

    # Execute / Assert
    assert draws(3, 1) == draws(3, 1)
    assert draws(3, 1) != draws(3, 2)
    assert draws(3, 1) != draws(4, 1)
