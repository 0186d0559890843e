"""One test for each fault a review planted that no test caught (issue 31): each fails with its fault
planted and passes without, and each has its contrast case. The money faults on both stores; the
statistics at their confidence levels; the certificate parser's nesting limit at its very edge; the
audit's check that a terminal record's charge is a result; the gateway's working-directory check
against a bare prefix."""

import json
import posixpath
import shutil
import tempfile
from pathlib import Path

import pytest
from scipy.stats import binom

from pytest_predbench.report.stats import bootstrap_mean_ci, bugs_at_k_band
from pytest_predbench.run import topup
from pytest_predbench.run.planning import build_plan
from pytest_predbench.session import bwrap
from pytest_predbench.session.gateway import _request
from pytest_predbench.state.audit import read_snapshot, state_faults
from pytest_predbench.state.ledger import Ledger
from pytest_predbench.state.plan import PlanOptions
from pytest_predbench.verify.certificate import MAX_NESTING_DEPTH, CertificateError, parse_certificate
from tests.test_books import GENUINE
from tests.test_money_property import Raise, Settle, base_plan, directory_run, shared_run

# -- money ---------------------------------------------------------------------------------------


def test_a_raise_of_the_budget_gives_a_baseline_no_share():
    """The per-model cap a --budget raise sets is an equal share among the paying models only."""
    plan = base_plan(2, 1.0, None, True)  # baseline/random, m/a, m/b
    raised = topup.requested_raise(plan, {"budget": 2.0}, Ledger.for_plan(plan), "x")
    assert (raised.total, raised.per_model) == (2.0, 1.0), "two paying models: $1.00 each"
    three = build_plan(PlanOptions(runner="fake", models=["m/a", "m/b", "m/c"], sessions=2, budget=1.0))
    contrast = topup.requested_raise(three, {"budget": 2.0}, Ledger.for_plan(three), "x")
    assert contrast.per_model == pytest.approx(2.0 / 3), "the contrast: a third paying model does take a share"
    assert plan.budget.per_model == 0.5, "and so did the plan: the same rule (state/money.py)"


@pytest.mark.parametrize("kind", ["directory", "postgres"])
def test_a_raised_model_cap_alone_binds_and_the_session_cap_never_changes(pg_server, kind):
    plan = base_plan(2, 1.0, 0.1, False)  # $0.10 per model, $0.05 a session, $1.00 in all
    root = Path(tempfile.mkdtemp(prefix="money-"))
    try:
        run = directory_run(plan, root) if kind == "directory" else shared_run(plan, pg_server.url, root)
        run.crash(0)
        run.reserve(0)
        run.settle(Settle(0, 8, False))  # m/a spent its $0.10
        assert run.reserve(2)[0] == "skipped", "the contrast: under the planned model cap, no room"
        assert run.raise_caps(Raise(None, 0.2)) == ("raised", 1.0, 0.2)
        figures = run.books()[0]
        assert (figures["m/a"][3], figures["m/b"][3], figures["total"][3]) == (0.2, 0.2, 1.0)
        assert run.reserve(2) == ("reserved", "m/a-s02", 0.05), "the raised model cap binds; a session's does not move"
        run.wind_up()
        run.store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- statistics at their confidence levels -------------------------------------------------------


def _half_found(n: int) -> list[set[str]]:
    return [{"bug"} if i % 2 else set() for i in range(n)]


def test_the_bugs_at_k_band_is_a_95_percent_interval_by_default():
    """100 sessions, half of which found the one bug: Bugs@1 over resampled sessions is a binomial
    share, whose 2.5th and 97.5th percentiles are 0.40 and 0.60 (a 90% band would give 0.42, 0.58)."""
    low, high = binom.ppf([0.025, 0.975], 100, 0.5) / 100
    assert bugs_at_k_band(_half_found(100))[0] == pytest.approx((low, high), abs=0.011)
    narrow = bugs_at_k_band(_half_found(100), level=0.5)[0]
    assert narrow == pytest.approx(tuple(binom.ppf([0.25, 0.75], 100, 0.5) / 100), abs=0.011)
    assert narrow[1] - narrow[0] < high - low, "the contrast: a lower level, a narrower band"


def test_the_bootstrap_interval_of_a_mean_is_a_95_percent_interval_by_default():
    values = [float(i % 2) for i in range(100)]
    low, high = binom.ppf([0.025, 0.975], 100, 0.5) / 100
    assert bootstrap_mean_ci(values) == pytest.approx((low, high), abs=0.011)
    narrow = bootstrap_mean_ci(values, level=0.5)
    assert narrow == pytest.approx(tuple(binom.ppf([0.25, 0.75], 100, 0.5) / 100), abs=0.011)


# -- the certificate parser's nesting limit, at its edge -----------------------------------------


def _nested(levels: int) -> str:
    """The genuine certificate with its source data nested `levels` lists deep: the certificate is
    level 1, `source` level 2, its `data` level 3, so the innermost list sits at level levels + 2."""
    cert = json.loads(GENUINE.read_text())
    data: list = []
    for _ in range(levels - 1):
        data = [data]
    cert["source"]["data"] = data
    return json.dumps(cert)


def test_the_certificate_parser_takes_exactly_its_nesting_limit_and_refuses_one_level_more():
    at_limit = MAX_NESTING_DEPTH - 2
    try:
        parse_certificate(_nested(at_limit))
    except CertificateError as exc:  # refused for what the data means, never for its depth
        assert "nested too deeply" not in str(exc)
    with pytest.raises(CertificateError, match=f"nested too deeply \\(over {MAX_NESTING_DEPTH} levels\\)"):
        parse_certificate(_nested(at_limit + 1))


# -- the audit: a terminal record's charge is a result -------------------------------------------


def test_the_audit_finds_a_terminal_record_whose_charge_is_not_a_result(pg_server, tmp_path):
    run = directory_run(base_plan(1, 1.0, None, False), tmp_path)
    run.reserve(0)
    run.settle(Settle(0, 4, False))
    path = run.store.run.ledger
    assert state_faults(read_snapshot(path.parent)) == [], "the contrast: the intact books"
    ledger = json.loads(path.read_text())
    ledger["charges"][0]["kind"] = "infra"
    path.write_text(json.dumps(ledger))
    whys = [f.why for f in state_faults(read_snapshot(path.parent))]
    assert any("the record is passed, the ledger charged its session as infra" in why for why in whys), whys


# -- the gateway's working directory ---------------------------------------------------------------


@pytest.mark.parametrize(
    "cwd, allowed",
    [
        (bwrap.SCRATCH_DIR, True),
        (f"{bwrap.SCRATCH_DIR}/work", True),
        (f"{bwrap.SCRATCH_DIR}/work/../x", True),
        (f"{bwrap.SCRATCH_DIR}x", False),
        (f"{bwrap.SCRATCH_DIR}x/work", False),
        (f"{bwrap.SCRATCH_DIR}/../etc", False),
        ("scratch", False),
    ],
)
def test_the_gateway_runs_a_call_only_in_the_scratch_never_in_a_bare_prefix_of_it(cwd, allowed, tmp_path):
    for name in ("work", "x"):  # the scratch as the host holds it: the gateway resolves the cwd in it
        (tmp_path / name).mkdir()
    request = b"\0".join([b"pred", cwd.encode(), b"list"])
    outcome = _request(request, [0, 1, 2], {"pred": Path("/bin/true")}, tmp_path)
    if allowed:
        assert outcome == ("pred", [b"list"], posixpath.normpath(cwd))
    else:
        assert outcome == f"pred runs in {bwrap.SCRATCH_DIR} (and its files are there): cd there first"
