"""Leases in process, against a real PostgreSQL server: a worker renews the leases it holds; when it
cannot renew in time (the server is gone) or its lease expired (its host was silent), the session
running under the reservation is stopped at once (fencing) — before the lease could expire on the
database's clock, so that no other host ever reaps a session that still runs. The contrast: with the
server there, a session longer than the lease runs to its end.
"""

import time

import psycopg
import pytest

from pytest_predbench.run.lease import LeaseKeeper, LeaseLost
from tests.support.postgres import PgServer
from tests.test_books import planned
from tests.test_pgstore import new_run


def reserve(state, keeper: LeaseKeeper, key: str):
    sent = time.monotonic()
    reservation = state.bookkeeper("gw0").reserve(planned(state, key))
    keeper.hold(reservation.id, since=sent)
    return reservation, sent


def test_a_session_longer_than_its_lease_runs_to_its_end_while_the_lease_is_renewed(pg_server, tmp_path):
    state = new_run(pg_server.url, tmp_path, lease=2.0)
    keeper = LeaseKeeper(state.store(), lease_seconds=2.0, renew_seconds=0.4)
    try:
        reservation, _ = reserve(state, keeper, "m/a-s01")
        first = state.store().snapshot().ledger.reservations[0].lease_until
        with keeper.fenced(reservation.id):
            time.sleep(3.0)  # longer than the lease: only renewals keep it
        [held] = state.store().snapshot().ledger.reservations
        assert held.lease_until > first and keeper.lost(reservation.id) is None
        assert state.bookkeeper("other").reap() == []
    finally:
        keeper.stop()


def test_a_worker_that_cannot_renew_stops_its_session_before_the_lease_expires(tmp_path):
    lease = 6.0
    with PgServer() as server:
        state = new_run(server.url, tmp_path, lease=lease)
        keeper = LeaseKeeper(state.store(), lease_seconds=lease, renew_seconds=0.5)
        try:
            reservation, sent = reserve(state, keeper, "m/a-s01")
            server.kill()
            with pytest.raises(LeaseLost, match="could not be renewed in time: .*did not answer"):
                with keeper.fenced(reservation.id):
                    time.sleep(60)  # a session that would have run a minute
            stopped = time.monotonic() - sent
        finally:
            keeper.stop()
    assert stopped < lease, f"the session was stopped {stopped:.2f}s after its reservation: after its lease"
    assert keeper.lost(reservation.id).startswith("fenced:")


def test_a_worker_whose_lease_expired_stops_its_session_and_cannot_settle(pg_server, tmp_path):
    state = new_run(pg_server.url, tmp_path, lease=30.0)
    keeper = LeaseKeeper(state.store(), lease_seconds=30.0, renew_seconds=0.3)
    try:
        reservation, _ = reserve(state, keeper, "m/a-s01")
        with psycopg.connect(pg_server.url, autocommit=True) as conn:  # its host fell silent past the lease
            conn.execute("UPDATE predbench.reservations SET lease_until = now() WHERE id = %s", (reservation.id,))
        with pytest.raises(LeaseLost, match="its lease expired"):
            with keeper.fenced(reservation.id):
                time.sleep(60)
        with pytest.raises(LeaseLost):  # nor does another session start under it
            with keeper.fenced(reservation.id):
                pass
    finally:
        keeper.stop()
    [charge] = state.bookkeeper("other").reap()
    assert charge.reservation == reservation.id and charge.kind.value == "lost"
