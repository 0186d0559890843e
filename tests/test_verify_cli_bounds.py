"""`predbench verify` at its edges: which version judges is explicit (a certificate's own
`pred_version` never overrides --pred-version, and every verdict names the pred that judged it), a
file too big to be a certificate is bounded before it is parsed, and --json prints JSON alone
whatever setting a version up prints meanwhile. The refusals need no pred; the verdicts run the real
pred of the suite's version (0.5.0)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_predbench import cli
from pytest_predbench.report import certificates as found_module
from pytest_predbench.report.certificates import MAX_RECORD_CONTAINERS, find_certificates

ROOT = Path(__file__).resolve().parents[1]
FIXED_IN_060 = ROOT / "fixtures/calibration/0.5.0/genuine_sat_to_circuitsat_crash.json"
"""A crash of pred 0.5.0 that 0.6.0 fixed: accepted on 0.5.0 (the suite's version), rejected on 0.6.0."""


def _named(tmp_path: Path, version: str | None) -> Path:
    data = json.loads(FIXED_IN_060.read_text())
    if version is not None:
        data["pred_version"] = version
    path = tmp_path / f"cert-{version}.json"
    path.write_text(json.dumps(data))
    return path


# -- 1. the version that judges is explicit -------------------------------------------------------


def test_a_certificates_own_version_against_an_explicit_one_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    """Not judged on 0.5.0 (nor set up): refused before any environment is chosen."""
    cert = _named(tmp_path, "0.5.0")
    chosen: list = []
    monkeypatch.setattr(cli, "load_environment", lambda args: chosen.append(args) or pytest.fail("set up"))
    monkeypatch.setattr(cli, "version_record", lambda version: chosen.append(version) or pytest.fail("set up"))
    assert cli.main(["verify", "--pred-version", "0.6.0", str(cert)]) == cli.USAGE
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"{cert} is for pred 0.5.0, but --pred-version asks for pred 0.6.0" in err and chosen == []


def test_the_contrast_the_same_version_or_none_given_is_no_conflict(tmp_path):
    args = cli.build_parser().parse_args(["verify", "--pred-version", "0.6.0", str(tmp_path)])
    same = find_certificates([_named(tmp_path, "0.6.0")])
    unnamed = find_certificates([_named(tmp_path, None)])
    other = find_certificates([_named(tmp_path, "0.5.0")])
    assert cli.version_conflict(args, same, "0.6.0") is None and cli.version_conflict(args, unnamed, "0.6.0") is None
    assert cli.version_conflict(args, other, "0.6.0") is not None
    implicit = cli.build_parser().parse_args(["verify", str(tmp_path)])
    assert cli.version_conflict(implicit, other, "0.6.0") is None  # then the certificate's field chooses


def test_every_verdict_names_the_pred_version_and_binary_that_judged_it(env_record, tmp_path, capsys):
    cert = _named(tmp_path, env_record.pred_version)  # the same version as asked for: no conflict
    assert cli.main(["verify", "--json", "--pred-version", env_record.pred_version, str(cert)]) == cli.OK
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["outcome"] == "accepted"  # the suite's version, 0.5.0, still has the bug
    assert (verdict["pred_version"], verdict["pred_sha256"]) == (env_record.pred_version, env_record.pred_sha256)
    assert verdict["extractor_sha256"] == env_record.extractor_sha256
    assert cli.main(["verify", str(cert), str(tmp_path / "missing.json")]) == cli.USAGE  # the contrast: no verdict
    capsys.readouterr()
    assert cli.main(["verify", str(cert)]) == cli.OK
    line = capsys.readouterr().out.splitlines()[0]
    assert line.endswith(f"[pred {env_record.pred_version} (sha256 {env_record.pred_sha256[:12]})]")


# -- 2. bounded before parsing ---------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["wide", "deep", "deep and small"])
def test_a_big_file_of_nested_empty_lists_is_refused_before_it_is_parsed(
    env_record, tmp_path, capsys, monkeypatch, shape
):
    big = tmp_path / "big.json"
    if shape == "wide":
        big.write_bytes(b"[" + b"[]," * 20_000_000 + b"[]]")  # 60 MB, 20 million lists: 1.6 GB parsed
    elif shape == "deep":
        big.write_bytes(b"[" * 30_000_000 + b"]" * 30_000_000)
    else:  # few lists, but nested past the limit, in a file over a certificate's size
        big.write_bytes(b'{"pad": "' + b"[" * 300_000 + b'", "a": ' + b"[" * 100 + b"]" * 100 + b"}")
    real_loads = json.loads

    def loads(text, *args, **kwargs):
        assert len(text) < 256 * 1024, "a file over a certificate's size reached json.loads"
        return real_loads(text, *args, **kwargs)

    monkeypatch.setattr(found_module.json, "loads", loads)
    assert cli.main(["verify", str(big)]) == cli.FAILED
    out, err = capsys.readouterr()
    first = out.splitlines()[0]
    size = big.stat().st_size
    assert first.startswith(f"REJECTED {big}: malformed certificate: {big} is {size} bytes") and "not parsed" in first
    assert ("nested too deeply (over 72 levels)" if shape == "deep and small" else "JSON arrays and objects") in first
    assert err == "" and len(out.splitlines()) == 2  # the verdict and the summary


def test_the_contrast_a_record_sized_file_within_its_bounds_is_parsed(tmp_path):
    fine = tmp_path / "fine.json"
    fine.write_bytes(b"[" + b"[]," * 200_000 + b"[]]")  # over a certificate's size, within a record's bounds
    assert 200_001 < MAX_RECORD_CONTAINERS
    [entry] = find_certificates([fine])
    assert "not parsed" not in entry.problem and "over the 262144-byte limit" in entry.problem


# -- 3. --json is JSON alone -----------------------------------------------------------------------

NOISY_SETUP = """
import subprocess, sys
from pytest_predbench import cli
from pytest_predbench.verify import setup

real = cli.version_record

def noisy(version):
    # what setting a version up prints while it builds: its own progress lines, and a child's output
    setup.say(f"building pred-{version} (15-40 min on 2 cores; log ...)")
    subprocess.run(["echo", "a build step writing to its stdout"], check=True)
    return real(version)

cli.version_record = noisy
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("as_json", [True, False])
def test_verify_json_stdout_is_json_whatever_setup_prints(env_record, tmp_path, as_json):
    cert = _named(tmp_path, None)
    argv = ["verify", *(["--json"] if as_json else []), str(cert), str(FIXED_IN_060)]
    proc = subprocess.run([sys.executable, "-c", NOISY_SETUP, *argv], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == cli.OK, proc.stderr
    assert "[setup] building pred-" in (proc.stderr if as_json else proc.stdout)
    assert "a build step writing to its stdout" in (proc.stderr if as_json else proc.stdout)
    if as_json:
        verdicts = json.loads(proc.stdout)
        assert [v["outcome"] for v in verdicts] == ["accepted", "accepted"]
    else:  # the contrast: without --json, setup's progress stays where it always was
        with pytest.raises(json.JSONDecodeError):
            json.loads(proc.stdout)
