"""Budget-fair: a $0.20 total over 2 models stays within the total and each model's equal share,
launching stops at the cap, the rest is skipped with reason "budget"; the same run with
--no-budget-cap overspends. And, at -n 8 over 200 items of random cost, no cap is ever passed."""

import pytest

from pytest_predbench.state.records import ItemStatus
from tests.support.acceptance import RunView, Workspace, budget_fair, cap_violations, fake_args

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`


def test_a_020_budget_over_two_models_is_kept_fairly_and_without_the_cap_overspent(tmp_path):
    capped, uncapped = budget_fair(Workspace(tmp_path))

    assert capped.budget == 0.2 and 0 < capped.spent <= 0.2
    assert capped.violations == []

    assert capped.model_cap == pytest.approx(0.1), "each model is capped at an equal share"
    assert all(0 < spent <= 0.1 for spent in capped.spent_per_model.values())

    assert capped.launched_per_model == {"fake/alpha": 2, "fake/beta": 2}
    assert capped.skipped_per_model == {"fake/alpha": 2, "fake/beta": 2}
    assert capped.skip_reasons == ["budget"]
    assert capped.launched_after_first_skip == 0, "launching stopped at the cap"

    assert uncapped.spent == pytest.approx(0.32) and uncapped.spent > uncapped.budget
    assert uncapped.skipped_per_model == {"fake/alpha": 0, "fake/beta": 0}
    assert uncapped.model_cap is None


def test_property_no_cap_is_passed_at_n8_over_200_items_of_random_cost(tmp_path):
    ws = Workspace(tmp_path)
    models = ("p/a", "p/b", "p/c", "p/d")
    run_dir = ws.run_dir("property")
    proc = ws.pytest(
        *fake_args(run_dir, models=models),
        "--sessions",
        "50",
        "--budget",
        "1.0",
        "--session-budget",
        "0.02",
        "--fake-cost",
        "0.01",
        "--fake-cost-jitter",
        "0.01",
        "-n",
        "8",
        "-q",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    view = RunView.load(run_dir)
    assert len(view.records) == 200 and all(r.status.terminal for r in view.records.values())
    assert cap_violations(view) == []
    assert not view.ledger.reservations, "every reservation was settled"
    costs = {round(r.spent, 9) for r in view.with_status(ItemStatus.PASSED)}
    assert len(costs) > 50, "the costs really were random"
    skipped = view.with_status(ItemStatus.SKIPPED_BUDGET)
    assert skipped and {r.reason for r in skipped} == {"budget"}, "the caps were reached and enforced"
    for model in models:
        first_skip = min(r.finished_at for r in skipped if r.model == model)
        launched = [c.reserved_at for c in view.ledger.charges if c.model == model]
        assert launched and max(launched) < first_skip, f"{model} launched a session after a budget skip"
        assert view.ledger.accounts[model].spent > 0.25 - 9 * 0.02, "stopped only with at most 8 sessions in flight"
