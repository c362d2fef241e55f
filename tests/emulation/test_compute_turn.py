"""The compute turn (emulation/compute_turn.py): earliest deadline first, reentrant, heart-beating waiters."""
import threading
import time

import pytest

from edgesync.emulation.compute_turn import ComputeTurn
from edgesync.emulation.throttle import IDLE_EVERY_S

pytestmark = pytest.mark.timing  # elapsed times: one at a time, at normal priority (scripts/test.sh)


def wait_until(condition, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_the_turn_goes_to_the_waiting_slot_whose_step_must_end_first():
    turn, order = ComputeTurn(), []
    turn.acquire()

    def slot(name, deadline):
        with turn.holding(deadline):
            order.append(name)

    now = time.perf_counter()
    threads = [threading.Thread(target=slot, args=(name, None if lead is None else now + lead)) for name, lead in
               (("x10", 10.0), ("x1", 1.0), ("x4", 4.0), ("fifo", None))]
    for i, t in enumerate(threads):
        t.start()
        wait_until(lambda: len(turn._waiting) == i + 1)  # they ask in this order
    turn.release()
    for t in threads:
        t.join(5)
    # no deadline: it asked (about `now`) before any other deadline, so it goes first
    assert order == ["fifo", "x1", "x4", "x10"]
    assert turn.grants == 5 and turn.waited_s > 0


def test_a_slot_waiting_for_the_turn_keeps_heart_beating():
    turn, beats = ComputeTurn(), []
    turn.acquire()
    computed = []

    def slot():
        with turn.holding(idle=lambda: beats.append(time.monotonic())):
            computed.append(len(beats))

    waiter = threading.Thread(target=slot)
    waiter.start()
    time.sleep(3.2 * IDLE_EVERY_S)
    assert len(beats) >= 2  # about every IDLE_EVERY_S while the other slot computes
    turn.release()
    waiter.join(5)
    assert computed and computed[0] >= 2 and turn.grants == 2


def test_the_turn_is_reentrant_for_its_holder_and_refuses_a_stranger():
    turn = ComputeTurn()
    with turn.holding():
        with turn.holding():  # a calibration holding the turn around its measured steps
            assert turn.held()
        assert turn.held()
        failed = []
        stranger = threading.Thread(target=lambda: failed.append(pytest.raises(RuntimeError, turn.release)))
        stranger.start()
        stranger.join(5)
        assert failed and "does not hold it" in str(failed[0].value)
    assert not turn.held() and turn.grants == 1


def test_a_waiter_whose_heartbeat_fails_leaves_the_queue_and_the_next_one_gets_the_turn():
    turn, got = ComputeTurn(), []
    turn.acquire()

    def broken():
        raise ConnectionError("socket closed")

    errors = []
    first = threading.Thread(target=lambda: errors.append(pytest.raises(ConnectionError, turn.acquire, 0.0, broken)))
    first.start()
    wait_until(lambda: len(turn._waiting) == 1)
    second = threading.Thread(target=lambda: (turn.acquire(1.0), got.append("second"), turn.release()))
    second.start()
    first.join(5)
    assert errors and len(turn._waiting) == 1  # only the second waits now
    turn.release()
    second.join(5)
    assert got == ["second"]
