"""No host path in a record: a Verdict, with pred's evidence, as recorded (verify/verdict.py, with
the rules of verify/hostpaths.py), on the real pred's real crash and on random text."""

import json
import re
import subprocess
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_predbench.state.certificates import write_certificate_files
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.verify import hostpaths, pin
from pytest_predbench.verify.certificate import load_certificate
from pytest_predbench.verify.environment import EnvRecord
from pytest_predbench.verify.hostpaths import CRATES_DIR, SOURCE_DIR, record_rules, redact_text
from pytest_predbench.verify.pred import PredCall
from pytest_predbench.verify.verdict import Check, Verdict
from pytest_predbench.verify.verifier import verify, verify_file
from tests.support.versions import CALIBRATION_DIR, TEST_VERSION

CRASH = CALIBRATION_DIR / "genuine_kcoloring_to_cliques_crash.json"
PANIC_PLACE = re.compile(r"panicked at (\S+?):(\d+):\d+")


def host_places() -> list[str]:
    """What no record may name: the home, the cache, the temporary directory, the checkout."""
    return [place for place, _ in hostpaths.places()]


def test_a_real_crash_verdict_as_recorded_names_the_library_file_and_no_host_path(env_record: EnvRecord, tmp_path):
    verdict = verify(load_certificate(CRASH), env_record)  # as a run verifies it: by no file name
    assert verdict.accepted and verdict.violation == "crash", verdict.reason
    run = RunDir(tmp_path / "run")
    write_certificate_files(run, "m__s01", [load_certificate(CRASH)], [verdict])
    recorded = run.verdict_file("m__s01", 1).read_text()
    printed = verdict.model_dump_json()  # what `predbench verify --json` prints, and an item record holds
    for text in (recorded, printed):
        assert "/root" not in text and str(Path.home()) not in text and "/tmp/" not in text
        assert str(pin.cache_root()) not in text and "index.crates.io" not in text
        assert not [place for place in host_places() if place in text]
    panics = [
        call.stderr for check in verdict.checks for call in check.evidence if "panicked at" in call.stderr
    ]  # pred's own panic, kept as evidence: the place is the library's file and line, as the agent reads it
    places = [PANIC_PLACE.search(stderr).groups() for stderr in panics]
    assert places and all(file.startswith(f"{SOURCE_DIR}/src/") for file, _ in places), panics
    assert f"{SOURCE_DIR}/src/models/graph/partition_into_cliques.rs" in recorded
    assert (
        f"problemreductions-{TEST_VERSION}/src/rules/kcoloring_partitionintocliques.rs" in verdict.reason
    )  # its frame
    assert Verdict.model_validate_json(recorded).model_dump() == verdict.model_dump()  # read back as written

    # the contrast: the same pred call, run on the host as the verifier runs it, names the host's path
    source = json.loads(CRASH.read_text())["source"]
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "source.json").write_text(json.dumps(source))
        raw = subprocess.run(
            [env_record.pred_path, "reduce", "source.json", "--to", "PartitionIntoCliques/SimpleGraph"],
            cwd=work, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert raw.returncode == 101, raw.stderr
    file, line = PANIC_PLACE.search(raw.stderr).groups()
    assert "/registry/src/" in file and file.startswith("/") and not file.startswith(SOURCE_DIR)
    assert file.endswith(f"problemreductions-{TEST_VERSION}/src/models/graph/partition_into_cliques.rs")
    assert f"{SOURCE_DIR}/src/models/graph/partition_into_cliques.rs:{line}:" in recorded  # the same line


def test_a_verdict_changed_after_it_is_made_is_still_written_without_host_paths():
    place = f"{tempfile.gettempdir()}/predbench-verify-x1/target.json"
    verdict = Verdict(accepted=False, reason="why", checks=[Check(name="rederive", passed=False, detail="d")])
    changed = verdict.model_copy(update={"reason": f"cannot read {place}"})  # a copy skips validation
    assert changed.reason == f"cannot read {place}"  # contrast: in memory, as it was set
    assert json.loads(changed.model_dump_json())["reason"] == "cannot read $TMPDIR/predbench-verify-x1/target.json"
    assert changed.model_dump()["reason"] == "cannot read $TMPDIR/predbench-verify-x1/target.json"


def test_the_name_a_certificate_was_given_is_kept_as_given(env_record: EnvRecord, tmp_path):
    """`predbench verify /tmp/x.json` names that file as typed, wherever its verdict names it."""
    path = tmp_path / "x.json"
    path.mkdir()  # no file to read: the reason names it
    verdict = verify_file(path, env_record)
    assert verdict.certificate == str(path) and json.loads(verdict.model_dump_json())["certificate"] == str(path)
    assert f"cannot read {path}" in verdict.reason and f"cannot read {path}" in verdict.model_dump_json()
    other = tmp_path / "predbench-verify-1" / "target.json"  # the contrast: any other host path is rewritten
    said = Verdict(accepted=False, reason=f"{path} at {other}", certificate=str(path), same_as=str(path))
    assert said.reason == f"{path} at {redact_text(str(other), record_rules())}" and str(other) not in said.reason
    assert json.loads(said.model_dump_json())["reason"] == said.reason


def test_the_verifiers_own_evidence_is_copied_not_changed():
    panic = f"thread 'main' panicked at {Path.home()}/.cargo/registry/src/i/serde-1.0/src/de.rs:3:1:\nboom\n"
    call = PredCall(argv=["pred"], exit_code=101, stdout="", stderr=panic, seconds=0.0)
    verdict = Verdict(accepted=False, reason="why", checks=[Check(name="x", passed=False, detail="d", evidence=[call])])
    assert (
        verdict.checks[0].evidence[0].stderr
        == f"thread 'main' panicked at {CRATES_DIR}/serde-1.0/src/de.rs:3:1:\nboom\n"
    )
    assert call.stderr == panic  # what the verifier read stays as pred wrote it


# -- any text: every host path out, anything else as it was ------------------------------------------------

NAME = st.text(alphabet="abcxyz0123456789._-", min_size=1, max_size=8).filter(lambda s: s not in (".", ".."))
ENDS = st.sampled_from([" ", "\n", "\t", "'", '"', "`", ":", "(", ")", "=", ",", "[", "]", ";"])
OUTERMOST = [place for place in host_places() if not any(place.startswith(f"{other}/") for other in host_places())]
NEAR_MISSES = [near for place in OUTERMOST for near in (f"{place}x", f"{place[:-1]}-{place[-1]}")] + [
    near for place in host_places() for near in (f"a{place}/b", f".{place}")
]
"""No host path, though each holds most of one: a longer name (/tmpx), a relative path (a/tmp/b)."""
FREE = st.lists(
    st.one_of(st.text(alphabet=st.characters(exclude_characters="/"), max_size=10), st.sampled_from(NEAR_MISSES)),
    max_size=4,
).map("".join)
"""Text with no host path: any characters but `/`, and near misses."""


TOKEN_ENDS = st.sampled_from([" ", "\n", "\t", "'", '"', "`", ":"])
"""What ends a path-like token of pred's output: a crate's path starts a token (verify/hostpaths.py)."""


def neutral(place: str) -> tuple[str, str]:
    """The host place a path is under (the innermost), and its neutral name."""
    under = [(p, n) for p, n in hostpaths.places() if place == p or place.startswith(f"{p}/")]
    return max(under, key=lambda found: len(found[0]))


@st.composite
def host_path(draw: st.DrawFn) -> tuple[str, str]:
    """A path on this host in some text, and that text as a record shows it: a path under one of its
    places, or of a crate in a cargo registry (under any of them)."""
    place = draw(st.sampled_from(host_places()))
    if draw(st.booleans()):
        path = "/".join([place, *draw(st.lists(NAME, max_size=3))])
        inside, name = neutral(path)  # a drawn name can make it a deeper place (a checkout under /tmp)
        before, after = draw(ENDS), draw(ENDS)
        return f"{before}{path}{after}", f"{before}{name}{path[len(inside) :]}{after}"
    crate = draw(st.sampled_from(["problemreductions-0.5.0", "serde-1.0.1", "num-2"]))
    shown = SOURCE_DIR if crate.startswith("problemreductions-") else f"{CRATES_DIR}/{crate}"
    before, after = draw(TOKEN_ENDS), draw(ENDS)
    where = f"{place}/.cargo/registry/src/index-{draw(NAME)}/{crate}"
    return f"{before}{where}/src/x.rs:3{after}", f"{before}{shown}/src/x.rs:3{after}"


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(FREE, host_path()), max_size=5), FREE)
def test_every_host_path_in_any_text_is_rewritten_and_nothing_else(parts, tail):
    text = "".join(free + path for free, (path, _) in parts) + tail
    redacted = redact_text(text, record_rules())
    assert redacted == "".join(free + shown for free, (_, shown) in parts) + tail
    assert (redacted == text) == (not parts)  # contrast: a host path changes the text


@settings(max_examples=300, deadline=None)
@given(FREE)
def test_text_without_host_paths_is_left_as_it_is(text):
    assert redact_text(text, record_rules()) == text
