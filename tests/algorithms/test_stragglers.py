"""The straggler mitigations of the round algorithms (algorithms/machinery/stragglers.py), by hand: which
updates a round takes and which it discards (backup workers, close_at, over-selection, deadlines), FedNova's
normalisation of partial work, a client stopping by its deadline, and the keys' errors."""
from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from edgesync.algorithms.esync import ESyncConfig
from edgesync.algorithms.fednova import FedNovaConfig
from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, LocalSGDConfig
from edgesync.algorithms.machinery.base import Instruction, ModelState, Population, Update
from edgesync.algorithms.machinery.stragglers import discarded_extras
from edgesync.algorithms.ssgd import SSGDConfig, SSGDServer


class Clock:
    """The runtime's clock, set by hand."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def grad(values, version=0, steps=1) -> Update:
    return Update({"grad": torch.tensor(values)}, {"version": version, "steps": steps, "samples": 8 * steps})


def delta(values, version=0, steps=1) -> Update:
    return Update({"delta": torch.tensor(values)}, {"version": version, "steps": steps, "samples": 8 * steps,
                                                    "data_size": 1})


def ssgd(clients=4, clock=None, **config) -> tuple[SSGDServer, list]:
    s = SSGDServer(SSGDConfig(lr=0.1, **config), ModelState(torch.ones(2), torch.zeros(0)), list(range(clients)))
    s.now = clock or Clock()
    s.population = Population(seed=0, data_sizes={c: 10 for c in range(clients)})
    return s, s.start()


def to(sends) -> list[int]:
    return sorted(send.client for send in sends)


def test_backup_workers_close_at_the_first_n_and_discard_the_last():
    # 4 clients, b = 1: each round takes the first 3 gradients. θ = [1, 1] − 0.1·mean([1, 0], [0, 1], [1, 1])
    # = [1, 1] − 0.1·[2/3, 2/3]
    s, first = ssgd(backup_workers=1)
    assert to(first) == [0, 1, 2, 3] and s.need == 3
    assert s.on_update(0, grad([1.0, 0.0])) == [] and s.on_update(2, grad([0.0, 1.0])) == []
    sends = s.on_update(1, grad([1.0, 1.0]))
    assert s.updates == 1
    assert torch.allclose(s.params, torch.tensor([1 - 0.2 / 3, 1 - 0.2 / 3]))
    assert to(sends) == [0, 1, 2]  # client 3 still owes round 0's report: not sent a second model
    assert s.need == 3  # online 4 − b, though only 3 are free
    # Client 3's round-0 gradient arrives late: discarded (one update, its one step), the model unchanged; it is
    # free again and joins round 1 at once (every online client takes part)
    params = s.params.clone()
    sends = s.on_update(3, grad([100.0, 100.0], version=0))
    assert torch.equal(s.params, params) and s.discarded == {3: {"updates": 1, "steps": 1}}
    assert to(sends) == [3] and sends[0].instruction.meta["version"] == 1
    rows = s.drain_update_log()
    assert {"round": 0, "late": 3, "steps": 1}.items() <= next(r for r in rows if "late" in r).items()
    assert next(r for r in rows if "contributors" in r)["dropped"] == [3]
    # round 1 closes at its first 3 of 4 again: 3 and 0 and 1; client 2's report is then the late one
    for c in (3, 0):
        s.on_update(c, grad([0.0, 0.0], version=1))
    s.on_update(1, grad([0.0, 0.0], version=1))
    assert s.updates == 2 and s.clients == [0, 1, 3]  # round 2: client 2 still owes round 1's report
    assert discarded_extras(s, 3) == {"discarded_updates": 1, "wasted_steps": 1}


def test_close_at_k_takes_the_first_k():
    s, _ = ssgd(clients=3, close_at=2)
    s.on_update(1, grad([2.0, 0.0]))
    s.on_update(0, grad([0.0, 2.0]))
    assert s.updates == 1 and torch.allclose(s.params, torch.tensor([0.9, 0.9]))  # θ − 0.1·[1, 1]


def test_over_selection_draws_130_percent_and_closes_at_k():
    # 10 clients, K = 4, 1.3·K = 5.2: ⌈5.2⌉ = 6 drawn; the round closes at the first 4 reports
    s, first = ssgd(clients=10, clients_per_round=4, over_select=1.3)
    drawn = to(first)
    assert len(drawn) == 6 and s.need == 4
    for c in drawn[:4]:
        s.on_update(c, grad([1.0, 1.0]))
    assert s.updates == 1 and torch.allclose(s.params, torch.tensor([0.9, 0.9]))
    # the two that did not report are busy: round 1 draws 6 of the 8 free clients, neither of them
    again = s.clients
    assert len(again) == 6 and not set(again) & set(drawn[4:])
    # a late report is discarded and its client waits for the next draw (a sampled round keeps its draw)
    assert s.on_update(drawn[4], grad([5.0, 5.0], version=0)) == [] and drawn[4] not in s.clients
    assert s.discarded[drawn[4]] == {"updates": 1, "steps": 1}


def test_a_deadline_closes_the_round_with_what_arrived():
    clock = Clock()
    s, _ = ssgd(clients=2, clock=clock, deadline_s=1.0)
    assert s.due() == 1.0
    clock.t = 0.5
    s.on_update(0, grad([1.0, 1.0]))
    assert s.updates == 0  # client 1 may still make it
    clock.t = 1.0
    sends = s.on_due()
    assert s.updates == 1 and torch.allclose(s.params, torch.tensor([0.9, 0.9]))  # client 0's alone
    assert to(sends) == [0] and s.due() == 2.0  # round 1's deadline: a second from its start
    clock.t = 1.7
    s.on_update(1, grad([9.0, 9.0], version=0))  # late: discarded
    assert s.discarded == {1: {"updates": 1, "steps": 1}} and 1 in s.clients  # and it joins round 1


def test_a_deadline_with_nothing_in_closes_at_the_first_report():
    clock = Clock()
    s, _ = ssgd(clients=2, clock=clock, deadline_s=1.0)
    clock.t = 1.0
    assert s.on_due() == [] and s.updates == 0 and s.due() == math.inf
    clock.t = 1.3
    s.on_update(1, grad([1.0, 1.0]))
    assert s.updates == 1 and s.discarded == {}


def test_a_deadline_relative_to_the_median_client():
    # f = 1.5. Round 0: nobody timed, so its own median sets it: the second of three reports arrives at 2 s, the
    # deadline is 1.5 × 2 = 3 s; client 2 (10 s) misses it. Round 1 starts at 3 s with clients 0 and 1, timed at
    # 1 and 2 s: 1.5 × median(1, 2) = 2.25 s after its start.
    clock = Clock()
    s, _ = ssgd(clients=3, clock=clock, deadline_median=1.5)
    assert s.due() == math.inf
    for c, t in ((0, 1.0), (1, 2.0)):
        clock.t = t
        s.on_update(c, grad([0.0, 0.0]))
    assert s.due() == 3.0 and s.updates == 0
    clock.t = 3.0
    sends = s.on_due()
    assert s.updates == 1 and to(sends) == [0, 1] and s.last_round_s == {0: 1.0, 1: 2.0}
    assert s.due() == 3.0 + 2.25
    clock.t = 10.0
    s.on_update(2, grad([9.0, 9.0], version=0))  # late: discarded, and now timed
    assert s.discarded == {2: {"updates": 1, "steps": 1}} and s.last_round_s[2] == 10.0


def test_partial_work_drops_in_a_round_whose_deadline_is_set_from_its_reports():
    # nobody timed: no budget can be told, so the first round closes at its own median's deadline and drops the
    # rest; from the next round on the participants are told it
    clock = Clock()
    s = DeltaServer(LocalSGDConfig(deadline_median=2.0, partial_work="accept"),
                    ModelState(torch.zeros(2), torch.zeros(0)), [0, 1, 2])
    s.now, s.population = clock, Population(0, {0: 1, 1: 1, 2: 1})
    assert all("time_budget_s" not in send.instruction.meta for send in s.start())
    for c, t in ((0, 1.0), (1, 1.0)):
        clock.t = t
        s.on_update(c, delta([1.0, 1.0]))
    assert s.due() == 2.0
    clock.t = 2.0
    sends = s.on_due()
    assert s.updates == 1 and [send.instruction.meta["time_budget_s"] for send in sends] == [2.0, 2.0]
    assert s.due() == math.inf  # told: the round waits for what each did by then


def local_sgd(partial_work, **config) -> DeltaServer:
    s = DeltaServer(LocalSGDConfig(weighted=False, deadline_s=2.0, partial_work=partial_work, **config),
                    ModelState(torch.zeros(2), torch.zeros(0)), [0, 1])
    s.now, s.population = Clock(), Population(0, {0: 1, 1: 1})
    return s


def test_partial_work_is_normalised_as_fednova_or_accepted_as_fedprox():
    # Δ_A = [2, 0] in τ = 2 steps, Δ_B = [0, 3] in τ = 1. Normalised: d = [1, 0] and [0, 3], their mean
    # [0.5, 1.5], τ_eff = 1.5: θ = 1.5·[0.5, 1.5] = [0.75, 2.25]. Accepted: θ = mean(Δ) = [1, 1.5].
    for partial_work, expected in (("normalise", [0.75, 2.25]), ("accept", [1.0, 1.5])):
        s = local_sgd(partial_work)
        sends = s.start()
        assert [send.instruction.meta["time_budget_s"] for send in sends] == [2.0, 2.0]
        assert s.due() == math.inf  # the clients stop by the deadline; the round waits for both
        s.on_update(0, delta([2.0, 0.0], steps=2))
        s.on_update(1, delta([0.0, 3.0], steps=1))
        assert torch.allclose(s.params, torch.tensor(expected)), partial_work


class StepClock:
    """A client's runtime clock that a local step moves by `step_s`."""

    def __init__(self, step_s: float):
        self.t, self.step_s = 0.0, step_s

    def now(self) -> float:
        return self.t


def test_a_client_stops_its_local_steps_by_the_deadline(tiny_trainer):
    # steps of 0.3 s, 1 s left: it runs one step to time itself (0.3), then steps while the next would end by
    # 1 s (0.6, 0.9); a fourth would end at 1.2: 3 of its 10 steps. Knowing its step is 2 s, it runs none.
    trainer = tiny_trainer()
    client = LocalSGDClient(LocalSGDConfig(local_steps=10, deadline_s=1.0, partial_work="accept"), trainer)
    clock = StepClock(0.3)
    client.ctx = clock
    gradient = trainer.gradient

    def timed(*args, **kwargs):
        clock.t += clock.step_s
        return gradient(*args, **kwargs)

    trainer.gradient = timed
    params = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
    instruction = Instruction({"params": params}, {"version": 0, "time_budget_s": 1.0})
    assert client.on_instruction(instruction).meta["steps"] == 3
    client.step_s, clock.t = 2.0, 0.0
    update = client.on_instruction(instruction)
    assert update.meta["steps"] == 0 and not update.tensors["delta"].any()


@pytest.mark.parametrize("config, message", [
    (lambda: SSGDConfig(backup_workers=1, close_at=2), "not backup_workers and close_at"),
    (lambda: SSGDConfig(over_select=1.3), "over_select needs clients_per_round"),
    (lambda: SSGDConfig(deadline_s=1.0, deadline_median=1.5), "deadline_s or deadline_median"),
    (lambda: LocalSGDConfig(partial_work="accept"), "needs deadline_s or deadline_median"),
    (lambda: SSGDConfig(partial_work="accept", deadline_s=1.0), "partial_work"),  # one gradient: nothing partial
    (lambda: ESyncConfig(backup_workers=1), "ESync balances its rounds itself"),
    (lambda: SSGDConfig(backup_workers=1, aggregation="allreduce"), "need aggregation: ps"),
    (lambda: FedNovaConfig(partial_work="accept", deadline_s=1.0), "partial_work"),
])
def test_the_keys_are_checked(config, message):
    with pytest.raises(ValidationError, match=message):
        config()


def test_no_mitigation_no_extras():
    s, _ = ssgd(clients=2)
    assert discarded_extras(s, 0) == {}


def test_the_report_names_the_same_keys():
    from edgesync.algorithms.machinery.stragglers import STRAGGLER_KEYS
    from edgesync.metrics.report_setup import MITIGATION_KEYS
    assert MITIGATION_KEYS == (*STRAGGLER_KEYS, "partial_work")
