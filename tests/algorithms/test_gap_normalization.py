"""The normalised gap divides by one thing for every algorithm: the RMS of the client's raw gradient.

Two clients on f(θ) = ½‖θ‖² (the quadratic trainer: the gradient at θ is θ), θ₀ = [3, −4, 0, 0], so
RMS(θ₀) = ‖θ₀‖₂/√4 = 5/2 = 2.5; η = 0.1, instructions first in, first out. Client 0's update is applied
first on the model both clients computed on (gap 0); client 1's is one update late (lag 1), and its
gap is how far client 0's update moved the global model. Every expected number is worked out by hand
in the comments, with the figure the old normaliser (the vector the master applied) gave beside it.
"""
import pytest
import torch

from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.base import ModelState
from edgesync.algorithms.dana import DanaSlimClient, DanaSlimConfig
from edgesync.algorithms.dgs import DGSClient, DGSConfig, DGSServer
from edgesync.algorithms.easgd import EASGDClient, EASGDConfig, EASGDServer
from edgesync.algorithms.machinery.gradient_client import GradientClient
from edgesync.algorithms.momentum_asgd import NAGASGDConfig, NAGASGDServer
from edgesync.algorithms.shat import SHATClient, SHATConfig, SHATServer
from edgesync.algorithms.machinery.staleness import GRAD_RMS, raw_gradient_rms, staleness_fields
from fake_quadratic import QuadraticTrainer, run_fifo

THETA0 = [3.0, -4.0, 0.0, 0.0]  # RMS 2.5


def _run(server_cls, client_cls, config, updates: int):
    initial = ModelState(torch.tensor(THETA0), torch.zeros(0))
    server = server_cls(config, initial, [0, 1])
    clients = {c: client_cls(config, QuadraticTrainer()) for c in (0, 1)}
    run_fifo(server, clients, updates=updates)
    return server.update_log


def _staleness(rows):
    """(lag, gap, normalised gap) per applied update, as float32 arithmetic gives them: to 1e-6."""
    return [(r["lag"], r["gap"], r["gap_normalized"]) for r in rows]


def approx(*rows):
    return [(lag, pytest.approx(gap, abs=1e-6), pytest.approx(normalized, abs=1e-6))
            for lag, gap, normalized in rows]


def test_nag_asgd_and_dana_slim_divide_by_the_same_raw_gradient():
    # Both clients compute g = θ₀ (RMS 2.5) for the first two updates; client 0 then computes at θ₁.
    # NAG-ASGD (master momentum, u = η·v):
    #   1. client 0: gap 0.  u = 0.1·θ₀;  θ₁ = 0.9·θ₀
    #   2. client 1 (lag 1): gap = RMS(θ₁ − θ₀) = 0.1·2.5 = 0.25;  ÷ RMS(θ₀) = 0.1.
    #      u = 0.9·0.1·θ₀ + 0.1·θ₀ = 0.19·θ₀;  θ₂ = 0.71·θ₀
    #   3. client 0 (sent θ₁, lag 1): g = 0.9·θ₀ (RMS 2.25); gap = RMS(θ₂ − θ₁) = 0.19·2.5 = 0.475;
    #      ÷ 2.25 = 0.211111
    nag = _run(NAGASGDServer, GradientClient, NAGASGDConfig(lr=0.1, momentum=0.9), updates=3)
    assert _staleness(nag) == approx((0, 0.0, 0.0), (1, 0.25, 0.1), (1, 0.475, 0.211111))
    # DANA-Slim (client momentum, sends γ·v + g; the master is ASGD):
    #   1. client 0: v = θ₀, sends 1.9·θ₀: Θ₁ = Θ₀ − 0.19·θ₀ = 0.81·θ₀
    #   2. client 1 (lag 1): gap = 0.19·2.5 = 0.475; ÷ RMS(g) = 2.5 → 0.19 (÷ RMS(1.9·θ₀) = 4.75 gave 0.1,
    #      the same as NAG-ASGD's although its step was 1.9 times larger). Θ₂ = 0.62·θ₀
    #   3. client 0 (sent Θ₁): g = 0.81·θ₀ (RMS 2.025); v = 0.9·θ₀ + 0.81·θ₀ = 1.71·θ₀; it sends
    #      0.9·1.71·θ₀ + 0.81·θ₀ = 2.349·θ₀. gap = RMS(Θ₂ − Θ₁) = 0.475; ÷ 2.025 = 0.234568 (÷ RMS of
    #      the step sent, 5.8725, gave 0.080885)
    slim = _run(AsyncServer, DanaSlimClient, DanaSlimConfig(lr=0.1, momentum=0.9), updates=3)
    assert _staleness(slim) == approx((0, 0.0, 0.0), (1, 0.475, 0.19), (1, 0.475, 0.234568))


def test_easgd_divides_by_the_mean_rms_of_its_local_steps_raw_gradients():
    # α = 0.5, τ = 2 local steps from θ̃₀ = θ₀: gradients θ₀ and 0.9·θ₀ (RMS 2.5 and 2.25, mean 2.375);
    # each client sends θ_i = 0.81·θ₀.
    #   1. client 0: gap 0. δ = 0.5·(0.81 − 1)·θ₀ = −0.095·θ₀;  θ̃₁ = 0.905·θ₀
    #   2. client 1 (lag 1, computed from θ̃₀): gap = RMS(θ̃₁ − θ̃₀) = 0.095·2.5 = 0.2375; ÷ 2.375 = 0.1
    #      (÷ RMS of its δ = 0.5·(0.81 − 0.905)·θ₀, 0.11875, gave 2.0)
    rows = _run(EASGDServer, EASGDClient, EASGDConfig(lr=0.1, local_steps=2, moving_rate=0.5), updates=2)
    assert _staleness(rows) == approx((0, 0.0, 0.0), (1, 0.2375, 0.1))


def test_dgs_divides_by_the_raw_gradient_not_its_sparse_update():
    # Rate 0.25 of 4 entries: top-1. Each client: g = θ₀, u = η·g = [0.3, −0.4, 0, 0], sends [0, −0.4, 0, 0].
    #   1. client 0: gap 0. M = [0, 0.4, 0, 0]
    #   2. client 1 (lag 1, on θ₀ + v₁ = θ₀): gap = RMS(M) = 0.4/2 = 0.2; ÷ RMS(g) = 2.5 → 0.08
    #      (÷ RMS of the update sent, 0.2, gave 1.0)
    rows = _run(DGSServer, DGSClient, DGSConfig(lr=0.1, momentum=0.9, rate=0.25), updates=2)
    assert _staleness(rows) == approx((0, 0.0, 0.0), (1, 0.2, 0.08))


def test_shat_with_momentum_divides_by_the_raw_gradient_not_its_velocity():
    # Two clients: α = 0 (c_i ≤ n − 1), so no mixing; each keeps v and sends it.
    #   1. client 0: g = θ₀, v = θ₀, θ_0 ← 0.9·θ₀; θ̃₁ = 0.9·θ₀. gap: θ̃₀ vs θ₀: 0
    #   2. client 1: g = θ₀ (its mirror θ₀), gap = RMS(θ̃₁ − θ₀) = 0.25; ÷ 2.5 = 0.1. θ̃₂ = 0.8·θ₀
    #   3. client 0 at its own θ_0 = 0.9·θ₀: g = 0.9·θ₀ (RMS 2.25), v = 0.9·θ₀ + 0.9·θ₀ = 1.8·θ₀ (sent);
    #      gap = RMS(θ̃₂ − 0.9·θ₀) = 0.25; ÷ 2.25 = 0.111111 (÷ RMS(v) = 4.5 gave 0.055556)
    rows = _run(SHATServer, SHATClient, SHATConfig(lr=0.1, momentum=0.9), updates=3)
    assert _staleness(rows) == approx((0, 0.0, 0.0), (1, 0.25, 0.1), (1, 0.25, 0.111111))


def test_the_normaliser_is_the_reported_rms_else_the_raw_gradient_sent():
    grad = torch.tensor(THETA0)
    assert raw_gradient_rms({}, {"grad": grad}) == 2.5                    # a raw gradient, as sent
    assert raw_gradient_rms({GRAD_RMS: 0.5}, {"grad": 3 * grad}) == 0.5   # what the client reported
    assert raw_gradient_rms({}, {"params": grad}) is None                 # neither: no normaliser
    assert raw_gradient_rms({GRAD_RMS: None}, {"grad": grad}) is None     # a NaN gradient, sent as null
    theta = torch.tensor(THETA0)
    fields = staleness_fields(2, 0.9 * theta, theta, grad_rms=0.5)      # gap 0.1·2.5 = 0.25
    assert fields == {"lag": 2, "gap": pytest.approx(0.25), "gap_normalized": pytest.approx(0.5)}
    assert staleness_fields(2, 0.9 * theta, theta, grad_rms=0.0)["gap_normalized"] is None
    assert staleness_fields(2, 0.9 * theta, theta, grad_rms=None)["gap_normalized"] is None
