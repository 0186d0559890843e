"""A run, `predbench verify` and `predbench calibrate` on a bug pool (`--bug-pool`): the plan stands
on the pool's minted build and its digest covers the pool (not where it is kept); a pool on another
version, missing or edited is one line; verify and calibrate judge on the minted build, calibration
skipping the cases on the pool's minted rules and requiring every validating certificate.

These use a pool made by hand from the pristine build (tests/support/pool_copies.py: nothing
mutated, the binaries' bytes distinct); what only minted bugs show is tested on the lead's minted
pool (tests/test_pool_minted.py).
"""

import json
from pathlib import Path

import pytest

from pytest_predbench.cli import main
from pytest_predbench.run.planning import build_plan
from pytest_predbench.state.plan import PlanError, PlanOptions, PoolInfo, first_difference
from pytest_predbench.verify import pin, pool
from pytest_predbench.verify.calibration import calibration_dir, discover
from pytest_predbench.verify.environment import checked_record, sha256_file
from tests.support.acceptance import MODELS, RunView, Workspace, fake_args
from tests.support.partial import partial_run
from tests.support.pool_copies import CASE, MVC, VERSION, copied_pool, linked_copy


@pytest.fixture(scope="session")
def hand_pool(tmp_path_factory) -> Path:
    return copied_pool(tmp_path_factory.mktemp("pools") / "pool")


def on(pool_dir: Path, **options) -> PlanOptions:
    return PlanOptions(runner="fake", models=["m"], bug_pool=str(pool_dir), **options)


def test_a_plan_on_a_pool_stands_on_its_minted_build_and_its_version(hand_pool, monkeypatch):
    monkeypatch.setenv(pin.VERSION_ENV, "0.5.0")  # the shell's default version; a pool's wins when none is given
    plan = build_plan(on(hand_pool))
    assert plan.pred_version == VERSION and plan.options.pred_version == VERSION
    assert plan.options.bug_pool == str(hand_pool.resolve())
    pristine = checked_record(VERSION)
    assert plan.pred.sha256 == sha256_file(hand_pool / "bin" / "pred") != pristine.pred_sha256
    assert plan.pred.extractor_sha256 == sha256_file(hand_pool / "bin" / "pred-extract") != pristine.extractor_sha256
    assert (plan.pred.path, plan.pred.source_dir) == (str(hand_pool / "bin" / "pred"), str(hand_pool / "source"))
    manifest = pool.load_pool(hand_pool).manifest
    assert plan.pool == PoolInfo(digest=manifest.digest, seed=1, bugs=["minted-01"])
    assert build_plan(on(hand_pool, pred_version=VERSION)).digest() == plan.digest()  # the same version, given

    contrast = build_plan(PlanOptions(runner="fake", models=["m"], pred_version=VERSION))
    assert contrast.pool is None and contrast.options.bug_pool is None
    assert contrast.pred.sha256 == pristine.pred_sha256 and contrast.pred.source_dir == pristine.source_dir


def test_a_pool_named_in_the_environment_means_nothing_to_a_plan_without_one(hand_pool, monkeypatch):
    monkeypatch.setenv("PREDBENCH_BUG_POOL", str(hand_pool))  # the variable that once carried the choice
    plan = build_plan(PlanOptions(runner="fake", models=["m"], pred_version=VERSION))
    assert plan.pool is None and plan.pred.sha256 == checked_record(VERSION).pred_sha256


def test_the_digest_covers_the_pool_by_its_digest_not_where_it_is_kept(hand_pool, tmp_path):
    plan = build_plan(on(hand_pool))
    moved = build_plan(on(linked_copy(hand_pool, tmp_path / "moved")))
    other = build_plan(on(linked_copy(hand_pool, tmp_path / "seed-2", seed=2)))
    assert moved.options.bug_pool != plan.options.bug_pool and moved.digest() == plan.digest()
    assert other.digest() != plan.digest()
    assert first_difference(plan, other).startswith("pool.digest (run: ")
    pristine = build_plan(PlanOptions(runner="fake", models=["m"], pred_version=VERSION))
    assert pristine.digest() != plan.digest()
    content = pristine.content()  # a plan recorded before pools: its digest stands without the fields
    assert "pool" not in content and "bug_pool" not in content["options"]


def test_a_pool_on_another_version_missing_or_edited_is_one_line(hand_pool, tmp_path):
    with pytest.raises(PlanError) as raised:
        build_plan(on(hand_pool, pred_version="0.5.0"))
    assert str(raised.value) == (
        f"--bug-pool: {hand_pool.resolve()} is a pool of pred 0.6.0, not of pred 0.5.0 (--pred-version): "
        "a pool stands on the version it was minted from"
    )
    with pytest.raises(PlanError) as raised:
        build_plan(on(tmp_path / "none"))
    assert str(raised.value) == (
        f"--bug-pool: {tmp_path / 'none'} is not a bug pool: it has no pool.json (make one with `predbench mint`)"
    )
    edited = linked_copy(hand_pool, tmp_path / "edited")
    rule = edited / "source" / "src" / "rules" / "kcoloring_partitionintocliques.rs"
    text = rule.read_text()
    rule.unlink()  # hard-linked to the shared pool: replace the file, never write into it
    rule.write_text(text.replace("num_colors", "num_colours", 1))
    with pytest.raises(PlanError) as raised:
        build_plan(on(edited))
    assert str(raised.value) == (
        f"--bug-pool: bug pool {edited} differs from its manifest: source/src/rules/kcoloring_partitionintocliques.rs"
    )


def test_verify_on_a_pool_runs_its_minted_pred(tmp_path, capsys):
    calls = tmp_path / "calls.log"
    logging = copied_pool(tmp_path / "pool", logged=calls)
    certificate = str(logging / "certificates" / "minted-01.json")
    assert main(["verify", "--bug-pool", str(logging), certificate]) == 0
    assert capsys.readouterr().out.startswith(f"ACCEPTED {certificate}: crash confirmed")
    ran = calls.read_text().splitlines()
    assert any(line.startswith("pred reduce ") for line in ran), ran
    assert any(line.startswith("pred-extract ") for line in ran), ran
    calls.unlink()  # the contrast: the version's own build, which is not the pool's
    assert main(["verify", "--pred-version", VERSION, certificate]) == 0
    assert capsys.readouterr().out.startswith(f"ACCEPTED {certificate}")
    assert not calls.exists()


def test_verify_refuses_a_pool_on_another_version_or_with_another_record_in_one_line(hand_pool, capsys, tmp_path):
    certificate = str(hand_pool / "certificates" / "minted-01.json")
    assert main(["verify", "--bug-pool", str(hand_pool), "--pred-version", "0.5.0", certificate]) == 2
    assert capsys.readouterr().err == (
        f"predbench: error: --bug-pool: {hand_pool.resolve()} is a pool of pred 0.6.0, not of pred 0.5.0 "
        "(--pred-version): a pool stands on the version it was minted from\n"
    )
    record = pin.env_record_path(VERSION)
    assert main(["verify", "--bug-pool", str(hand_pool), "--env-record", str(record), certificate]) == 2
    assert capsys.readouterr().err == (
        "predbench: error: --bug-pool and --env-record both name the build to verify on: give one\n"
    )
    (tmp_path / "pool.json").write_text("{}")
    assert main(["calibrate", "--bug-pool", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"predbench: error: --bug-pool: {tmp_path / 'pool.json'} is not a pool manifest: ")
    assert len(err.splitlines()) == 1


def test_calibrate_on_a_pool_skips_the_cases_on_its_minted_rules_and_requires_its_certificates(hand_pool, capsys):
    assert main(["calibrate", "--bug-pool", str(hand_pool)]) == 0
    lines = capsys.readouterr().out.splitlines()
    label = pool.load_pool(hand_pool).label()
    assert lines[0] == f"calibration set of pred 0.6.0 ({hand_pool / 'bin' / 'pred'}: the minted build of {label})"
    assert f"skip {CASE}: its rule is minted in the pool (minted-01), where the verdict it expects" in "\n".join(lines)
    assert "ok   minted-01 (KColoring -> PartitionIntoCliques): accepted" in lines
    judged = (
        len(discover(calibration_dir(VERSION))) - 1 + 1
    )  # the set, less the skipped case, plus the pool's certificate
    assert lines[-1] == f"{judged} of {judged} calibration cases as expected; 1 skipped, on rules the pool mutated"
    assert not any(line.startswith(f"ok   {CASE}:") for line in lines)

    # the contrast: on the version's own build the case is judged
    assert main(["calibrate", "--pred-version", VERSION]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"ok   {CASE}: accepted" in lines and not any(line.startswith("skip ") for line in lines)


def test_calibrate_on_a_pool_fails_when_a_validating_certificate_is_not_accepted(tmp_path, capsys):
    wrong = copied_pool(tmp_path / "pool", case="crash_claim_on_correct_rule")
    assert main(["calibrate", "--bug-pool", str(wrong)]) == 1
    lines = capsys.readouterr().out.splitlines()
    [line] = [line for line in lines if "minted-01" in line and not line.startswith("skip")]
    assert line.startswith("FAIL minted-01 (KColoring -> PartitionIntoCliques): rejected at ")
    assert "expected accepted, got rejected" in line
    cases = len(discover(calibration_dir(VERSION)))
    assert lines[-1].startswith(f"{cases - 1} of {cases} calibration cases as expected")


# -- runs on a pool, end to end in subprocesses ------------------------------------------------------


@pytest.mark.slow
def test_a_run_on_a_pool_stands_on_its_minted_build_in_every_worker(tmp_path):
    calls = tmp_path / "calls.log"
    logging = copied_pool(tmp_path / "pool", logged=calls)
    certificate = f"--fake-certificate={logging / 'certificates' / 'minted-01.json'}"
    ws = Workspace(tmp_path)
    proc = ws.pytest(*fake_args(ws.run_dir("run"), f"--bug-pool={logging}", certificate, "--sessions", "2"), "-n", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    view = RunView.load(ws.run_dir("run"))
    assert view.plan.pool.digest == pool.load_pool(logging).digest
    assert view.plan.pred.sha256 == sha256_file(logging / "bin" / "pred")
    assert {v.outcome.value for r in view.records.values() for v in r.verdicts} == {"accepted"}
    verified = [line for line in calls.read_text().splitlines() if line.startswith("pred reduce ")]
    assert len(verified) >= 4, "each of the 4 items' verifier (in the workers) ran the pool's pred"

    calls.unlink()  # the contrast: the same run on the version's own build never runs the pool's pred
    proc = ws.pytest(*fake_args(ws.run_dir("pristine"), certificate, "--sessions", "2"), "-n", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert RunView.load(ws.run_dir("pristine")).plan.pool is None and not calls.exists()


@pytest.mark.slow
def test_a_resume_keeps_its_pool_and_refuses_another_or_an_edited_one_in_one_line(hand_pool, tmp_path):
    calls = tmp_path / "calls.log"
    mine = copied_pool(tmp_path / "pool", logged=calls)
    other = linked_copy(mine, tmp_path / "other", seed=2)
    cert = str(mine / "certificates" / "minted-01.json")
    run = tmp_path / "run"
    partial_run(run, MODELS, 2, lambda item: item.session == 1, bug_pool=str(mine), fake_certificates=[cert])
    ws = Workspace(tmp_path)
    env = {pin.VERSION_ENV: "0.5.0"}  # the shell's default is another version

    refused = ws.pytest("--resume-bench", f"--run-dir={run}", f"--bug-pool={other}", env=env)
    assert refused.returncode == 4 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"ERROR: --resume-bench refused: {run} was planned differently: pool.digest (run: " in refused.stderr

    refused = ws.pytest("--resume-bench", f"--run-dir={run}", "--pred-version", "0.5.0", env=env)
    assert refused.returncode == 4 and refused.stderr.strip() == (
        f"ERROR: --bug-pool: {mine} is a pool of pred 0.6.0, not of pred 0.5.0 (--pred-version): "
        "a pool stands on the version it was minted from"
    )

    rule = mine / "source" / "src" / "rules" / "kcoloring_partitionintocliques.rs"
    original = rule.read_bytes()
    rule.write_bytes(original + b"// edited\n")
    refused = ws.pytest("--resume-bench", f"--run-dir={run}", env=env)
    assert refused.returncode == 4 and refused.stderr.strip() == (
        f"ERROR: --bug-pool: bug pool {mine} differs from its manifest: "
        "source/src/rules/kcoloring_partitionintocliques.rs"
    )
    rule.write_bytes(original)

    calls.unlink()
    resumed = ws.pytest("--resume-bench", f"--run-dir={run}", "-n", "2", env=env)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "pred 0.6.0" in resumed.stdout  # the pool's version, not the shell's
    view = RunView.load(run)
    assert len(view.records) == 4 and {r.plan_digest for r in view.records.values()} == {view.plan.digest()}
    verified = [line for line in calls.read_text().splitlines() if line.startswith("pred reduce ")]
    assert len(verified) >= 2, "the resumed items' verifiers (in the workers) ran the pool's pred"


@pytest.mark.slow
def test_a_run_asking_for_a_pool_on_another_version_or_a_missing_one_is_one_line(hand_pool, tmp_path):
    ws = Workspace(tmp_path)
    proc = ws.pytest(*fake_args(ws.run_dir("run"), f"--bug-pool={hand_pool}", "--pred-version", "0.5.0"))
    assert proc.returncode == 4 and proc.stderr.strip() == (
        f"ERROR: --bug-pool: {hand_pool} is a pool of pred 0.6.0, not of pred 0.5.0 (--pred-version): "
        "a pool stands on the version it was minted from"
    )
    proc = ws.pytest(*fake_args(ws.run_dir("run"), f"--bug-pool={tmp_path / 'none'}"))
    assert proc.returncode == 4 and proc.stderr.strip() == (
        f"ERROR: --bug-pool: {tmp_path / 'none'} is not a bug pool: it has no pool.json "
        "(make one with `predbench mint`)"
    )
    assert not ws.run_dir("run").exists()


@pytest.mark.slow
def test_a_demo_session_on_a_pool_reads_its_source_and_its_certificate_is_verified_there(tmp_path):
    """The real session path (mini-swe-agent, litellm, the sandbox, the gateway) on a pool: demo/finder
    reads the rule file the pool mutated and sees the pool's text of it, not the pristine one."""
    hand = copied_pool(tmp_path / "pool", hand=MVC)
    first = (hand / "source" / MVC.file).read_text().splitlines()[0]
    pristine = (Path(checked_record(VERSION).source_dir) / MVC.file).read_text().splitlines()[0]
    assert first != pristine
    ws = Workspace(tmp_path)
    runs = {"on-pool": [f"--bug-pool={hand}"], "pristine": ["--pred-version", VERSION]}
    for name, extra in runs.items():
        proc = ws.pytest("bench_sessions", "--models", "demo/finder", f"--run-dir={tmp_path / name}", *extra)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        record = RunView.load(tmp_path / name).records["demo/finder-s01"]
        assert [v.outcome.value for v in record.verdicts] == ["accepted"]
        shown = (tmp_path / name / "trajectories" / "demo__finder-s01.traj.json").read_text()
        seen, unseen = (first, pristine) if name == "on-pool" else (pristine, first)
        assert json.dumps(seen)[1:-1] in shown and json.dumps(unseen)[1:-1] not in shown
    assert "the minted build of pool" in (tmp_path / "on-pool" / "preflight.json").read_text()


@pytest.mark.slow
def test_the_ci_calibration_job_stays_on_the_pristine_build_whatever_pool_the_shell_names(tmp_path):
    calls = tmp_path / "calls.log"
    logging = copied_pool(tmp_path / "pool", logged=calls)
    case = f"fixtures/calibration/{VERSION}/{CASE}.json"
    proc = Workspace(tmp_path).pytest(case, "-p", "no:xdist", env={"PREDBENCH_BUG_POOL": str(logging)})
    assert proc.returncode == 0 and " 1 passed" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not calls.exists(), "pytest fixtures ran the pool's pred"
