"""The base-step rule (emulation/device_model.py), worked out by hand.

base_pool = max( Σ u/f / cores,  max(u/f) × max(1, n/cores) ) / headroom; the run's base is the largest.
"""
import pytest

from edgesync.emulation.device_model import PoolClient, plan_devices, pool_base_s

MS = 1e-3


def clients(factors, u=8 * MS, host="vm", cores=2, device="cpu", first=0):
    return [PoolClient(first + i, host, device, cores, u, f) for i, f in enumerate(factors)]


def test_the_quick_start_on_two_cores_is_paced_by_all_four_computing_at_once():
    # average: (1 + 1 + 1 + 0.1) × 8 ms / 2 = 12.4 ms; all at once: 8 ms × 4/2 = 16 ms; / 0.8 → 20 ms
    assert pool_base_s(clients([1, 1, 1, 10]), headroom=0.8) == pytest.approx(20 * MS)


def test_many_slow_clients_on_one_core_are_paced_by_the_average():
    # one core, a ×1 and eight ×2: average (1 + 8 × 0.5) × 8 / 1 = 40 ms; at once 8 × 9 = 72 ms → 72 / 0.9
    assert pool_base_s(clients([1] + [2] * 8, cores=1), headroom=0.9) == pytest.approx(80 * MS)
    # eight cores, a ×1 and two ×100: at once 8 × max(1, 3/8) = 8; average (1 + 0.02) × 8 / 8 ≈ 1.02 → 8 / 0.8
    assert pool_base_s(clients([1, 100, 100], cores=8), headroom=0.8) == pytest.approx(10 * MS)


def test_a_lone_client_keeps_headroom_and_a_fast_gamma_draw_raises_the_base():
    assert pool_base_s(clients([1], cores=4), headroom=0.8) == pytest.approx(10 * MS)
    # a client whose mean factor is 0.5 computes 16 ms of work per base: 16 × max(1, 2/4) / 0.8 = 20 ms
    assert pool_base_s(clients([1, 0.5], cores=4), headroom=0.8) == pytest.approx(20 * MS)


def test_the_run_takes_the_slowest_pool_and_each_gpu_is_a_pool_of_its_own():
    lab = (clients([1, 1], host="big", cores=8)                       # 8 × 1 / 0.8 = 10 ms
           + clients([1, 10, 10, 10], host="small", cores=2, first=2)  # 8 × 4/2 / 0.8 = 20 ms
           + clients([1, 1], host="small", device="cuda:0", cores=1, u=2 * MS, first=6))  # 2 × 2 / 0.8 = 5 ms
    plan = plan_devices(lab, "shared", headroom=0.8)
    assert plan.base_s == pytest.approx(20 * MS)
    assert plan.pools == pytest.approx({"big/cpu": 10 * MS, "small/cpu": 20 * MS, "small/cuda:0": 5 * MS})
    assert "small/cpu" in plan.describe() and "20.00 ms" in plan.describe()


def test_fixed_and_undisturbed_modes():
    assert plan_devices(clients([1, 10]), "fixed", base_step_s=0.025).base_s == 0.025
    with pytest.raises(ValueError, match="base_step_ms"):
        plan_devices(clients([1, 10]), "fixed")
    assert plan_devices(clients([1, 10]), "undisturbed").base_s == 0.0  # each keeps its own step


def test_isolation_pins_where_there_is_a_core_per_client_and_caps_otherwise():
    roomy = plan_devices(clients([1, 1, 10], cores=4), "shared")
    assert roomy.core == {0: 0, 1: 1, 2: 2} and roomy.cpu_share == {}
    crowded = plan_devices(clients([1, 1, 1, 10]), "shared", headroom=0.8)  # base 20 ms
    assert crowded.core == {}
    # twice the average need u / (f × base): ×1 2 × 8/20 = 0.8 CPU, ×10 2 × 8/200 = 0.08 CPU
    assert crowded.cpu_share == pytest.approx({0: 0.8, 1: 0.8, 2: 0.8, 3: 0.08})
    assert plan_devices(clients([1, 1, 1, 10]), "shared", isolation="none").cpu_share == {}
    assert plan_devices(clients([1, 1, 10], cores=4), "shared", isolation="cgroup").core == {}
    gpu = plan_devices(clients([1, 1], device="cuda:0", cores=1), "shared")
    assert gpu.core == {} and gpu.cpu_share == {}  # a GPU's clients are paced, not pinned


def test_validate_explains_settings_this_machine_cannot_honour():
    from edgesync.emulation.device_model import local_notes
    assert local_notes(4, 2, "shared", "auto") == []
    undisturbed, affinity = local_notes(4, 2, "undisturbed", "affinity")
    assert "undisturbed with 4 clients on this machine's 2 cores" in undisturbed
    assert "4 clients but this machine has 2 cores" in affinity
    assert local_notes(2, 4, "undisturbed", "affinity") == []
