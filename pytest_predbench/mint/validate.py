"""A mutant is a minted bug only when execution proves it: validation, difficulty, confinement.

The search is the random baseline's own probe (session/probe/predbench_probe.py), aimed at the
rules of the mutated file: it makes small instances, runs the round trip on the minted pred and
writes a certificate when one fails. That certificate must then be judged by the verifier twice —
accepted on the minted build, rejected on the pristine one — or the mutant is no bug anyone could
be credited for (an equivalent mutant, a rule past brute force's reach, or a bug the pristine
version already has). Nothing here trusts the probe: the verifier decides, as it does for a model.

Difficulty is the share of random probes that expose the bug: DIFFICULTY_PROBES runs of the
probe with the baseline's allowance per rule (MAX_RULE_CALLS pred calls), each on one of the bug's
rules with its own seed; a probe exposes it when its certificate is accepted on the minted build.
These probes try random variants of pred's canonical example only, never the example itself: it is
the same instance in every probe, so a bug it exposes would count as exposed by all of them, and
every bug the validation found through it would be easy.

Confinement: the validating certificate's source instance is reduced by every other rule from the
same source problem, on both builds, and the target and its brute-force solution must come out
byte for byte the same. A rule that reaches into the mutated one (a composite reduction calling
its `reduce_to`) shows here, and the mutant is dropped.

The probe runs outside the sandbox: it is predbench's own code on predbench's own build, as the
verifier is, with `submit-certificate` a stub that accepts (the certificate stays in its folder).
Its instances may be a session's (the funnel's trials, report/funnel.py), so each run is bounded as
the verifier's pred calls are: memory and file size per process, and its process group killed at
its deadline.
"""

import itertools
import json
import math
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pytest_predbench.session.baseline import MAX_RULE_CALLS, PROBE_TOOL, probe_tools
from pytest_predbench.verify.certificate import CertificateError, load_certificate
from pytest_predbench.verify.environment import EnvRecord
from pytest_predbench.verify.pool import MintedRule
from pytest_predbench.verify.pred import PredLimits
from pytest_predbench.verify.verdict import Outcome
from pytest_predbench.verify.verifier import verify

VALIDATION_SEEDS = 2
VALIDATION_CALLS = 80
VALIDATION_RUNS = 3
"""All the probing one mutant gets (seeds x its rules, in that order, at most this many runs): a file
with many rules is not probed for ever. Counted in runs and pred calls, never in seconds, so that a
mint decides the same on a loaded machine as on a quiet one; the deadlines only stop a probe that hangs."""
VALIDATION_SECONDS = 120.0
DIFFICULTY_PROBES = 8
DIFFICULTY_SECONDS = 90.0
CONFINEMENT_SECONDS = 10
EXAMPLE_SECONDS = 60


PROBE_LIMITS = PredLimits()
"""The memory and file size each process of a probe run may take: the verifier's own per-call limits."""


def _bounded(seconds: float):  # noqa: ANN202 - a preexec_fn
    """The limits every process of a run inherits, set in the probe's child before it execs: memory,
    file size, no core, and CPU seconds no more than the run's deadline (so no process of it computes
    past it, on a machine of any load)."""
    cpu = math.ceil(seconds) + 2

    def limit() -> None:
        for which, value in (
            (resource.RLIMIT_AS, PROBE_LIMITS.memory_bytes),
            (resource.RLIMIT_FSIZE, PROBE_LIMITS.file_size_bytes),
            (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_CPU, cpu),
        ):
            resource.setrlimit(which, (value, value))

    return limit


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


@dataclass
class Validation:
    """What execution showed about one mutant: a validating certificate (None: not a bug) and why."""

    certificate: Path | None
    reason: str
    probes: int = 0
    exposed: int = 0


EXAMPLES_FROM = """#!/bin/sh
# The probe's pred: canonical examples from the pristine build, everything else from the minted one.
case "$1 $2" in "create --example") exec {pristine} "$@";; esac
exec {minted} "$@"
"""


class Prober:
    """The probe, installed in a tools folder with a build's pred and extractor on its PATH.

    With `examples` (the pristine pred), the probe's `pred create --example` is the pristine build's:
    an example's instance is its spec's data, which no candidate mutates, so it is the same on both
    builds — unless a mutant elsewhere in a screening build breaks the examples of every rule, which
    would leave every other mutant of that round to the probe's weaker fallbacks."""

    def __init__(self, record: EnvRecord, workdir: Path, examples: str | None = None):
        self.record = record
        self.workdir = workdir
        self.bin = workdir / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        for name, text in probe_tools().items():
            (self.bin / name).write_text(text)
        (self.bin / PROBE_TOOL).chmod(0o755)
        for name, target in (("pred", record.pred_path), ("pred-extract", record.extractor_path)):
            link = self.bin / name
            link.unlink(missing_ok=True)
            if name == "pred" and examples is not None:
                link.write_text(EXAMPLES_FROM.format(pristine=shlex.quote(examples), minted=shlex.quote(target)))
                link.chmod(0o755)
            else:
                link.symlink_to(target)
        stub = self.bin / "submit-certificate"
        stub.write_text("#!/bin/sh\nexit 0\n")
        stub.chmod(0o755)
        self.rules = self._catalogue()
        self.runs = itertools.count(1)

    def _run(self, *args: str, timeout: float) -> dict:
        """One probe run, bounded as the verifier's calls are: every process of it (the probe, each
        pred it starts) under PROBE_LIMITS' memory and file-size limits, and the whole process group
        killed at the deadline. Its instances can be a session's (report/funnel.py), so hostile."""
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self.workdir)}
        argv = [sys.executable, str(self.bin / PROBE_TOOL), *args]
        with subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=self.workdir,
            start_new_session=True,
            preexec_fn=_bounded(timeout + 30),
        ) as proc:
            try:
                stdout, stderr = proc.communicate(timeout=timeout + 30)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return {"stopped": "killed"}
            finally:
                _kill_group(proc)  # a pred the probe left behind goes with it
        line = next((x for x in stdout.splitlines() if x.startswith("PROBE ")), None)
        return json.loads(line[len("PROBE ") :]) if line else {"stopped": f"probe failed: {stderr[-200:]}"}

    def _catalogue(self) -> list[dict]:
        out = self.workdir / "catalogue.json"
        self._run("catalogue", str(out), timeout=60)
        return json.loads(out.read_text())["rules"]

    def index(self, rule: MintedRule) -> int | None:
        for n, entry in enumerate(self.rules):
            if all(
                entry[end]["name"] == ref.name and entry[end]["variant"] == (ref.variant or {})
                for end, ref in (("source", rule.source), ("target", rule.target))
            ):
                return n
        return None

    def probe(
        self,
        index: int,
        seed: int,
        calls: int,
        seconds: float,
        variants_only: bool = False,
        instance: Path | None = None,
    ) -> Path | None:
        """One probe run on one rule: the certificate it wrote, if any (`instance`: the round trip of
        that instance only)."""
        out = self.workdir / f"run-{next(self.runs)}"
        rules = self.workdir / "catalogue.json"
        args = ["rule", "--rules", str(rules), "--index", str(index), "--seed", str(seed)]
        args += ["--calls", str(calls), "--deadline", str(seconds), "--out", str(out)]
        args += ["--variants-only"] if variants_only else []
        args += ["--instance", str(instance)] if instance is not None else []
        summary = self._run(*args, timeout=seconds)
        found = out / f"rule-{index}" / "certificate.json"
        return found if summary.get("submitted") and found.is_file() else None


RULE_FILE = re.compile(r"src/rules/([A-Za-z0-9_]+)\.rs|problemreductions::rules::([A-Za-z0-9_]+)::")
"""A rule's file in a panic's location, or its module in a backtrace's frame."""


def _spec(problem: dict) -> str:
    variant = problem.get("variant") or {}
    return "/".join([problem["name"], *(variant[k] for k in sorted(variant))])


@dataclass
class Breakage:
    """pred's canonical examples fail on the minted build and not on the pristine one."""

    files: set[str]
    """The rule files the panic names (its place, or a frame of its backtrace)."""
    solving_ilp: bool
    """The panic came from solving an example's integer program (`rule_example_via_ilp`): the rule
    that built it had returned already, so no frame names it, but it is a rule into ILP."""


def examples_broken(minted: Prober, pristine: EnvRecord, canaries: int = 2) -> Breakage | None:
    """Whether pred builds its canonical examples on the minted build as on the pristine one (None),
    or what the panic says. Every `pred create --example` builds the examples of all rules at once,
    so one mutant whose own example panics breaks every rule's: a change outside its rule, which
    must not reach a pool (breaks_own_example names the culprits)."""
    with tempfile.TemporaryDirectory(prefix="predbench-canary-") as tmp:
        for entry in minted.rules[:canaries]:
            args = ["create", "--example", _spec(entry["source"]), "--to", _spec(entry["target"]), "-q"]
            env = {"PATH": "/usr/bin:/bin", "RUST_BACKTRACE": "1"}
            ours = subprocess.run([minted.record.pred_path, *args], capture_output=True, text=True, cwd=tmp, env=env)
            theirs = subprocess.run([pristine.pred_path, *args], capture_output=True, text=True, cwd=tmp, env=env)
            if ours.returncode != 0 and theirs.returncode == 0:
                files = {f"src/rules/{file or module}.rs" for file, module in RULE_FILE.findall(ours.stderr)}
                return Breakage(files, "rule_example_via_ilp" in ours.stderr)
    return None


def _example_chain(pred: str, target: dict, work: Path, label: str) -> bool | str:
    """True when the example in work/source.json reduces along work/via.json (and, into ILP, is solved
    and mapped back), else which step failed."""
    bundle = f"bundle-{label}.json"
    steps = [["reduce", "source.json", "--via", "via.json", "-q", "-o", bundle]]
    if target["name"] == "ILP":
        steps.append(["solve", bundle, "-q"])
    for step in steps:
        done = _pred_output(pred, step, work, EXAMPLE_SECONDS)
        if done is None or done[0] != 0:
            return f"`pred {step[0]}` {'ran out of time' if done is None else 'fails'}"
    return True


def breaks_own_example(rules: list[MintedRule], minted: Prober, pristine: EnvRecord) -> str | None:
    """Why the mutant breaks its own rule's canonical example (None: it does not).

    pred builds the canonical examples of all rules at once: each is its rule's `reduce_to` on a fixed
    instance, and a rule into ILP solves that ILP and extracts a solution too. A mutant whose own
    example panics there breaks `pred create --example` for every rule — a change outside its rule,
    and one that hides whichever other mutant breaks it too. So each mutant's example is replayed on
    its own: the pristine build writes the example's source instance, and the minted build must
    reduce it (and, into ILP, solve it back) wherever the pristine build can. A call out of time on
    the minted build only counts when the pristine one finished."""
    with tempfile.TemporaryDirectory(prefix="predbench-example-") as tmp:
        work = Path(tmp)
        for rule in rules:
            index = minted.index(rule)
            if index is None:
                continue
            entry = minted.rules[index]
            src, dst = entry["source"], entry["target"]
            create = ["create", "--example", _spec(src), "--to", _spec(dst), "-q", "-o", "source.json"]
            made = _pred_output(pristine.pred_path, create, work, EXAMPLE_SECONDS)
            if made is None or made[0] != 0:
                continue
            (work / "via.json").write_text(json.dumps({"path": [{"from": src, "to": dst}]}))
            if _example_chain(pristine.pred_path, dst, work, "pristine") is not True:
                continue
            failed = _example_chain(minted.record.pred_path, dst, work, "minted")
            if failed is not True:
                return f"breaks its rule's canonical example ({src['name']} -> {dst['name']}: {failed})"
    return None


def outcome_on(certificate: Path, record: EnvRecord) -> Outcome:
    try:
        cert = load_certificate(certificate)
    except CertificateError:
        return Outcome.REJECTED
    return verify(cert, record).outcome


def validate(rules: list[MintedRule], minted: Prober, pristine: EnvRecord) -> Validation:
    """A certificate accepted on the minted build and rejected on the pristine one, or why not."""
    indices = [i for i in (minted.index(rule) for rule in rules) if i is not None]
    if not indices:
        return Validation(None, "none of its rules carries a solution back in pred's catalogue")
    seen = []
    runs = [(seed, index) for seed in range(VALIDATION_SEEDS) for index in indices][:VALIDATION_RUNS]
    for seed, index in runs:
        found = minted.probe(index, seed, VALIDATION_CALLS, VALIDATION_SECONDS)
        if found is None:
            continue
        on_minted = outcome_on(found, minted.record)
        on_pristine = outcome_on(found, pristine) if on_minted is Outcome.ACCEPTED else None
        if on_minted is Outcome.ACCEPTED and on_pristine is Outcome.REJECTED:
            return Validation(found, "accepted on the minted build, rejected on the pristine one")
        seen.append(
            f"{on_minted.value} on the minted build" + (f", {on_pristine.value} on the pristine" if on_pristine else "")
        )
    if seen:
        return Validation(None, f"no certificate both accepted minted and rejected pristine ({'; '.join(seen[:2])})")
    return Validation(None, f"no probe exposed it ({len(runs)} probe run(s) of {VALIDATION_CALLS} pred calls)")


def difficulty(rules: list[MintedRule], minted: Prober) -> tuple[int, int]:
    """(exposed, probes): how many of DIFFICULTY_PROBES baseline-sized probes expose the bug."""
    indices = [i for i in (minted.index(rule) for rule in rules) if i is not None]
    exposed = 0
    for k in range(DIFFICULTY_PROBES):
        index = indices[k % len(indices)]
        found = minted.probe(index, 1000 + k, MAX_RULE_CALLS, DIFFICULTY_SECONDS, variants_only=True)
        exposed += found is not None and outcome_on(found, minted.record) is Outcome.ACCEPTED
    return exposed, DIFFICULTY_PROBES


def _pred_output(
    pred: str, args: list[str], cwd: Path, seconds: float = CONFINEMENT_SECONDS + 10
) -> tuple[int, str] | None:
    """(exit code, stdout) of one pred call; None when it ran out of time, ours or pred's own
    `--timeout` (no comparison then: how far a solver gets in seconds depends on the machine's load)."""
    try:
        done = subprocess.run([pred, *args], capture_output=True, text=True, cwd=cwd, timeout=seconds)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0 and "timed out" in done.stderr:
        return None
    return done.returncode, done.stdout


def _key(source: dict, target: dict) -> str:
    return json.dumps(
        [source["name"], source.get("variant") or {}, target["name"], target.get("variant") or {}], sort_keys=True
    )


def _round_trip(pred: str, work: Path) -> tuple | None:
    """The one-step reduction of work/source.json along work/via.json, and its brute-force solution."""
    reduced = _pred_output(pred, ["reduce", "source.json", "--via", "via.json", "-q"], work)
    if reduced is None:
        return None
    (work / "bundle.json").write_text(reduced[1])
    timeout = ["--timeout", str(CONFINEMENT_SECONDS)]
    solved = _pred_output(pred, ["solve", "bundle.json", "--solver", "brute-force", *timeout], work)
    return None if solved is None else (reduced, solved)


def leaks(certificate: Path, minted: Prober, pristine: EnvRecord, minted_rules: list[MintedRule]) -> list[str]:
    """The other rules from the certificate's source problem whose output on its instance differs
    between the builds (empty: the mutant stays inside its rules). A call that runs out of time on
    either build decides nothing."""
    source = load_certificate(certificate).source.model_dump(mode="json")
    mine = {_key(r.source.model_dump(), r.target.model_dump()) for r in minted_rules}
    differing = []
    with tempfile.TemporaryDirectory(prefix="predbench-confine-") as tmp:
        work = Path(tmp)
        (work / "source.json").write_text(json.dumps(source))
        for entry in minted.rules:
            src, dst = entry["source"], entry["target"]
            if src["name"] != source["type"] or src["variant"] != source.get("variant") or _key(src, dst) in mine:
                continue
            (work / "via.json").write_text(json.dumps({"path": [{"from": src, "to": dst}]}))
            ours, theirs = _round_trip(minted.record.pred_path, work), _round_trip(pristine.pred_path, work)
            if ours is not None and theirs is not None and ours != theirs:
                differing.append(f"{src['name']} -> {dst['name']}")
    return differing
