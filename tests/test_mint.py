"""Minted bugs: the candidates, the seeded choice, and a real minted pool (tests/support/pools.py)
judged by the real verifier on both builds; the pool's integrity checks; `predbench mint`'s errors."""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_predbench.mint.candidates import (
    DESCRIPTIVE,
    ENTRY_POINTS,
    Usage,
    eligible,
    judgeable,
    known_bug_files,
    seeded_order,
)
from pytest_predbench.mint.mutator import list_mutants
from pytest_predbench.mint.rules import rules_by_file
from pytest_predbench.mint.validate import Prober, breaks_own_example, examples_broken, outcome_on, validate
from pytest_predbench.verify import pin
from pytest_predbench.verify.certificate import load_certificate
from pytest_predbench.verify.environment import checked_record, pool_record, source_manifest
from pytest_predbench.verify.known_bugs import load_registry
from pytest_predbench.verify.pool import MANIFEST, PoolError, compute_digest, load_pool
from pytest_predbench.verify.setup import ensured_record
from pytest_predbench.verify.verdict import Outcome
from pytest_predbench.verify.verifier import verify
from tests.support.pools import BREAKER_FILE, BYSTANDER_FILE, breaker_build

VERSION = "0.6.0"


@pytest.fixture(scope="module")
def library() -> dict:
    """The pristine 0.6.0 build's facts a mint starts from: its source, rule files and mutants."""
    record = ensured_record(VERSION)
    source = Path(record.source_dir)
    rules = rules_by_file(Path(record.pred_path))
    mutants = list_mutants(source)
    return {"source": source, "rules": rules, "mutants": mutants, "registry": load_registry(VERSION)}


def test_candidates_stay_inside_rule_files_with_no_known_bug(library):
    candidates = eligible(library["mutants"], library["rules"], library["registry"], library["source"])
    excluded = known_bug_files(library["rules"], library["registry"])
    assert candidates and excluded  # 0.6.0 has known bugs, and rule files without one
    usage = Usage(library["source"])
    for file, mutants in candidates.items():
        assert file in library["rules"] and file not in excluded and judgeable(library["rules"][file])
        for mutant in mutants:
            assert mutant.file == file and mutant.short_function not in DESCRIPTIVE
            if mutant.short_function in ENTRY_POINTS:
                assert mutant.genre != "FnValue"
            else:
                assert not usage.outside(file, mutant.short_function)
    # contrast: cargo-mutants proposes mutants that are all of these, and they were left out
    every = {m.file for m in library["mutants"]}
    assert every & excluded and every - set(library["rules"])
    assert any(not judgeable(rules) for rules in library["rules"].values())
    assert any(m.short_function in DESCRIPTIVE for m in library["mutants"])


def test_the_seeded_order_is_reproducible_one_per_file_and_differs_by_seed(library):
    candidates = eligible(library["mutants"], library["rules"], library["registry"], library["source"])
    first = seeded_order(candidates, VERSION, 1)
    listed_again = list_mutants(library["source"])
    again = seeded_order(eligible(listed_again, library["rules"], library["registry"], library["source"]), VERSION, 1)
    assert first == again
    assert len({m.file for m in first}) == len(first) == len(candidates)
    assert seeded_order(candidates, VERSION, 2)[:10] != first[:10]


@pytest.mark.slow
def test_every_minted_bug_is_accepted_on_the_minted_build_and_rejected_on_the_pristine(minted_pool):
    minted, pristine = pool_record(minted_pool), checked_record(minted_pool.version)
    assert minted.pred_sha256 != pristine.pred_sha256 and minted.extractor_sha256 != pristine.extractor_sha256
    assert len(minted_pool.manifest.bugs) == minted_pool.manifest.requested == 2
    for bug in minted_pool.manifest.bugs:
        certificate = load_certificate(minted_pool.certificate_path(bug))
        on_minted, on_pristine = verify(certificate, minted), verify(certificate, pristine)
        assert on_minted.outcome is Outcome.ACCEPTED, (bug.id, on_minted.reason)
        assert on_pristine.outcome is Outcome.REJECTED, (bug.id, on_pristine.reason)
        source, target = certificate.source, certificate.target
        assert bug.id in minted_pool.manifest.find(source.type, source.variant, target.type, target.variant)
        assert 0 <= bug.exposed <= bug.probes and bug.probes > 0 and bug.band in ("easy", "medium", "hard")


@pytest.mark.slow
def test_a_pools_source_differs_from_the_pristine_only_in_its_minted_rule_files(minted_pool, tmp_path):
    pristine = Path(checked_record(minted_pool.version).source_dir)
    ours, theirs = source_manifest(minted_pool.source_dir), source_manifest(pristine)
    assert ours.keys() == theirs.keys()
    changed = {path for path in ours if ours[path] != theirs[path]}
    assert changed == {bug.file for bug in minted_pool.manifest.bugs}
    # each diff, applied to a pristine copy, gives the pool's file exactly
    copy = tmp_path / "pristine"
    shutil.copytree(pristine, copy)
    for bug in minted_pool.manifest.bugs:
        diff = (minted_pool.root / bug.diff).read_text()
        subprocess.run(["patch", "-p0", "--batch", "--quiet", "-d", str(copy)], input=diff, text=True, check=True)
        assert (copy / bug.file).read_bytes() == (minted_pool.source_dir / bug.file).read_bytes()


@pytest.mark.slow
def test_the_minted_pred_names_the_pinned_version(minted_pool):
    done = subprocess.run([str(minted_pool.binary("pred")), "--version"], capture_output=True, text=True, check=True)
    assert VERSION in done.stdout


def _copy(minted_pool, tmp_path: Path) -> Path:
    copy = tmp_path / "pool"
    shutil.copytree(minted_pool.root, copy)
    return copy


@pytest.mark.slow
def test_a_changed_pool_file_is_refused_in_one_line(minted_pool, tmp_path):
    copy = _copy(minted_pool, tmp_path)
    assert load_pool(copy).digest == minted_pool.digest  # an intact copy loads, with the same digest
    bug = minted_pool.manifest.bugs[0]
    (copy / bug.diff).write_text("--- a\n+++ b\n")
    with pytest.raises(PoolError, match=rf"differs from its manifest: {bug.diff}$"):
        load_pool(copy)


@pytest.mark.slow
def test_an_edited_manifest_is_refused_by_its_digest(minted_pool, tmp_path):
    copy = _copy(minted_pool, tmp_path)
    manifest = json.loads((copy / MANIFEST).read_text())
    bug = manifest["bugs"][0]
    bug["exposed"] = bug["probes"] - 1 if bug["exposed"] == bug["probes"] else bug["probes"]  # not as measured
    (copy / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(PoolError, match="does not match its own digest"):
        load_pool(copy)


def test_a_folder_without_a_manifest_and_a_malformed_manifest_are_one_line_errors(tmp_path):
    with pytest.raises(PoolError, match=r"is not a bug pool: it has no pool.json \(make one with `predbench mint`\)"):
        load_pool(tmp_path)
    (tmp_path / MANIFEST).write_text('{"format": 1, "seed": "one"}')
    with pytest.raises(PoolError, match="is not a pool manifest: "):
        load_pool(tmp_path)


@pytest.mark.slow
def test_the_digest_covers_the_bugs_and_files_but_not_the_binaries(minted_pool):
    manifest = minted_pool.manifest
    assert compute_digest(manifest) == manifest.digest
    rebuilt = manifest.model_copy(update={"files": {**manifest.files, "bin/pred": "0" * 64}})
    assert compute_digest(rebuilt) == manifest.digest  # another machine's toolchain: the same pool
    edited = manifest.model_copy(update={"files": {**manifest.files, manifest.bugs[0].diff: "0" * 64}})
    assert compute_digest(edited) != manifest.digest


def predbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_predbench.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bugs", "0"], "--bugs must be at least 1, got 0"),
        (["--seed", "-1"], "--seed must be 0 or more, got -1"),
        (["--pred-version", "0.4.0"], "pred version '0.4.0' is not supported"),
    ],
)
def test_mint_refuses_bad_options_in_one_line(tmp_path, args, message):
    done = predbench("mint", "--out", str(tmp_path / "pool"), *args)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "pool").exists()


def test_mint_never_writes_into_a_folder_that_holds_something(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    done = predbench("mint", "--out", str(tmp_path), "--bugs", "1")
    assert done.returncode == 2 and "is not empty: a pool is written into a new folder" in done.stderr
    assert (tmp_path / "keep.txt").read_text() == "mine"


@pytest.mark.slow
def test_the_build_a_run_stands_on_is_its_pool_and_version_passed_as_values(minted_pool, monkeypatch):
    from pytest_predbench.verify.environment import PredEnvironmentError, checked_record, ground_record

    monkeypatch.setenv(pin.VERSION_ENV, "0.5.0")  # the shell's default: nothing passed as a value reads it
    monkeypatch.setenv("PREDBENCH_BUG_POOL", str(minted_pool.root))  # the variable that once chose a pool
    minted_pred = minted_pool.manifest.files["bin/pred"]
    assert ground_record(minted_pool.version, str(minted_pool.root)).pred_sha256 == minted_pred
    assert ground_record(minted_pool.version, None).pred_sha256 != minted_pred  # no pool: the version's own
    assert ground_record(minted_pool.version, None) == checked_record(VERSION)
    assert checked_record("0.5.0").pred_version == "0.5.0"  # another version: its own build
    with pytest.raises(PredEnvironmentError, match=f"is of pred {minted_pool.version}, not 0.5.0"):
        ground_record("0.5.0", str(minted_pool.root))


@pytest.mark.slow
def test_the_same_version_seed_and_n_mint_the_same_pool_again(minted_pool, tmp_path):
    """Through the command, into a new folder: the builds are found cached by their source's digest, the
    validation and the difficulties are run again, and the digest comes out the same."""
    manifest = minted_pool.manifest
    out = tmp_path / "again"
    done = predbench(
        "mint", "--pred-version", manifest.pred_version, "--seed", str(manifest.seed),
        "--bugs", str(manifest.requested), "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"minted {manifest.requested} bug(s) on pred {manifest.pred_version}" in done.stdout
    assert load_pool(out).digest == minted_pool.digest
    assert f"(digest {minted_pool.digest[:12]})" in done.stdout


def test_the_example_check_names_the_mutated_rule_from_a_panics_place_or_its_backtrace():
    """A mutant whose own canonical example panics breaks `pred create --example` for every rule; the
    panic may be in the library's shared code (the graph), so the rule is found in the backtrace."""
    from pytest_predbench.mint.validate import RULE_FILE

    library = "/cargo/registry/src/predbench-mint/problemreductions-0.6.0"
    panic = (
        f"thread 'main' panicked at {library}/src/topology/graph.rs:142:13:\n"
        "   2: problemreductions::topology::graph::SimpleGraph::new\n"
        "   3: problemreductions::rules::ksatisfiability_minimumvertexcover::<impl ReduceTo<X>>::reduce_to\n"
        "   8: problemreductions::example_db::build_rule_db\n"
    )
    named = {f"src/rules/{file or module}.rs" for file, module in RULE_FILE.findall(panic)}
    assert named == {"src/rules/ksatisfiability_minimumvertexcover.rs"}
    at_place = f"panicked at {library}/src/rules/circuit_sat.rs:354:18:\ncanonical example must be satisfiable"
    assert {f"src/rules/{f or m}.rs" for f, m in RULE_FILE.findall(at_place)} == {"src/rules/circuit_sat.rs"}


@pytest.fixture(scope="module")
def breaker() -> Prober:
    return breaker_build()


@pytest.mark.slow
def test_a_mutant_that_breaks_its_own_example_is_named_and_the_rest_of_its_round_still_validates(breaker):
    """A real screening build of 20 mutants, among them some whose own canonical example fails, which
    breaks `pred create --example` for every rule. Replaying each mutant's own example names a rule
    into ILP whose example's ILP no longer solves, and not a mutant that is a bug elsewhere, which
    is still proven one on that build, the probe taking its examples from the pristine build."""
    pristine = checked_record(VERSION)
    rules = rules_by_file(Path(pristine.pred_path))
    broken = examples_broken(breaker, pristine)
    assert broken is not None and BYSTANDER_FILE not in broken.files
    why = breaks_own_example(rules[BREAKER_FILE], breaker, pristine)
    assert why is not None and "TimetableDesign -> ILP" in why and "`pred solve` fails" in why
    assert breaks_own_example(rules[BYSTANDER_FILE], breaker, pristine) is None
    create = ["create", "--example", "MaximumSetPacking/f64", "--to", "QUBO/f64", "-q"]
    assert subprocess.run([breaker.record.pred_path, *create], capture_output=True).returncode != 0
    assert subprocess.run([breaker.bin / "pred", *create], capture_output=True).returncode == 0
    result = validate(rules[BYSTANDER_FILE], breaker, pristine)
    assert result.certificate is not None, result.reason
    assert outcome_on(result.certificate, breaker.record) is Outcome.ACCEPTED
    assert outcome_on(result.certificate, pristine) is Outcome.REJECTED


@pytest.mark.slow
def test_the_pristine_build_breaks_no_rules_example(library):
    """The contrast: on pred itself (as the minted build), no rule's own example fails, for the two
    rule files above."""
    pristine = checked_record(VERSION)
    prober = Prober(pristine, Path(tempfile.mkdtemp(prefix="predbench-pristine-probe-")))
    for file in (BREAKER_FILE, BYSTANDER_FILE):
        assert breaks_own_example(library["rules"][file], prober, pristine) is None
