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
    # twice the need at ×1, u / base, whatever the factor: 2 × 8/20 = 0.8 CPU each; the ×10 client's steps are
    # paced by sleeping, and a quota of a tenth of that would slow its messages tenfold too
    assert crowded.cpu_share == pytest.approx({0: 0.8, 1: 0.8, 2: 0.8, 3: 0.8})
    # a fixed base far above the step: 2 × 8/400 = 0.04 CPU would stall every message; the fair share 2/4 = 0.5
    slow_base = plan_devices(clients([1, 1, 1, 10]), "fixed", base_step_s=0.4)
    assert slow_base.cpu_share == pytest.approx({0: 0.5, 1: 0.5, 2: 0.5, 3: 0.5})
    assert plan_devices(clients([1, 1, 1, 10]), "shared", isolation="none").cpu_share == {}
    assert plan_devices(clients([1, 1, 10], cores=4), "shared", isolation="cgroup").core == {}
    gpu = plan_devices(clients([1, 1], device="cuda:0", cores=1), "shared")
    assert gpu.core == {} and gpu.cpu_share == {}  # a GPU's clients are paced, not pinned


def test_validate_explains_settings_this_machine_cannot_honour():
    from edgesync.emulation.device_model import local_notes
    assert local_notes(4, 2, "shared", "auto") == []
    undisturbed, affinity = local_notes(4, 2, "undisturbed", "affinity")
    assert "undisturbed with 4 clients on this machine's 2 cores" in undisturbed
    assert "4 client processes but this machine has 2 cores" in affinity
    assert local_notes(2, 4, "undisturbed", "affinity") == []
    # 200 clients as slots of 2 processes on 2 cores: each process has a core to be pinned to
    assert local_notes(200, 2, "shared", "affinity", processes=2) == []


def slots(factors, turn, first=0, u=8 * MS, cores=2):
    """The clients of one `edgesync client --slots K` process: one compute turn."""
    return [PoolClient(first + i, "vm", "cpu", cores, u, f, turn) for i, f in enumerate(factors)]


def test_slots_of_one_process_compute_one_at_a_time():
    # two processes of five ×1 slots on 2 cores: average max(10 × 8 / 2, 5 × 8) = 40 ms; at once each process
    # runs its five steps back to back on its own core: 5 × 8 × max(1, 2/2) = 40 ms → / 0.8
    lab = slots([1] * 5, "p0") + slots([1] * 5, "p1", first=5)
    assert pool_base_s(lab, headroom=0.8) == pytest.approx(50 * MS)
    # the same ten clients as ten processes: average 40 ms, at once 8 × 10/2 = 40 ms: the same base
    assert pool_base_s(clients([1] * 10), headroom=0.8) == pytest.approx(50 * MS)
    # one process of ten on a 2-core host: a turn is one core, so the second core does not help
    assert pool_base_s(slots([1] * 10, "p0"), headroom=0.8) == pytest.approx(100 * MS)
    # four processes on two cores: each turn gets half a core when all compute at once
    assert pool_base_s(slots([1] * 2, "a") + slots([1] * 2, "b", 2) + slots([1] * 2, "c", 4) + slots([1] * 2, "d", 6),
                       headroom=1.0) == pytest.approx(2 * 8 * MS * 2)


def test_the_earliest_deadline_first_turn_lets_a_fast_slot_go_before_slow_ones():
    # a ×1 slot among 49 ×10 slots: at once, a ×10 slot waits for all 50 steps within its 10 bases (5 u),
    # the ×1 slot for one ×10 step under way and its own (2 u); the average u + 49 × u/10 = 5.9 u sets the
    # base (first come first served would need 50 u)
    assert pool_base_s(slots([1] + [10] * 49, "p0", cores=1), headroom=1.0) == pytest.approx(5.9 * 8 * MS)
    # ×1 and ×4 sharing a turn: the ×1 slot may find the ×4 slot computing: at once max(2 u / 1, 2 u / 4) = 2 u,
    # above the average u + u/4 = 1.25 u
    assert pool_base_s(slots([1, 4], "p0"), headroom=1.0) == pytest.approx(2 * 8 * MS)
    # equal factors: no slower slot to wait for; three ×2 slots need 3 u / 2 = 1.5 u (so does their average)
    assert pool_base_s(slots([2, 2, 2], "p0"), headroom=1.0) == pytest.approx(1.5 * 8 * MS)


def test_a_process_of_slots_is_pinned_or_capped_as_a_whole():
    lab = slots([1, 1, 10], "p0") + slots([1, 10], "p1", first=3)  # 2 processes on 2 cores: one core each
    plan = plan_devices(lab, "shared")
    assert plan.core == {0: 0, 1: 0, 2: 0, 3: 1, 4: 1} and plan.cpu_share == {}
    assert "vm/cpu: 5 clients in 2 processes" in plan.describe()
    crowded = plan_devices(slots([1, 1], "a") + slots([1, 1], "b", 2) + slots([1, 1], "c", 4), "shared",
                           headroom=0.7)  # 3 processes, 2 cores: base max(6 u / 2, 2 u × 3/2) / 0.7 = 3 u / 0.7
    assert crowded.base_s == pytest.approx(3 * 8 * MS / 0.7) and crowded.core == {}
    # each process keeps 2 u / (3 u / 0.7) of a core busy: its slots share a quota of twice that, 0.9333
    assert crowded.cpu_share == pytest.approx({r: 0.9333 for r in range(6)})


def test_only_the_clients_that_can_compute_at_once_count():
    # 200 ×1 slots in 2 processes on 2 cores, u = 8 ms. All at once: average max(200 × 8 / 2, 100 × 8) = 800 ms,
    # at once a turn's 100 slots, 800 ms × max(1, 2/2) → 800 / 0.8 = 1 s
    lab = slots([1] * 100, "p0") + slots([1] * 100, "p1", first=100)
    assert pool_base_s(lab, headroom=0.8) == pytest.approx(1.0)
    # FedAvg 20 per round: average 20 × 8 / 2 = 80 ms, a turn 20 × 8 = 160 ms; at once the 20 in one turn,
    # 160 ms × max(1, min(2, 20)/2) = 160 ms → 160 / 0.8 = 200 ms
    assert pool_base_s(lab, headroom=0.8, at_most=20) == pytest.approx(0.2)
    plan = plan_devices(lab, "shared", headroom=0.8, at_most=20)
    assert plan.base_s == pytest.approx(0.2) and "at most 20 computing at once" in plan.describe()
    # one client per process: a ×1 and three ×10 on 2 cores, at most 2 at once: the ×1 and a ×10 are the
    # heaviest (8 and 0.8 ms per base): average 8.8 / 2 = 4.4, at once 8 × max(1, 2/2) = 8 → 8 / 0.8 = 10 ms
    assert pool_base_s(clients([1, 10, 10, 10]), headroom=0.8, at_most=2) == pytest.approx(10 * MS)
    assert pool_base_s(clients([1, 10, 10, 10]), headroom=0.8, at_most=9) == pool_base_s(clients([1, 10, 10, 10]),
                                                                                          headroom=0.8)


def test_how_many_devices_can_be_online_at_once():
    from edgesync.emulation.availability import ExponentialAvailability, TraceAvailability, online_at_most
    churn = ExponentialAvailability(mean_on_s=20, mean_off_s=10)  # online 2/3 of the time
    # 100 such devices: mean 66.7, sd √(100 × 2/3 × 1/3) = 4.71; + 3 sd = 80.8 → 81
    assert online_at_most([churn] * 100) == 81
    # always-on, traced and started-online devices count as online
    traced = TraceAvailability(online=((0, 10),))
    started = ExponentialAvailability(mean_on_s=20, mean_off_s=10, start="online")
    assert online_at_most([None, traced, started] + [churn] * 100) == 3 + 81
    assert online_at_most([churn] * 2) == 2  # never more than there are


def test_a_round_that_samples_computes_with_its_sample_only():
    from edgesync.algorithms.local_sgd import LocalSGDConfig
    from edgesync.runtime.live.phases import computing_at_once
    from edgesync.config import load_scenario
    churn = {"kind": "exponential", "mean_on_s": 20, "mean_off_s": 10}
    sc = load_scenario({"name": "c", "clients": [{"profile": "x1", "availability": churn}] * 100,
                             "algorithms": [{"name": "asgd"}]})
    assert computing_at_once(sc, sc.algorithms[0]) == 81  # every online device computes
    assert computing_at_once(sc, LocalSGDConfig(clients_per_round=20)) == 20
    assert computing_at_once(sc, LocalSGDConfig(client_fraction=0.1)) == 8  # 10% of at most 81 online
