"""SIGINT and SIGTERM become one exception with the shell's exit code; `deferred` holds them."""

from __future__ import annotations

import os
import signal

import pytest

from simharness import interrupts


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
