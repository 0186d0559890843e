"""Ctrl-C and SIGTERM during a run: the sessions in flight are settled at what they spent.

A run is stopped by Ctrl-C (SIGINT to the whole foreground process group), by `kill` or a job
scheduler (SIGTERM, to the controller alone or to every process), or by SIGKILL. Only the last
leaves no chance to write anything: then a session's reservation is charged in full as lost when
the run resumes. For the other two, SIGTERM is turned into the KeyboardInterrupt Ctrl-C raises, in
every process of the run (the controller and each xdist worker; a worker whose controller stops is
interrupted by xdist's teardown), and the item in flight is settled at the spend its runner
measured (SessionInterrupted carries it), recorded as infra: not a result, run again on resume.
"""

import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_predbench.run.session import BenchSession
    from pytest_predbench.state.ledger import Reservation

HELD = {signal.SIGINT, signal.SIGTERM}


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def interrupt_on_sigterm() -> object | None:
    """SIGTERM ends the run as Ctrl-C does instead of killing the process outright; returns the
    handler it replaced, for restore_sigterm (None: not replaced, outside the main thread)."""
    try:
        return signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:  # not the main thread: signals cannot be handled here
        return None


def restore_sigterm(previous: object | None) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]


class signals_held:
    """Ctrl-C and SIGTERM held back while the books are written, so that a second Ctrl-C cannot
    leave a record without its settlement: a signal that arrives meanwhile is noted and raised
    again when the block ends. (Python-level, not a signal mask: in a process with other threads,
    as an xdist worker has, a masked signal is delivered through another thread all the same.)"""

    def __enter__(self) -> None:
        self.pending: int | None = None
        self.previous: dict[int, object] = {}
        try:
            for held in HELD:
                self.previous[held] = signal.signal(held, self._note)
        except ValueError:  # not the main thread: nothing to hold here
            self.previous.clear()

    def _note(self, signum: int, frame: object) -> None:
        self.pending = signum

    def __exit__(self, *exc: object) -> None:
        for held, handler in self.previous.items():
            signal.signal(held, handler)  # type: ignore[arg-type]
        if self.pending is not None:
            signal.raise_signal(self.pending)  # to the handler it was meant for


def interrupted_spend(session: "BenchSession | None", reservation: "Reservation") -> tuple[float, str]:
    """What an interrupted item is charged, and the record's reason: the session's measured spend;
    nothing before it started; all of its reservation when its runner could not say."""
    if session is None or not session.started:
        return 0.0, "interrupted (Ctrl-C or SIGTERM) before its session started"
    if session.result is None:
        return reservation.dollars, "interrupted (Ctrl-C or SIGTERM); its spend unknown, all of it charged"
    spent = session.result.accounting.dollars
    return spent, f"interrupted (Ctrl-C or SIGTERM) after spending ${spent:.6f}: not a result"
