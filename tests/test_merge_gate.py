"""The merge gate refuses, naming each offending item and why, unless plan, ledger and records
agree; each refusal is contrasted with the intact run it was made from, which publishes."""

import json
import shutil
from datetime import date
from pathlib import Path

import pytest

from pytest_predbench.report.gate import GateRefusal, check, merge_offences, run_offences
from pytest_predbench.report.leaderboard import JSON_NAME
from pytest_predbench.state.audit import read_snapshot
from pytest_predbench.state.plan import ModelIdentity
from tests.support.report_runs import edit_json, fake_run, item_file, report

pytestmark = pytest.mark.slow  # end to end in subprocesses: `make test`, not `make check`


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    return fake_run(tmp_path_factory.mktemp("finished") / "run")


@pytest.fixture
def run(finished_run, tmp_path) -> Path:
    """A private copy of a finished run, to break."""
    target = tmp_path / "run"
    shutil.copytree(finished_run, target, ignore=shutil.ignore_patterns("leaderboard.*", ".*.lock"))
    return target


def refusal_lines(run_dir: Path) -> list[str]:
    done = report(str(run_dir))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert not (run_dir / JSON_NAME).exists(), "a refused report publishes nothing"
    return done.stderr.splitlines()[1:]


def test_intact_run_publishes(run):
    done = report(str(run))
    assert done.returncode == 0, done.stderr
    assert (run / JSON_NAME).is_file()


def test_deleted_item_record_is_named(run):
    item_file(run, "b/y-s01").unlink()
    lines = refusal_lines(run)
    assert lines and all(line.startswith("b/y-s01: ") for line in lines)
    assert any("no item record" in line for line in lines)
    assert any("ledger charges" in line and "no item record" in line for line in lines)


def test_outstanding_infra_failure_refuses(tmp_path):
    run_dir = fake_run(tmp_path / "run", models="a/x", extra=("--fake-stop", "infra_error"))
    lines = refusal_lines(run_dir)
    assert sorted(line.split(":")[0] for line in lines) == ["a/x-s01", "a/x-s02"]
    assert all("infrastructure failure outstanding" in line and "--resume-bench" in line for line in lines)


def test_record_of_another_plan_is_named(run):
    edit_json(item_file(run, "a/x-s02"), lambda record: record.update(plan_digest="0" * 64))
    assert refusal_lines(run) == [f"a/x-s02: record carries plan 000000000000, the run's plan is {_digest(run)[:12]}"]


def _digest(run: Path) -> str:
    return json.loads((run / "plan.json").read_text())["digest"]


def test_record_without_its_ledger_charge_is_named(run):
    edit_json(run / "ledger.json", lambda ledger: ledger["charges"].pop(1))
    item = json.loads((run / "ledger.json").read_text())
    assert "b/y-s01" not in [charge["item"] for charge in item["charges"]]
    [line] = refusal_lines(run)
    assert line.startswith("b/y-s01: ") and "no ledger charge" in line


def test_spend_disagreeing_with_the_ledger_is_named(run):
    def cheaper(record: dict) -> None:
        record["spent"] = 0.001
        record["result"]["accounting"]["dollars"] = 0.001

    edit_json(item_file(run, "a/x-s01"), cheaper)
    [line] = refusal_lines(run)
    assert line.startswith("a/x-s01: ") and "the ledger charged $0.01" in line


def test_open_reservation_means_live_or_crashed(run):
    def reopen(ledger: dict) -> None:
        charge = ledger["charges"][-1]
        ledger["reservations"].append(
            {
                "id": "f" * 32,
                "item": charge["item"],
                "model": charge["model"],
                "dollars": 0.05,
                "owner": {"host": "elsewhere", "boot_id": None, "pid": 4242, "start_ticks": None},
            }
        )

    edit_json(run / "ledger.json", reopen)
    [line] = refusal_lines(run)
    assert line.startswith("b/y-s02: reservation still open (pid 4242 on elsewhere)")


def test_unreadable_record_is_a_usage_error_naming_it(run):
    item_file(run, "a/x-s01").write_text("{not json")
    done = report(str(run))
    assert done.returncode == 2 and not (run / JSON_NAME).exists()
    [line] = done.stderr.splitlines()
    assert str(item_file(run, "a/x-s01")) in line and "Traceback" not in done.stderr


def test_unplanned_record_is_named(run):
    stray = json.loads(item_file(run, "a/x-s01").read_text())
    stray.update(item="a/x-s09", session=9)
    item_file(run, "a/x-s09").write_text(json.dumps(stray))
    lines = refusal_lines(run)
    assert any(line.startswith("a/x-s09: record of an item the plan does not contain") for line in lines)


def test_unreadable_plan_is_a_usage_error_not_a_refusal(run):
    (run / "plan.json").write_text("{}")
    done = report(str(run))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "plan.json" in line and "Traceback" not in done.stderr


def test_not_a_run_directory(tmp_path):
    done = report(str(tmp_path))
    assert done.returncode == 2 and "not a run directory" in done.stderr


def test_incompatible_plans_do_not_merge(finished_run, tmp_path):
    other = fake_run(tmp_path / "other", models="c/z", extra=("--session-budget", "0.04"))
    done = report(str(finished_run), str(other), "--out", str(tmp_path / "merged"))
    assert done.returncode == 1
    assert any("limits differs" in line and "cannot merge" in line for line in done.stderr.splitlines())
    compatible = fake_run(tmp_path / "compatible", models="c/z", budget=0.1)  # the same $0.05 per session
    assert report(str(finished_run), str(compatible), "--out", str(tmp_path / "merged")).returncode == 0


def test_a_copied_run_is_not_merged_twice(finished_run, run, tmp_path):
    with pytest.raises(GateRefusal) as refused:
        check([read_snapshot(finished_run), read_snapshot(run)])
    assert len(refused.value.offences) == 4
    assert all("the same record is also in" in o.why for o in refused.value.offences)


def test_offences_are_listed_in_plan_order(run):
    for item in ("b/y-s02", "a/x-s01"):
        item_file(run, item).unlink()
    items = [o.item for o in run_offences(read_snapshot(run))]
    assert items == sorted(items, key=["a/x-s01", "b/y-s02"].index)


def test_one_model_id_means_one_model_across_merged_runs(finished_run, tmp_path):
    other = fake_run(tmp_path / "other", models="a/x", budget=0.1)
    first, second = read_snapshot(finished_run), read_snapshot(other)
    identity = ModelIdentity(
        call_name="openai/x",
        api_base=None,
        input_cost_per_token=1e-6,
        output_cost_per_token=2e-6,
        price_source="t",
    )
    first.plan.model_identities["a/x"] = identity
    second.plan.model_identities["a/x"] = identity.model_copy(update={"output_cost_per_token": 4e-6})
    [offence] = merge_offences([first, second])
    assert offence.item == "plan" and "model a/x is called or priced otherwise" in offence.why
    second.plan.model_identities["a/x"] = identity.model_copy(update={"training_cutoff": date(2026, 6, 30)})
    [offence] = merge_offences([first, second])
    assert "model a/x is given another training cutoff there" in offence.why
    second.plan.model_identities["a/x"] = identity
    assert merge_offences([first, second]) == []
