"""The budget ledger and the liveness rule behind releasing a reservation.

Reserve-then-settle must never let spend pass a cap, concurrent processes must not lose each
other's updates, and a reservation is released only when its owner is provably gone.
"""

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time

import pytest
from filelock import FileLock
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pytest_predbench.files import CorruptStateError, write_model
from pytest_predbench.state.ledger import (
    Account,
    ChargeKind,
    Ledger,
    LedgerError,
    ledger_transaction,
    peek_ledger,
    read_ledger,
)
from pytest_predbench.state.liveness import Owner, current_owner, owner_gone
from pytest_predbench.state.plan import DOLLAR_EPSILON, Budget

ME = current_owner()
CAPS = Budget(capped=True, total=0.2, per_model=0.1, per_session=0.04)
"""The caps of `ledger()`: a ledger file keeps none, its reader gives the plan's."""
UNCAPPED = Budget(capped=False, total=None, per_model=None, per_session=0.01)


def ledger(total: float | None = 0.2, per_model: float | None = 0.1, session: float = 0.04) -> Ledger:
    caps = Budget(capped=total is not None, total=total, per_model=per_model, per_session=session)
    return Ledger(models=["a", "b"]).bound(caps)


def test_a_session_reserves_its_full_cap_and_settles_the_real_spend():
    book = ledger()
    reservation = book.reserve("a-s01", "a", ME)
    assert reservation is not None and reservation.dollars == 0.04
    assert book.accounts["a"].reserved == 0.04 and book.accounts["a"].remaining == pytest.approx(0.06)
    charge = book.settle(reservation, 0.01, ChargeKind.RESULT)
    account = book.accounts["a"]
    assert (charge.dollars, charge.reserved) == (0.01, 0.04)
    assert (account.spent, account.reserved, account.remaining) == (0.01, 0, pytest.approx(0.09))
    assert book.total.spent == 0.01 and book.total.remaining == pytest.approx(0.19)


def test_no_room_for_a_whole_session_means_no_reservation():
    book = ledger()
    first, second = book.reserve("a-s01", "a", ME), book.reserve("a-s02", "a", ME)
    assert first and second
    assert book.reserve("a-s03", "a", ME) is None, "0.02 left of the model's 0.10 cannot hold a 0.04 session"
    assert book.reserve("b-s01", "b", ME) is not None, "the other model's share is untouched"
    book.settle(first, 0.0, ChargeKind.RESULT)
    assert book.accounts["a"].remaining == pytest.approx(0.06), "settling released the unspent reservation"
    assert book.reserve("a-s04", "a", ME) is None, "but launching stopped for good at the cap"
    assert book.closed == ["a"]


def test_unspent_money_is_released_for_the_next_session():
    book = ledger()
    first = book.reserve("a-s01", "a", ME)
    book.settle(first, 0.01, ChargeKind.RESULT)
    assert [book.reserve(f"a-s0{n}", "a", ME) is not None for n in (2, 3)] == [True, True]
    assert book.accounts["a"].reserved == pytest.approx(0.08) and not book.closed


def test_the_total_cap_binds_even_when_model_caps_would_allow():
    book = ledger(total=0.1, per_model=0.1)
    assert book.reserve("a-s01", "a", ME) and book.reserve("b-s01", "b", ME)
    assert book.grant("b") == pytest.approx(0.02)
    assert book.reserve("a-s02", "a", ME) is None
    assert book.closed == ["a", "b"], "the whole run is out: every model stops launching"


def test_without_caps_every_session_starts_and_spend_is_still_booked():
    book = ledger(total=None, per_model=None)
    for n in range(50):
        reservation = book.reserve(f"a-s{n}", "a", ME)
        assert reservation is not None
        book.settle(reservation, 0.04, ChargeKind.RESULT)
    assert book.total.spent == pytest.approx(2.0) and book.total.remaining is None


def test_an_item_cannot_hold_two_reservations_nor_settle_twice():
    book = ledger()
    reservation = book.reserve("a-s01", "a", ME)
    with pytest.raises(LedgerError, match="already reserved"):
        book.reserve("a-s01", "a", ME)
    book.settle(reservation, 0.01, ChargeKind.RESULT)
    with pytest.raises(LedgerError, match="not open"):
        book.settle(reservation, 0.01, ChargeKind.RESULT)
    assert len(book.charges_for("a-s01")) == 1


def test_infra_and_lost_spend_count_against_the_cap_and_show_apart():
    book = ledger()
    one, two = book.reserve("a-s01", "a", ME), book.reserve("a-s02", "a", ME)
    book.settle(one, 0.03, ChargeKind.INFRA)
    book.settle(two, two.dollars, ChargeKind.LOST)
    account = book.accounts["a"]
    assert account.spent == pytest.approx(0.07) and account.infra == pytest.approx(0.07)
    assert book.reserve("a-s03", "a", ME) is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.floats(0, 1), st.booleans()),
        max_size=60,
    ),
    st.floats(0.01, 0.5),
    st.floats(0.01, 1.0),
)
def test_property_spend_never_passes_a_cap(steps, session, total):
    """Any interleaving of reservations and settlements (each spending up to its reservation)."""
    book = ledger(total=total, per_model=total / 2, session=min(session, total / 2))
    open_, refused = [], set()
    for n, (model, fraction, settle_now) in enumerate(steps):
        reservation = book.reserve(f"{model}-{n}", model, ME)
        if reservation is not None:
            assert model not in refused, "launching stops for good once a model found no room"
            open_.append((reservation, fraction))
        else:
            refused.add(model)
        if settle_now and open_:
            done, spend = open_.pop(0)
            book.settle(done, done.dollars * spend, ChargeKind.RESULT)
        committed = book.total.spent + book.total.reserved
        assert committed <= total + DOLLAR_EPSILON
        for account in book.accounts.values():
            assert account.spent + account.reserved <= account.cap + DOLLAR_EPSILON


def test_the_file_is_rewritten_whole_and_revalidated_on_read(tmp_path):
    path = tmp_path / "ledger.json"
    write_model(path, ledger())
    lock = FileLock(str(tmp_path / ".lock"))
    with ledger_transaction(path, lock, lambda: CAPS) as book:
        book.reserve("a-s01", "a", ME)
    shown = json.loads(path.read_text())
    assert shown["accounts"]["a"] == {
        "cap": 0.1,
        "spent": 0.0,
        "infra": 0.0,
        "reserved": 0.04,
        "remaining": 0.06,
    }
    assert shown["total"]["remaining"] == pytest.approx(0.16)
    assert read_ledger(path, CAPS).reservations[0].item == "a-s01"
    with pytest.raises(RuntimeError), ledger_transaction(path, lock, lambda: CAPS) as book:
        book.reserve("a-s02", "a", ME)
        raise RuntimeError("the step fails after changing the ledger")
    assert len(read_ledger(path, CAPS).reservations) == 1, "a failed step writes nothing"
    shown["reservations"][0]["model"] = "zzz"
    path.write_text(json.dumps(shown))
    with pytest.raises(CorruptStateError, match="not in the plan"):
        read_ledger(path, CAPS)


def _hammer(path: str, lock: str, worker: int, rounds: int) -> None:
    for n in range(rounds):
        with ledger_transaction(path, FileLock(lock), lambda: UNCAPPED) as book:
            reservation = book.reserve(f"a-w{worker}-{n}", "a", current_owner())
        if reservation is not None:
            with ledger_transaction(path, FileLock(lock), lambda: UNCAPPED) as book:
                book.settle(reservation, 0.001, ChargeKind.RESULT)


def test_concurrent_processes_lose_no_update(tmp_path):
    path, lock = tmp_path / "ledger.json", tmp_path / ".lock"
    write_model(path, ledger(total=None, per_model=None, session=0.01))
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_hammer, args=(str(path), str(lock), w, 15)) for w in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    book = read_ledger(path, UNCAPPED)
    assert len(book.charges) == 60 and not book.reservations
    assert book.total.spent == pytest.approx(0.06)


def _mixed_book() -> Ledger:
    """Thirty charges of awkward sizes and every kind, over both models."""
    book = ledger(total=None, per_model=None, session=1.0)
    kinds = [ChargeKind.RESULT, ChargeKind.INFRA, ChargeKind.LOST]
    for n, cost in enumerate([0.1, 0.2, 0.3, 0.07, 1e-9, 0.0333] * 5):
        model = "ab"[n % 2]
        book.settle(book.reserve(f"{model}-s{n % 7:02d}", model, ME), cost, kinds[n % 3])
    book.reserve("a-s99", "a", ME)
    return book


def _plain_accounts(book: Ledger) -> dict[str | None, Account]:
    """The accounts summed over every charge again, as the ledger did before it kept running sums."""
    plain: dict[str | None, Account] = {
        m: Account.of(
            book.model_cap, [c for c in book.charges if c.model == m], [r for r in book.reservations if r.model == m]
        )
        for m in book.models
    }
    plain[None] = Account.of(book.total_cap, book.charges, book.reservations)
    return plain


def test_running_sums_equal_the_sums_over_every_charge_to_the_last_bit():
    book = _mixed_book()
    assert {**book.accounts, None: book.total} == _plain_accounts(book)  # ==, not approx
    assert book.charged("a-s00") == round(sum(c.dollars for c in book.charges_for("a-s00")), 12)
    book.charges = book.charges[:7]  # a list replaced: counted again from the start
    assert {**book.accounts, None: book.total} == _plain_accounts(book)
    lost = book.charges.pop()  # a counted charge gone and another in its place
    book.charges.append(lost.model_copy(update={"dollars": 5.0}))
    assert book.total == _plain_accounts(book)[None] and book.total.spent > 5
    with pytest.raises(ValidationError):
        book.charges[0].dollars = 0.0  # a charge never changes once made


def test_the_file_text_is_the_ledgers_json():
    book = _mixed_book()
    assert json.loads(book.text()) == json.loads(book.model_dump_json())
    assert Ledger.model_validate_json(book.text()).bound(book.caps).model_dump() == book.model_dump()
    assert json.loads(ledger().text()) == json.loads(ledger().model_dump_json())  # no charges at all


def test_a_transaction_takes_its_own_last_write_only_while_the_file_still_holds_it(tmp_path):
    path, lock = tmp_path / "ledger.json", FileLock(str(tmp_path / ".lock"))
    write_model(path, ledger())
    with ledger_transaction(path, lock, lambda: CAPS) as mine:
        mine.reserve("a-s01", "a", ME)
    with ledger_transaction(path, lock, lambda: CAPS) as again:
        assert again is mine, "nobody wrote since: the file is not parsed again"
    assert peek_ledger(path, CAPS) is mine
    other = read_ledger(path, CAPS)  # another process writes after this one
    other.reserve("b-s01", "b", ME)
    write_model(path, other)
    assert {r.item for r in peek_ledger(path, CAPS).reservations} == {"a-s01", "b-s01"}
    with ledger_transaction(path, lock, lambda: CAPS) as book:
        assert book is not mine and {r.item for r in book.reservations} == {"a-s01", "b-s01"}
    with pytest.raises(RuntimeError), ledger_transaction(path, lock, lambda: CAPS) as failed:
        failed.reserve("a-s02", "a", ME)
        raise RuntimeError("the step fails after changing the ledger")
    with ledger_transaction(path, lock, lambda: CAPS) as after:
        assert after is not failed, "the object a failed step changed is forgotten"
        assert "a-s02" not in {r.item for r in after.reservations}


# -- liveness: a reservation is released only when its owner is provably gone ------------------


def test_this_process_is_alive():
    assert owner_gone(ME) is False


def test_a_finished_process_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert owner_gone(ME.model_copy(update={"pid": child.pid})) is True


def test_a_zombie_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while open(f"/proc/{child.pid}/stat").read().split(")")[-1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        assert owner_gone(ME.model_copy(update={"pid": child.pid, "start_ticks": None})) is True
    finally:
        child.wait()


def test_a_recycled_pid_is_gone():
    assert owner_gone(ME.model_copy(update={"start_ticks": ME.start_ticks + 1})) is True


def test_another_boot_means_gone():
    assert owner_gone(ME.model_copy(update={"boot_id": "another-boot"})) is True


@pytest.mark.parametrize(
    "change",
    [
        {"host": socket.gethostname() + "-elsewhere"},
        {"boot_id": None},
        {"start_ticks": None},
    ],
    ids=["another host", "unknown boot", "unknown start time"],
)
def test_undecidable_owners_are_not_declared_gone(change):
    assert owner_gone(ME.model_copy(update=change)) is None


def test_only_provably_gone_owners_are_abandoned():
    book = ledger(total=None, per_model=None)
    verdicts = {1: True, 2: False, 3: None}
    for pid in verdicts:
        book.reserve(f"a-s{pid}", "a", Owner(host="h", boot_id="b", pid=pid, start_ticks=1))
    abandoned = book.abandoned(lambda owner: verdicts[owner.pid])
    assert [r.item for r in abandoned] == ["a-s1"]


def test_current_owner_names_this_process():
    assert ME.pid == os.getpid() and ME.boot_id and ME.start_ticks is not None
