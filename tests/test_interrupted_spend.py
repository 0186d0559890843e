"""What an interrupted item is charged, and the signal handling around it (in process; the runs
themselves are in test_interrupts.py)."""

import os
import signal

import pytest

from pytest_predbench.run.interrupts import (
    interrupt_on_sigterm,
    interrupted_spend,
    restore_sigterm,
    signals_held,
)
from pytest_predbench.session.protocol import Accounting, SessionResult, StopKind, StopReason
from pytest_predbench.state.ledger import Reservation
from pytest_predbench.state.liveness import current_owner

RESERVATION = Reservation(item="m-s01", model="m", dollars=0.5, owner=current_owner())


class Session:
    """What interrupted_spend reads of a BenchSession."""

    def __init__(self, started: bool, dollars: float | None):
        self.started = started
        stop = StopReason(kind=StopKind.INTERRUPTED)
        self.result = None if dollars is None else SessionResult(
            runner="mini-swe", model="m", accounting=Accounting(dollars=dollars), stop=stop
        )  # fmt: skip


def test_an_interrupted_session_is_charged_what_it_measured():
    spent, reason = interrupted_spend(Session(True, 0.0123), RESERVATION)
    assert spent == 0.0123 and reason == "interrupted (Ctrl-C or SIGTERM) after spending $0.012300: not a result"
    assert interrupted_spend(Session(False, None), RESERVATION)[0] == 0.0, "nothing ran, nothing spent"
    assert interrupted_spend(None, RESERVATION)[0] == 0.0
    unknown, why = interrupted_spend(Session(True, None), RESERVATION)
    assert unknown == 0.5 and "spend unknown" in why, "a runner that could not say: all of it"


@pytest.fixture
def ctrl_c_handled():
    """Python's Ctrl-C handler for the test, whatever this process inherited: started as a background
    job of a script, the suite ignores SIGINT, and an ignored signal tests nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_is_a_keyboard_interrupt_held_while_the_books_are_written(signum, ctrl_c_handled):
    previous = interrupt_on_sigterm()
    held = False
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals_held():
                os.kill(os.getpid(), signum)
                held = True  # reached: the signal waits for the block to end
        assert held
        with pytest.raises(KeyboardInterrupt):  # the contrast: outside the block it interrupts at once
            os.kill(os.getpid(), signum)
            raise AssertionError("not reached")
    finally:
        restore_sigterm(previous)
    assert signal.getsignal(signal.SIGTERM) is previous
