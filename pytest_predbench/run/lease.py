"""Leases: how a worker keeps the reservations it holds in a shared store, and stops when it can't.

Another host cannot tell whether this process still runs (pid and boot id mean nothing across
machines), so it judges a reservation by its lease alone: `lease_until`, on the database's clock.
A thread of this process renews the leases of the reservations it holds every `renew` seconds.
When that fails for so long that a lease could expire before the next try, or a renewal finds a
reservation gone (another host reaped it as lost), this process must no longer act on it: the
session running under it is stopped at once (fencing) by raising LeaseLost in the main thread,
before the lease expires, so that no host ever reaps a session that still runs. Its settle, if
it ever tries one, is refused by the store once the reservation was reaped.

Deadlines are kept on this host's monotonic clock, counted from before the request that set the
lease was sent: the database set `lease_until` later than that, so the worker always gives up
first, whatever the two clocks say.

In a run directory there are no leases (owners are judged by pid and boot id on the one host),
and nothing here runs.
"""

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pytest_predbench.state.store import Store, StoreError

FENCE_SIGNAL = signal.SIGUSR1
"""Sent by the lease thread to this process's main thread, to stop the session there."""


class LeaseLost(BaseException):
    """This process may no longer act on its reservation: its session stops here. A BaseException,
    so that no `except Exception` on the way (the runner's, the agent's) takes it for the session's
    own outcome."""


def fence_margin(lease_seconds: float) -> float:
    """How long before a lease could expire the worker gives up on it."""
    return min(2.0, lease_seconds / 10)


class LeaseKeeper:
    """Renews this process's reservations and fences its session (see the module's docstring)."""

    def __init__(self, store: Store, lease_seconds: float, renew_seconds: float):
        self.store = store
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self._deadlines: dict[str, float] = {}
        """Reservation id -> the monotonic time by which this process must have given it up."""
        self._lost: dict[str, str] = {}
        """Reservation id -> why this process may no longer act on it."""
        self._running: str | None = None
        """The reservation whose session runs in the main thread right now (it can be stopped)."""
        self._guard = threading.RLock()
        """Reentrant: the signal handler takes it in the main thread, which may hold it already."""
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._failure = ""
        """What the last renewal that failed said."""
        self._main = threading.main_thread().ident

    def _deadline(self, sent: float) -> float:
        return sent + self.lease_seconds - fence_margin(self.lease_seconds)

    def start(self) -> None:
        """Start the renewing and the watching thread (from the main thread: it also installs the
        signal handler). Two threads, so that a renewal that hangs on a dead network never keeps
        the watcher from fencing in time."""
        if self._threads:
            return
        signal.signal(FENCE_SIGNAL, self._on_fence_signal)
        for target, name in ((self._renew_loop, "renew"), (self._watch_loop, "watch")):
            thread = threading.Thread(target=target, name=f"predbench-lease-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=1.0)  # a renewal stuck on the network is left to die with the process

    def hold(self, reservation_id: str, since: float) -> None:
        """A reservation this process took; `since`: time.monotonic() before its request was sent."""
        self.start()
        with self._guard:
            self._deadlines[reservation_id] = self._deadline(since)

    def release(self, reservation_id: str) -> None:
        with self._guard:
            self._deadlines.pop(reservation_id, None)
            self._lost.pop(reservation_id, None)

    def lost(self, reservation_id: str) -> str | None:
        """Why this process may no longer act on the reservation, or None while it may."""
        with self._guard:
            return self._lost.get(reservation_id)

    @contextmanager
    def fenced(self, reservation_id: str) -> Iterator[None]:
        """Run a session under the reservation: LeaseLost is raised in it once the lease is lost."""
        with self._guard:
            why = self._lost.get(reservation_id)
            if why is None:
                self._running = reservation_id
        if why is not None:
            raise LeaseLost(why)
        try:
            yield
        finally:
            with self._guard:
                self._running = None

    # -- the renewing thread -----------------------------------------------------------------

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.renew_seconds):
            with self._guard:
                held = [r for r in self._deadlines if r not in self._lost]
            if not held:
                continue
            sent = time.monotonic()
            try:
                alive = self.store.renew(held)
            except StoreError as exc:
                with self._guard:
                    self._failure = str(exc)
                continue
            with self._guard:
                for reservation_id in held:
                    if reservation_id not in self._deadlines or reservation_id in self._lost:
                        continue  # released meanwhile, or already given up
                    if reservation_id in alive:
                        self._deadlines[reservation_id] = self._deadline(sent)
                    else:
                        self._fence(reservation_id, "its lease expired on the store's clock (reaped as lost, or to be)")

    def _watch_loop(self) -> None:
        tick = min(0.25, fence_margin(self.lease_seconds) / 4)
        while not self._stop.wait(tick):
            now = time.monotonic()
            with self._guard:
                for reservation_id, deadline in list(self._deadlines.items()):
                    if now >= deadline and reservation_id not in self._lost:
                        failure = f": {self._failure}" if self._failure else ""
                        why = f"its lease ({self.lease_seconds:g}s) could not be renewed in time{failure}"
                        self._fence(reservation_id, why)

    def _fence(self, reservation_id: str, why: str) -> None:
        """Give the reservation up (under the guard); stop its session if it runs now."""
        self._lost[reservation_id] = f"fenced: {why}"
        if self._running == reservation_id and self._main is not None:
            signal.pthread_kill(self._main, FENCE_SIGNAL)

    def _on_fence_signal(self, signum: int, frame: object) -> None:
        """In the main thread: raise LeaseLost into the running session, once."""
        with self._guard:
            why = self._lost.get(self._running) if self._running else None
            if why is not None:
                self._running = None
        if why is not None:
            raise LeaseLost(why)
