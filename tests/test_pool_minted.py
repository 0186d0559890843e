"""`--bug-pool` on a real minted pool (tests/support/pools.py: pred 0.6.0, seed 1, two bugs): a
validating certificate is accepted by `predbench verify --bug-pool` and rejected without it, by
`predbench calibrate --bug-pool` too, and in a run — verified inside the test, in the workers — it is
a bug on the pool and a false alarm on the pristine build. The plumbing itself (the plan, the
refusals, the skips) is tested on a hand-made pool in tests/test_pool_run.py, the sandbox in
tests/test_pool_sandbox.py."""

import pytest

from pytest_predbench.cli import main
from pytest_predbench.run.planning import build_plan
from pytest_predbench.state.plan import PlanOptions
from pytest_predbench.state.records import ItemStatus
from pytest_predbench.verify import pool
from pytest_predbench.verify.calibration import calibration_dir, discover, minted_bugs_of, run_case
from pytest_predbench.verify.environment import checked_record, manifest_digest, pool_record, source_manifest
from tests.support.acceptance import RunView, Workspace, fake_args

pytestmark = pytest.mark.slow  # the minted pool is a mint's build the first time: `make test`


def test_a_validating_certificate_is_accepted_with_bug_pool_and_rejected_without(minted_pool, capsys):
    for bug in minted_pool.manifest.bugs:
        certificate = str(minted_pool.certificate_path(bug))
        assert main(["verify", "--bug-pool", str(minted_pool.root), certificate]) == 0, bug.id
        assert capsys.readouterr().out.startswith(f"ACCEPTED {certificate}: ")
        assert main(["verify", "--pred-version", minted_pool.version, certificate]) == 1, bug.id
        assert capsys.readouterr().out.startswith(f"REJECTED {certificate}: ")


def test_calibration_on_the_minted_build(minted_pool, capsys):
    assert main(["calibrate", "--bug-pool", str(minted_pool.root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    for bug in minted_pool.manifest.bugs:
        rules = ", ".join(rule.label for rule in bug.rules)
        assert f"ok   {bug.id} ({rules}): accepted" in lines, lines
    on_minted = [
        path.stem
        for path in discover(calibration_dir(minted_pool.version))
        if minted_bugs_of(path, minted_pool.manifest)
    ]
    assert sorted(line.split()[1].rstrip(":") for line in lines if line.startswith("skip ")) == sorted(on_minted)
    judged = len(discover(calibration_dir(minted_pool.version))) - len(on_minted) + len(minted_pool.manifest.bugs)
    assert lines[-1].startswith(f"{judged} of {judged} calibration cases as expected")
    # why they are skipped: this pool's MaximumSetPacking -> QUBO (minted-01) has a calibration case,
    # float_sums_equal_within_tolerance, whose expected rejection (at `solutions`) no longer holds on the
    # minted build (its target does not rederive): judged, it would fail calibration
    assert on_minted
    assert any(
        run_case(path, pool_record(minted_pool)).mismatches
        for path in discover(calibration_dir(minted_pool.version))
        if path.stem in on_minted
    )


def test_the_plan_on_the_minted_pool_names_its_minted_build(minted_pool):
    plan = build_plan(PlanOptions(runner="fake", models=["m"], bug_pool=str(minted_pool.root)))
    files = minted_pool.manifest.files
    assert plan.pred.sha256 == files[pool.BINARIES["pred"]] != checked_record(minted_pool.version).pred_sha256
    assert plan.pred.extractor_sha256 == files[pool.BINARIES["pred-extract"]]
    assert plan.pred.source_sha256 == manifest_digest(source_manifest(minted_pool.source_dir))
    assert plan.pred.source_sha256 != checked_record(minted_pool.version).source_sha256
    assert plan.pool.digest == minted_pool.digest and plan.pool.bugs == [b.id for b in minted_pool.manifest.bugs]


def test_in_a_run_the_certificate_is_a_bug_on_the_pool_and_a_false_alarm_on_the_pristine_build(minted_pool, tmp_path):
    """The verifier inside the test, in the xdist workers, stands on the run's build."""
    bug = minted_pool.manifest.bugs[0]
    certificate = f"--fake-certificate={minted_pool.certificate_path(bug)}"
    ws = Workspace(tmp_path)
    on_pool = ws.pytest(*fake_args(ws.run_dir("pool"), f"--bug-pool={minted_pool.root}", certificate), "-n", "2")
    assert on_pool.returncode == 0, on_pool.stdout[-3000:] + on_pool.stderr[-3000:]
    records = RunView.load(ws.run_dir("pool")).records.values()
    assert {r.status for r in records} == {ItemStatus.PASSED}
    assert {v.outcome.value for r in records for v in r.verdicts} == {"accepted"}

    pristine = ws.pytest(
        *fake_args(ws.run_dir("pristine"), "--pred-version", minted_pool.version, certificate), "-n", "2"
    )
    assert pristine.returncode == 1, pristine.stdout[-3000:] + pristine.stderr[-3000:]
    records = RunView.load(ws.run_dir("pristine")).records.values()
    assert {r.status for r in records} == {ItemStatus.FALSE_ALARM}
    assert {v.outcome.value for r in records for v in r.verdicts} == {"rejected"}
