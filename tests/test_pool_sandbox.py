"""The sandbox of a session on a bug pool: the agent reads the pool's mutated source at
/src/problemreductions and reaches the minted pred through the gateway, and has no path to the
answer key — the pool's manifest, diffs and validating certificates, the minted binaries
themselves — nor to the pristine build (cargo's registry copy of the source, the pristine pred and
extractor).

The guarantee is checked for the whole class, not for a few paths: (1) every mount of the sandbox
is listed, and none is bound from the pool, cargo's registry or predbench's cache (the source, the
tools and the socket come from the session's own tmpfs; the system from the host's /usr and a few
/etc files, which hold none of them); (2) every file the agent can read outside /usr, /proc, /sys
and /dev is hashed inside the sandbox, and no hash is one of a forbidden file's (while the
mutated rule file's is there, at its place in /src/problemreductions); (3) the same files are
searched for the text that names the pool (its digest, its path, the bug ids, the registry's
path); (4) the sandbox's processes (their environment and command lines, in /proc) name none of it
either, though the harness process that built the sandbox has the pool selected; (5) pred's panics,
relayed by the gateway, name the source as the agent sees it, never where the mint built it; (6)
pred, asked through the gateway to read the pool's files by their host paths, finds none of them.
Each part has its contrast: on the host, in a sandbox that binds the source from the host, or in one
given the whole pool for its source.

Sessions build their sandbox from the plan's PredInfo (run/session.py), which on a pool is the
pool's minted build (tests/test_pool_run.py): the sandbox here is built from the same record.
"""

import json
import re
import subprocess
from pathlib import Path

import pytest

from pytest_predbench.session.bwrap import ETC_FILES
from pytest_predbench.session.sandbox import SCRATCH_DIR, SOURCE_DIR, Sandbox
from pytest_predbench.verify import pin, pool
from pytest_predbench.verify.environment import EnvRecord, checked_record, pool_record, sha256_file
from tests.support.pool_copies import copied_pool
from tests.test_sandbox_attacks import PANICS, _closed, session_sandbox  # noqa: F401 (_closed: the fixture)

pytestmark = pytest.mark.slow  # sandboxes and a sweep of their files: `make test`, not `make check`

OWN_FILESYSTEMS = ("tmpfs", "proc", "devtmpfs", "devpts")
"""Filesystems the sandbox mounts for itself (a new /proc, /dev, /tmp) or from the session's own
tmpfs (the source's copy, the tools, the socket, the scratch, the spool): no host directory."""
SYSTEM = ("/usr/", *(f"/etc/{name}" for name in ETC_FILES))
SKIPPED = ("/proc", "/sys", "/usr", "/dev")
"""Not swept: the kernel's views (part 4 looks at the sandbox's processes) and the host's /usr,
read-only, which part 1 shows holds nothing of the pool or the pristine build."""
SWEEP = (
    "find / " + " -o ".join(f"-path {p}" for p in SKIPPED).join(("\\( ", " \\) -prune -o ")) + "-type f -readable "
    "-print0 | xargs -0 -r sha256sum > /scratch/.sums; wc -l < /scratch/.sums"
)


@pytest.fixture(scope="module", params=["minted", "hand-made"])
def minted(request, tmp_path_factory) -> pool.Pool:
    """The real minted pool (tests/support/pools.py), and the hand-made one (its pred not rebuilt)."""
    if request.param == "minted":
        return request.getfixturevalue("minted_pool")
    return pool.load_pool(copied_pool(tmp_path_factory.mktemp("pools") / "pool"))


def pool_sandbox(record: EnvRecord, state: Path, kind: type[Sandbox] = Sandbox) -> Sandbox:
    """A session's sandbox on `record`, as a session builds it; closed after the test (`_closed`)."""
    return session_sandbox(record, state, kind)


def forbidden_files(minted: pool.Pool) -> dict[str, Path]:
    """What a session on the pool must not read, by what it is: the answer key, the minted binaries
    (reached only through the gateway) and the pristine build, the pristine copy of each mutated file
    included."""
    pristine = checked_record(minted.version)
    files = {"manifest": minted.root / pool.MANIFEST}
    for bug in minted.manifest.bugs:
        files[f"{bug.id} diff"] = minted.root / bug.diff
        files[f"{bug.id} certificate"] = minted.certificate_path(bug)
        files[f"{bug.id} pristine {bug.file}"] = Path(pristine.source_dir) / bug.file
    files["minted pred"] = minted.binary("pred")
    files["minted pred-extract"] = minted.binary("pred-extract")
    files["pristine pred"] = Path(pristine.pred_path)
    files["pristine pred-extract"] = Path(pristine.extractor_path)
    return files


def forbidden_text(minted: pool.Pool) -> dict[str, str]:
    """Text that names the pool or the pristine build: in no file, environment or command line."""
    pristine = checked_record(minted.version)
    text = {
        "pool digest": minted.digest,
        "pool path": str(minted.root),
        "registry source path": pristine.source_dir,
        "predbench cache": str(pin.cache_root()),
    }
    for bug in minted.manifest.bugs:
        text[f"{bug.id} id"] = bug.id
    return text


def sums(sandbox: Sandbox) -> dict[str, set[str]]:
    """sha256 -> the paths inside the sandbox of every file the sweep reads."""
    result = sandbox.run(SWEEP, timeout=300)
    assert result.returncode == 0 and int(result.output.strip()) > 1000, result.output
    found: dict[str, set[str]] = {}
    for line in (sandbox.scratch / ".sums").read_text().splitlines():
        digest, _, path = line.partition("  ")
        found.setdefault(digest, set()).add(path)
    return found


def leaks(sandbox: Sandbox, found: dict[str, set[str]], forbidden: dict[str, Path], text: dict[str, str]) -> dict:
    """What of `forbidden` (by sha256) and `text` the sweep found in the sandbox, and where."""
    leaked: dict[str, object] = {
        what: found[sha] for what, path in forbidden.items() if (sha := sha256_file(path)) in found
    }
    for what, value in text.items():
        hits = sandbox.run(
            f"cut -c67- /scratch/.sums | tr '\\n' '\\0' | xargs -0 -r grep -lF -e '{value}'", timeout=120
        )
        if hits.output.strip():
            leaked[what] = hits.output.split()
    return leaked


def test_the_session_reads_the_pools_mutated_source_and_calls_its_minted_pred(minted, tmp_path):
    sandbox = pool_sandbox(pool_record(minted), tmp_path / "session")
    pristine = Path(checked_record(minted.version).source_dir)
    for bug in minted.manifest.bugs:
        shown = sandbox.run(f"sha256sum {SOURCE_DIR}/{bug.file}", timeout=60).output.split()[0]
        assert shown == sha256_file(minted.source_dir / bug.file) != sha256_file(pristine / bug.file), bug.file
    assert sandbox.run("pred --version", timeout=60).output.strip() == f"pred {minted.version}"
    assert sandbox.gateway.tools == {"pred": minted.binary("pred"), "pred-extract": minted.binary("pred-extract")}
    differs = []
    for bug in minted.manifest.bugs:  # what pred derives inside is what the minted pred derives
        certificate = json.loads(minted.certificate_path(bug).read_text())
        (sandbox.scratch / "source.json").write_text(json.dumps(certificate["source"]))
        to = certificate["target"]["type"]
        done = sandbox.run(f"pred reduce source.json --to {to} -o {bug.id}.json -q", timeout=120)
        made = sandbox.scratch / f"{bug.id}.json"
        inside = (done.returncode, json.loads(made.read_text()) if done.returncode == 0 else None)
        on_host = {name: reduced(binary, sandbox.scratch / "source.json", to, tmp_path) for name, binary in (
            ("minted", minted.binary("pred")), ("pristine", checked_record(minted.version).pred_path))}  # fmt: skip
        assert inside == on_host["minted"], bug.id
        differs += [bug.id] if on_host["minted"] != on_host["pristine"] else []
    if not minted.manifest.mutator.startswith("hand-made"):  # a hand-made pool's pred is not rebuilt
        in_reduce_to = {bug.id for bug in minted.manifest.bugs if bug.function.endswith("::reduce_to")}
        assert in_reduce_to and in_reduce_to <= set(differs), "a reduce_to mutant derives another target"


def reduced(pred: Path | str, source: Path, to: str, where: Path) -> tuple[int, dict | None]:
    """`pred reduce SOURCE --to TO` on the host: its exit code, and its bundle if it made one."""
    out = where / "reduced.json"
    out.unlink(missing_ok=True)
    done = subprocess.run([str(pred), "reduce", str(source), "--to", to, "-o", str(out), "-q"], timeout=120)
    return done.returncode, json.loads(out.read_text()) if done.returncode == 0 else None


def test_no_path_to_the_answer_key_or_the_pristine_build_anywhere_in_the_sandbox(minted, tmp_path):
    record = pool_record(minted)
    sandbox = pool_sandbox(record, tmp_path / "session")
    forbidden = forbidden_files(minted)
    text = forbidden_text(minted)

    # (1) every mount, and what it is bound from: the host's filesystems only for the system
    mounts = [line.split() for line in sandbox.run("cat /proc/self/mountinfo", timeout=60).output.splitlines()]
    from_host = {f[4]: f[3] for f in mounts if f[f.index("-") + 1] not in OWN_FILESYSTEMS}
    assert from_host and all(root == "/usr" or root.startswith(SYSTEM) for root in from_host.values()), from_host
    own = {f[4] for f in mounts if f[f.index("-") + 1] in OWN_FILESYSTEMS}
    assert {SOURCE_DIR, "/scratch", "/predbench/bin", "/predbench/gateway"} <= own, own
    hosts = [minted.root, *(p.parent for p in forbidden.values()), pin.cache_root()]
    hosts.append(Path(checked_record(minted.version).source_dir).parents[1])  # cargo's registry
    system = [Path("/usr"), *(Path("/etc") / name for name in ETC_FILES)]
    inside = [(str(h), str(s)) for h in hosts for s in system if h.resolve().is_relative_to(s.resolve())]
    assert inside == [], inside

    # (2) every readable file outside /usr, /proc, /sys and /dev, by its sha256, and (3) the same
    # files searched for the text that names the pool or the pristine build
    found = sums(sandbox)
    assert leaks(sandbox, found, forbidden, text) == {}
    for bug in minted.manifest.bugs:  # the contrast: the sweep sees the mutated file where the agent reads it
        assert f"{SOURCE_DIR}/{bug.file}" in found[sha256_file(minted.source_dir / bug.file)]

    # (4) the sandbox's processes: their environments and command lines
    seen = sandbox.run("cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline | tr '\\0' '\\n'; env", timeout=60).output
    assert "PATH=/predbench/bin" in seen  # the contrast: the environments were read
    assert {what: value for what, value in text.items() if value in seen} == {}, seen[:2000]

    # (5) pred's panics, relayed by the gateway, name the source as the agent sees it (a minted pred
    # was built on the pool's source, or wherever the mint built it)
    panic = sandbox.run(f"cd /scratch; echo '{PANICS}' > bad.json; pred solve bad.json 2>&1", timeout=60).output
    places = re.findall(r"panicked at (\S+):", panic)
    assert places and all(place.startswith(f"{SOURCE_DIR}/") for place in places), panic[:1000]
    assert {what: value for what, value in text.items() if value in panic} == {}, panic[:1000]

    # (6) pred, through the gateway, given the forbidden files' host paths: refused before pred runs
    # (a file argument outside /scratch, session/scratch_paths.py), and pred itself could not read them
    for what, path in forbidden.items():
        answer = sandbox.run(f"pred inspect {path}", timeout=60).output
        assert f"pred's files must be in {SCRATCH_DIR}" in answer, (what, answer[:500])


def test_the_contrasts_hold_on_the_host_and_in_a_sandbox_bound_from_it(minted, tmp_path):
    """What the sandbox hides exists: the host reads the forbidden files and finds the text in them,
    pred on the host reads them, and a sandbox that binds the pool's source straight from the host
    names the pool in its mountinfo."""
    text = forbidden_text(minted)
    for what, path in forbidden_files(minted).items():
        assert path.is_file() and path.stat().st_size > 0, what
    assert text["pool digest"] in (minted.root / pool.MANIFEST).read_text()
    assert text["pool path"] in minted.root.as_posix()  # the harness knows where the pool is

    class HostBound(Sandbox):
        def options(self, status_fd: int | None = None) -> list[str]:
            args = super().options(status_fd)
            at = next(i for i in range(len(args) - 2) if args[i] == "--ro-bind" and args[i + 2] == SOURCE_DIR)
            args[at + 1] = str(self.source_dir)
            return args

    bound = pool_sandbox(pool_record(minted), tmp_path / "contrast", HostBound)
    assert str(minted.source_dir) in bound.run("cat /proc/self/mountinfo", timeout=60).output
    for path in forbidden_files(minted).values():  # pred on the host reads them (and finds no problem in them)
        read = subprocess.run([str(minted.binary("pred")), "inspect", str(path)], capture_output=True, text=True)
        assert read.returncode != 0 and "No such file" not in read.stderr, (path, read.stderr[:300])


def test_the_sweep_finds_the_answer_key_when_a_sandbox_is_given_the_pool_for_its_source(minted, tmp_path):
    """The contrast of parts (2) and (3): the mistake they guard against — the whole pool bound as the
    source — is caught, every file of the answer key by its hash and the pool's text by the search."""
    record = pool_record(minted).model_copy(update={"source_dir": str(minted.root)})
    sandbox = pool_sandbox(record, tmp_path / "session")
    found = sums(sandbox)
    leaked = leaks(sandbox, found, forbidden_files(minted), forbidden_text(minted))
    answer_key = {"manifest", "minted pred", "minted pred-extract", "pool digest", "minted-01 id"}
    answer_key |= {f"{bug.id} {part}" for bug in minted.manifest.bugs for part in ("diff", "certificate")}
    assert answer_key <= leaked.keys(), leaked
    assert f"{SOURCE_DIR}/{pool.MANIFEST}" in leaked["manifest"]
