"""SIGINT and SIGTERM become one exception with the shell's exit code; `deferred` holds them."""

from __future__ import annotations

import os
import pickle
import signal

import pytest

from simharness import interrupts
from simharness.interrupts import Interrupted


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_raises_interrupted_with_its_exit_code(sig, code):
    with pytest.raises(interrupts.Interrupted) as info, interrupts.interruptible():
        os.kill(os.getpid(), sig)
        for _ in range(1000):  # the handler runs between bytecodes, right after the kill
            pass
    assert info.value.signum == sig and info.value.exit_code == code
    assert isinstance(info.value, KeyboardInterrupt)  # code that lets Ctrl-C through lets it by


def test_the_old_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.interruptible():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_deferred_holds_a_signal_until_the_section_ends():
    done = []
    with pytest.raises(interrupts.Interrupted) as info, interrupts.interruptible(), interrupts.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        done.append("teardown finished")
    assert done == ["teardown finished"] and info.value.signum == signal.SIGTERM


def test_a_plain_keyboard_interrupt_is_read_as_sigint():
    exc = interrupts.as_interrupted(KeyboardInterrupt())
    assert exc.name == "SIGINT" and exc.exit_code == 130


def test_a_polled_block_stops_where_it_checks_and_a_second_signal_stops_it_at_once():
    steps = []
    with pytest.raises(interrupts.Interrupted) as got, interrupts.polled():
        for i in range(5):
            interrupts.check()
            steps.append(i)
            if i == 1:
                os.kill(os.getpid(), signal.SIGTERM)  # noted, not raised mid-step
                steps.append("rest of step 1")
    assert steps == [0, 1, "rest of step 1"]
    assert got.value.signum == signal.SIGTERM and got.value.exit_code == 143
    with pytest.raises(interrupts.Interrupted), interrupts.polled():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # the second raises here
        for _ in range(1000):
            pass
        pytest.fail("a second signal must not wait for a check")


def test_a_polled_block_raises_at_its_end_what_no_check_raised_and_restores_the_handlers():
    before = {s: signal.getsignal(s) for s in interrupts.HANDLED}
    with pytest.raises(interrupts.Interrupted), interrupts.polled():
        os.kill(os.getpid(), signal.SIGINT)
    assert {s: signal.getsignal(s) for s in interrupts.HANDLED} == before
    interrupts.check()  # outside a polled block: nothing


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interruption_survives_being_copied_from_its_args(sig):
    # simpy re-raises a process's failure as type(exc)(*exc.args); the copy of a SIGTERM once
    # had the signal's name for a number, and its exit code raised TypeError (exit 3).
    exc = Interrupted(sig, partial="found")
    copy = type(exc)(*exc.args)
    assert copy.signum == sig and copy.exit_code == 128 + sig and copy.name == exc.name
    again = pickle.loads(pickle.dumps(exc))
    assert again.signum == sig and again.partial == "found"


def test_a_signal_stopping_a_simulated_process_is_raised_as_it_is():
    import simpy

    from simharness.engine.clock import _raise_failure

    env = simpy.Environment()
    stop = Interrupted(signal.SIGTERM, partial="so far")

    def proc():
        yield env.timeout(1)
        raise stop

    p = env.process(proc())
    p.defused = True  # nothing waits for it: keep simpy's own step from raising
    env.run()
    assert not p.ok
    with pytest.raises(Interrupted) as got:
        _raise_failure(p)
    assert got.value is stop and got.value.exit_code == 143
