"""Versions as data: the table of supported versions, the choice of one per process, the plan that
names it, the refusals that keep runs on different versions apart, and setup's notices."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_predbench.report.gate import merge_offences
from pytest_predbench.run.planning import build_plan
from pytest_predbench.state.audit import read_snapshot
from pytest_predbench.state.plan import PlanOptions
from pytest_predbench.verify import pin, setup
from pytest_predbench.verify.certificate import parse_certificate
from pytest_predbench.verify.known_bugs import load_registry
from pytest_predbench.verify.verifier import verify
from tests.support.acceptance import REPO, Workspace, fake_args
from tests.support.versions import CALIBRATION_DIR


def test_every_supported_version_has_its_facts_registry_and_calibration_set():
    assert pin.supported() == ["0.6.0", "0.5.0"] and pin.DEFAULT_VERSION == "0.6.0"
    for version in pin.supported():
        facts = pin.facts(version)
        assert facts.version == version and facts.rules > 0 and len(facts.upstream_commit) == 40
        assert load_registry(version).pred_version == version
        assert sorted((REPO / "fixtures" / "calibration" / version).glob("*.json")), version


def test_an_unsupported_version_is_one_line_naming_the_supported_ones():
    with pytest.raises(pin.UnsupportedVersion) as raised:
        pin.check_version("0.4.0")
    assert str(raised.value) == "pred version '0.4.0' is not supported; supported: 0.6.0 (default), 0.5.0"


def test_the_default_of_pred_version_is_the_reference_pin_unless_the_shell_names_another(monkeypatch):
    monkeypatch.delenv(pin.VERSION_ENV, raising=False)
    assert pin.default_choice() == pin.DEFAULT_VERSION == "0.6.0"  # the default when nothing chose
    monkeypatch.setenv(pin.VERSION_ENV, "0.5.0")
    assert pin.default_choice() == "0.5.0"
    assert not hasattr(pin, "select") and not hasattr(pin, "selected"), "no ambient choice to fall back on"


def test_the_plan_names_its_version_and_the_digest_covers_it():
    on_old = build_plan(PlanOptions(runner="fake", models=["m"], pred_version="0.5.0"))
    on_new = build_plan(PlanOptions(runner="fake", models=["m"], pred_version="0.6.0"))
    assert (on_old.pred_version, on_new.pred_version) == ("0.5.0", "0.6.0")
    assert on_old.digest() != on_new.digest()
    chosen = build_plan(PlanOptions(runner="fake", models=["m"]))  # none given: the option's default
    assert chosen.pred_version == pin.default_choice()


def test_a_plan_recorded_before_versions_keeps_its_digest_and_reads_as_0_5_0():
    plan = build_plan(PlanOptions(runner="fake", models=["m"], pred_version="0.5.0"))
    legacy = plan.model_copy(update={"options": plan.options.model_copy(update={"pred_version": None})})
    assert "pred_version" not in legacy.content()["options"]
    assert legacy.pred_version == "0.5.0" and legacy.digest() != plan.digest()


def test_a_certificate_naming_another_version_is_rejected_not_verified_elsewhere(genuine, env_record):
    assert verify(parse_certificate(json.dumps({**genuine, "pred_version": "0.5.0"})), env_record).accepted
    verdict = verify(parse_certificate(json.dumps({**genuine, "pred_version": "0.6.0"})), env_record)
    assert not verdict.accepted and verdict.reason == (
        "the certificate is for pred 0.6.0, this verification is on pred 0.5.0"
    )
    with pytest.raises(ValueError, match="pred_version"):
        parse_certificate(json.dumps({**genuine, "pred_version": "latest"}))


@pytest.mark.slow
def test_runs_on_different_versions_are_never_pooled(tmp_path):
    ws = Workspace(tmp_path)
    runs = {"a": "0.5.0", "b": "0.5.0", "c": "0.6.0"}
    for name, version in runs.items():
        proc = ws.pytest(*fake_args(ws.run_dir(name), "--pred-version", version))
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert f"pred {version}" in proc.stdout  # the summary says which
    a, b, c = (read_snapshot(ws.run_dir(name)) for name in runs)
    [offence] = merge_offences([a, c])
    assert offence.why.startswith("cannot pool runs on different pred versions:")
    assert "is on pred 0.5.0, this one on pred 0.6.0; put them side by side with --compare" in offence.why
    assert not any("pred versions" in o.why for o in merge_offences([a, b]))  # the contrast: one version


@pytest.mark.slow
def test_resume_refuses_another_version_and_takes_the_runs_own(tmp_path):
    ws = Workspace(tmp_path)
    run = ws.run_dir("run")
    first = ws.pytest(*fake_args(run, "--pred-version", "0.5.0", "--sessions", "2"), "--maxfail=1")
    assert first.returncode == 0, first.stdout[-2000:]
    refused = ws.pytest("--resume-bench", f"--run-dir={run}", "--pred-version", "0.6.0")
    assert refused.returncode == 4 and "planned differently: options.pred_version" in refused.stderr
    env = {pin.VERSION_ENV: ""}  # empty: nothing chose a version (pin.default_choice() gives the default)
    resumed = ws.pytest("--resume-bench", f"--run-dir={run}", env=env)
    assert resumed.returncode == 0 and "pred 0.5.0" in resumed.stdout, resumed.stdout[-2000:] + resumed.stderr


@pytest.mark.slow
def test_an_unknown_version_on_the_command_line_is_one_line(tmp_path):
    ws = Workspace(tmp_path)
    proc = ws.pytest(*fake_args(ws.run_dir("run"), "--pred-version", "0.4.0"))
    assert proc.returncode == 4
    assert proc.stderr.strip() == (
        "ERROR: --pred-version: pred version '0.4.0' is not supported; supported: 0.6.0 (default), 0.5.0"
    )
    assert not ws.run_dir("run").exists()


# -- setup's notices ------------------------------------------------------------------------------

FAKE_CARGO = textwrap.dedent(
    """\
    import os, sys, time
    root = sys.argv[sys.argv.index("--root") + 1]
    time.sleep(float(os.environ["SLEEP"]))
    if os.environ.get("FAIL"):
        print("error[E0425]: cannot find value", flush=True)
        sys.exit(101)
    os.makedirs(os.path.join(root, "bin"))
    open(os.path.join(root, "bin", "pred"), "w").close()
    """
)
"""A stand-in for cargo install (a build's argv is data): what setup does around a build is tested,
not the build."""


def _build(tmp_path: Path, name: str, seconds: float, fail: bool = False) -> setup.Build:
    script = tmp_path / "cargo.py"
    script.write_text(FAKE_CARGO)
    env = {"SLEEP": str(seconds), **({"FAIL": "1"} if fail else {})}
    return setup.Build(name, [sys.executable, str(script)], tmp_path / name, env)


def test_builds_run_side_by_side_with_a_heartbeat_and_remember_their_time(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PREDBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(setup, "HEARTBEAT_S", 0.3)
    builds = [_build(tmp_path, "pred-9.9.9", 1.5), _build(tmp_path, "pred-extract-9.9.9", 1.5)]
    setup.run_builds(builds)
    first, second = builds
    out = capsys.readouterr().out
    assert "[setup] building pred-9.9.9 (15-40 min on 2 cores; log " in out  # no time on record yet
    beats = [line for line in out.splitlines() if "building (pid " in line]
    assert beats and "pred-9.9.9 building (pid " in beats[0] and "pred-extract-9.9.9 building (pid " in beats[0]
    assert (tmp_path / "pred-9.9.9" / "bin" / "pred").is_file()
    assert second.started < first.started + first.seconds  # side by side: the second began before the first ended
    assert set(setup.last_times()) == {"pred-9.9.9", "pred-extract-9.9.9"}
    setup.run_builds([_build(tmp_path, "pred-8.8.8", 0.1)])
    setup.run_builds([_build(tmp_path, "pred-8.8.8", 0.1)])
    assert "[setup] building pred-8.8.8 (last time 0 s; log" in capsys.readouterr().out


def test_a_failed_build_is_one_error_after_its_logs_end_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PREDBENCH_CACHE", str(tmp_path))
    builds = [_build(tmp_path, "pred-9.9.9", 0.1, fail=True), _build(tmp_path, "pred-extract-9.9.9", 30)]
    with pytest.raises(setup.PredEnvironmentError) as raised:
        setup.run_builds(builds)
    assert str(raised.value) == f"building pred-9.9.9 failed (exit 101); its log: {tmp_path}/logs/pred-9.9.9.log"
    assert "[setup] pred-9.9.9: error[E0425]: cannot find value" in capsys.readouterr().out
    assert builds[1].process.poll() is not None  # the other build was stopped, not left running
    assert not list(tmp_path.glob(".pred*building*")) and not (tmp_path / "pred-9.9.9").exists()


def test_a_setup_waiting_on_anothers_lock_says_who_holds_it(tmp_path):
    env = {**os.environ, "PREDBENCH_CACHE": str(tmp_path)}
    holder = (
        "import time; from pytest_predbench.verify import setup; lock = setup._locked('0.5.0'); "
        "print('held', flush=True); time.sleep(4)"
    )
    waiter = "from pytest_predbench.verify import setup; setup.HEARTBEAT_S = 0.5; setup._locked('0.5.0').release()"
    first = subprocess.Popen([sys.executable, "-c", holder], env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert first.stdout.readline().strip() == "held"
    second = subprocess.run([sys.executable, "-c", waiter], env=env, cwd=REPO, capture_output=True, text=True)
    first.wait()
    assert second.returncode == 0
    assert f"[setup] waiting for pid {first.pid} to finish setting up pred 0.5.0" in second.stdout


def test_calibration_set_of_the_suite_is_its_versions():
    assert CALIBRATION_DIR == REPO / "fixtures" / "calibration" / "0.5.0"


# -- predbench verify on each version ---------------------------------------------------------------

DATA = REPO / "tests" / "data"


def _verify(*args: str) -> tuple[int, dict[str, dict]]:
    """`predbench verify --json ARGS` with no version chosen but by ARGS: exit code, verdict by file name."""
    env = {k: v for k, v in os.environ.items() if k != pin.VERSION_ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_predbench.cli", "verify", "--json", *args],
        env=env,
        capture_output=True,
        text=True,
    )
    found = json.loads(proc.stdout)
    verdicts = found if isinstance(found, list) else [found]
    return proc.returncode, {Path(v["certificate"]).name: v for v in verdicts}


@pytest.mark.slow
def test_verify_on_0_6_0_accepts_its_real_bugs_outside_the_calibration_set_and_rejects_tampered_ones():
    calibrated = {p.read_text() for p in (REPO / "fixtures" / "calibration" / "0.6.0").glob("*.json")}
    cases = sorted((DATA / "0.6.0").glob("*.json"))
    assert cases and not any(case.read_text() in calibrated for case in cases), "none is a calibration case"
    code, verdicts = _verify("--pred-version", "0.6.0", "-j", "2", str(DATA / "0.6.0"))
    assert code == 1  # some rejected
    for case in cases:
        expected = json.loads((DATA / "0.6.0" / "expected" / case.name).read_text())
        verdict = verdicts[case.name]
        assert verdict["accepted"] is expected["accepted"], (case.name, verdict["reason"])
        if expected["accepted"]:
            assert verdict["violation"] == expected["violation"]
        assert {True, False} <= {v["accepted"] for v in verdicts.values()}


@pytest.mark.slow
def test_a_bug_that_0_6_0_fixed_is_rejected_there_and_accepted_on_0_5_0(tmp_path):
    [case] = (DATA / "fixed_in_0.6.0").glob("*.json")
    code, on_new = _verify(str(case))  # the default: 0.6.0
    assert code == 1 and not on_new[case.name]["accepted"]
    assert on_new[case.name]["reason"].startswith("rejected at rederive")
    code, on_old = _verify("--pred-version", "0.5.0", str(case))
    assert code == 0 and on_old[case.name]["accepted"] and on_old[case.name]["violation"] == "crash"
    named = tmp_path / case.name  # the certificate names its version: verified there whatever the default
    named.write_text(json.dumps({**json.loads(case.read_text()), "pred_version": "0.5.0"}))
    code, by_field = _verify(str(named))
    assert code == 0 and by_field[case.name]["accepted"]


def test_setup_builds_pred_exactly_as_documented_and_the_extractor_beside_it(tmp_path):
    pred = setup.pred_build("0.6.0")
    assert pred.argv == ["cargo", "install", "problemreductions-cli", "--version", "0.6.0", "--locked"]
    assert pred.niceness == 0 and pred.env == {}  # byte for byte what anyone's cargo install gives
    extractor = setup.extractor_build("0.6.0", tmp_path)
    assert extractor.niceness > 0 and extractor.env["CARGO_TARGET_DIR"].endswith("extractor-target-0.6.0")
    assert extractor.final == pin.extractor_root("0.6.0") != pin.extractor_root("0.5.0")


@pytest.mark.slow
def test_the_data_frames_match_each_runs_certificates_against_its_own_versions_registry(tmp_path, monkeypatch):
    """A 0.5.0 run read from a process on 0.6.0 (a notebook that chose nothing): its bug on a rule
    0.6.0 removed is still a known bug of its version."""
    from pytest_predbench.analysis import certificates_df
    from tests.support.report_runs import fake_run

    removed = CALIBRATION_DIR / "genuine_threepartition_to_flowshop_unsound.json"
    run = fake_run(tmp_path / "run", removed, models="a/x", sessions=1, extra=("--pred-version", "0.5.0"))
    monkeypatch.setenv(pin.VERSION_ENV, "0.6.0")  # the reading process's default is another version
    assert not load_registry("0.6.0").find("ThreePartition", {}, "FlowShopScheduling", {})  # the contrast: not on 0.6.0
    [row] = certificates_df(run).to_dict("records")
    assert row["accepted"] and row["known_bugs"] == ["threepartition-to-flowshopscheduling"]
