"""The independent verifier: a certificate is a bug only when the pinned library itself says so.

It reads the certificate and runs pred and the extractor (pred-extract, built from the same
pinned library: verify/extractor.py); it never imports the agent stack and never takes a claim on
the certificate's word. A certificate names ONE rule, and is judged on that rule — not on which
optimum pred's solver happens to enumerate first. The steps, each recorded as a Check with the
calls it rests on:

1. ``instance``: the source is an instance the library would build (its constructors' own rules,
   run by the extractor, every graph rebuilt through its own constructor), its literals are
   literals, and its numbers leave room for pred's sums (verify/instances.py). A rule fed an
   impossible input proves nothing. Problem names are resolved as pred resolves them (`MVC`).
2. ``rederive``: ``pred reduce`` the source along the one-step path source -> target (a ``--via``
   file the verifier writes); the result must equal the certificate's target. No direct rule, or a
   route through intermediates, is refused with the hop to certify instead: one root cause on one
   instance is one rule, never one "bug" per path through it. A panic here is a `crash` when the
   library's replay of the reduction (the extractor) panics inside the rule's own code.
3. ``solutions``: every listed solution is evaluated by pred (an empty one, for a problem without
   variables, by the extractor) and again by the extractor, whose arithmetic is overflow-checked:
   an integer overflow, which pred wraps silently, rejects the certificate. The target solution
   must be valid; the source solution invalid for unsound_extraction and valid otherwise; the
   better source solution valid and proved strictly better (verify/evaluation.py compare, with the
   Precision verify/exactness.py derives for the instance from the library's source).
4. ``extraction``: the extractor re-derives the target from the source (it must match) and maps
   the certificate's target solution back; the result must be the certificate's source_solution.
   Any qualifying target solution will do — hand-built or a solver's. A panic here is a `crash`
   only inside the rule's own code: its reduce_to or extract_solution, with a frame of its file
   under src/rules/ on the stack (a constructor the rule calls counts: the rule built that input;
   so does a rule's deliberate assert on its own size limits). A panic loading the source, in a
   problem's evaluation, or an integer overflow, is named as such and rejected.
5. ``violation``: the claim, on trusted evidence only.
   - unsound_extraction: the extraction is invalid. An optimization target's solution must be
     optimal (its value is the target's optimum), and then the source must have a valid solution
     at all (from an unsatisfiable formula reduced to MaximumIndependentSet every extraction is
     invalid and no rule is wrong); a yes/no target's witness of a source without one is itself
     the bug (the reduction is unsound).
   - suboptimal_extraction (optimization source): the target solution is optimal (an optimization
     target) or any valid solution (a yes/no target: every witness must map back to an optimum);
     its extraction is valid; better_source_solution beats it.
   - incomplete_reduction: the source has a valid solution and the target none.
   - crash: the library panicked reducing the source (step 2) or mapping a valid target solution
     back (step 4).
   "Optimal" is proved equality with the optimum, which needs every evaluation of the target exact
   (verify/exactness.py): a value provably above it is not optimal, anything else is undecided. Every
   solver solution is re-evaluated for overflow.
   "Optimal" and "no solution" are pred's brute force's word only while it can be trusted: it
   counts configurations in a machine word and silently answers "no solution" at 2^64 or more, so
   its answer counts only when the extractor's configuration space is smaller; pred's ILP, reached
   through further reductions, cross-checks an optimum where it applies and must agree, and is
   the only word on "no solution" past brute force's reach.

Bad input never raises: it becomes a rejected Verdict with a one-line reason — whatever the
Certificate object holds, even one changed after validation. A check that a call could not finish
within the verifier's own limits, or a comparison that exact arithmetic cannot decide (Undecided),
makes the Verdict `inconclusive` (never a rejection nor an acceptance: verify/reach.py), and an
exception inside the checks makes it `error` (a fault
of predbench, never the certificate's: verify/verdict.py). Only a broken environment raises
(PredEnvironmentError, and LimitError when limits cannot be set): that is no verdict on any
certificate. Input over the documented size limits is rejected before anything runs; every call
runs under PredLimits (CPU time, a wall-clock backstop, memory, file size, its own process group)
in a private temporary directory.
"""

import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_predbench.verify.certificate import (
    MAX_CERTIFICATE_BYTES,
    Certificate,
    CertificateError,
    Violation,
    certificate_problem,
    load_certificate,
    parse_certificate,
    step,
)
from pytest_predbench.verify.environment import EnvRecord, PredEnvironmentError, check_pred, checked_record
from pytest_predbench.verify.evaluation import Comparison, Evaluation, Precision, compare
from pytest_predbench.verify.exactness import library_arithmetic, precision
from pytest_predbench.verify.extractor import Extraction, Extractor, ExtractorFailure
from pytest_predbench.verify.graph import ListingError, rule_table, spec
from pytest_predbench.verify.instances import arithmetic_problem, literal_problem
from pytest_predbench.verify.pred import (
    Budget,
    LimitError,
    Pred,
    PredCall,
    PredLimits,
    _clip,
    _command,
    limit_hit,
    panic_message,
    pred_failure,
    stopped_by_limit,
)
from pytest_predbench.verify.reach import verifier_limits
from pytest_predbench.verify.verdict import Check, Outcome, Verdict

DEFAULT_LIMITS = verifier_limits()
"""Every call's limits, derived from what the session prompt promises the agent (verify/reach.py)."""
ENUMERATION_LIMIT = 2**64
"""Brute force counts configurations in a usize: at this many it enumerates none at all."""

# Check names, in the order they run; calibration cases name the one expected to reject.
CERTIFICATE, INSTANCE, REDERIVE, SOLUTIONS, EXTRACTION, VIOLATION = (
    "certificate",
    "instance",
    "rederive",
    "solutions",
    "extraction",
    "violation",
)
MAX_VALUE = 2**64 - 1
"""pred reads a configuration's values as machine words: a larger one is never in any domain. The
bound also keeps `--config` within the kernel's limit on one argument (128 KiB) at the longest
allowed solution."""
MAX_SPEC_LENGTH = 1000
_NAME = re.compile(r"[A-Za-z0-9_][\x21-\x7e]*")
"""pred's problem and variant names are printable ASCII; anything else could not even be passed
as an argument (a NUL byte, a lone surrogate), would read as an option (a leading `-`) or would
break a one-line reason (a newline)."""


class Rejected(Exception):
    """A check failed; carries the check's name, its one-line detail and the calls it rests on.

    `undecided`: the check could not decide because one of those calls was stopped by the
    verifier's own limits (time, CPU, memory) — an inconclusive verification, not a rejection. By
    default it is so whenever a call of the evidence was stopped; a check that decided in spite of
    such a call (pred's ILP answered where brute force ran out of time) says `undecided=False`."""

    def __init__(
        self, check: str, detail: str, evidence: list[PredCall] | None = None, *, undecided: bool | None = None
    ):
        super().__init__(detail)
        self.check = check
        self.detail = detail
        self.evidence = evidence or []
        self.undecided = any(map(stopped_by_limit, self.evidence)) if undecided is None else undecided


class Undecided(Rejected):
    """A comparison the claim rests on that exact arithmetic cannot decide (a near-tie of inexact
    float values, a value with no rigorous bound): the claim is not proved, and not disproved."""

    def __init__(self, check: str, detail: str, evidence: list[PredCall] | None = None):
        super().__init__(check, detail, evidence, undecided=True)


class Confirmed(Exception):
    """The claim is proved before the last step (a crash): its one-line reason and evidence."""

    def __init__(self, check: str, reason: str, evidence: list[PredCall]):
        super().__init__(reason)
        self.check = check
        self.reason = reason
        self.evidence = evidence


def _configs(values: list[int]) -> str:
    return ",".join(str(v) for v in values)


def _show(values: list[int], most: int = 16) -> str:
    """A solution for a one-line reason: long ones are cut, with their length."""
    if len(values) <= most:
        return f"[{_configs(values)}]"
    return f"[{_configs(values[:most])},...] ({len(values)} values)"


def canonical(value: Any) -> Any:
    """A JSON value in a form where equal values compare equal: 1 == 1.0, true != 1, key order ignored."""
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return ("number", int(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return ("number", value)
    return value


def first_difference(claimed: Any, derived: Any, where: str) -> str:
    """Where two JSON values first differ, e.g. `data.budget: 2 here, 3 from pred`."""
    a, b = canonical(claimed), canonical(derived)
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{where}{step(key)}: {'missing' if key not in a else 'extra'} in the certificate"
            if a[key] != b[key]:
                return first_difference(claimed[key], derived[key], f"{where}{step(key)}")
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} entries in the certificate, {len(b)} from pred"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return first_difference(claimed[i], derived[i], f"{where}[{i}]")
    shown = [json.dumps(v)[:80] for v in (claimed, derived)]
    return f"{where}: {shown[0]} in the certificate, {shown[1]} from pred"


def _label(type_name: str, variant: dict[str, str]) -> str:
    inner = ",".join(f"{k}={v}" for k, v in sorted(variant.items()))
    return f"{type_name}{{{inner}}}" if inner else type_name


STAGES = {
    "load_source": "loading the source",
    "reduce": "reducing the source",
    "serialize_target": "writing the derived target",
    "load_target": "loading the derived target back",
    "evaluate_target": "in the target problem's evaluation",
    "extract_solution": "mapping the target solution back",
    "evaluate_source": "in the source problem's evaluation",
}
"""The extractor's stages (verify/extractor/README.md), as the place a panic happened."""


def _not_the_rule(exc: ExtractorFailure) -> str:
    """Why a panic of the library is no crash of the rule: where it happened instead."""
    where = STAGES.get(exc.stage or "", "in the library")
    if exc.stage in ("reduce", "extract_solution"):
        where += ", but with no frame of the rule's own code (src/rules/) on the stack"
    return (
        f"the library panics {where} ({exc.message}): not in the rule's reduce_to or extract_solution, so "
        "not a crash of the rule"
    )


def _compared(found: Precision) -> str:
    """How two values were compared, for a reason."""
    if found.exact:
        return f"compared exactly: {found.why}"
    if found.bound is not None:
        return f"{found.why} ({float(found.bound):.3g}): only a gap over twice it is decided"
    return found.why


class _Verification:
    """One certificate against one pred and extractor, in one private working directory."""

    def __init__(self, cert: Certificate, pred: Pred, extractor: Extractor, workdir: Path, arithmetic: dict):
        self.cert = cert
        self.arithmetic = arithmetic
        """Problem name -> what its evaluation does, from the library's source (verify/exactness.py):
        required, since without it every float comparison would be undecided."""
        self.pred = pred
        self.extractor = extractor
        self.workdir = workdir
        self.checks: list[Check] = []
        self.path: list[str] = []
        self.rule: str | None = None
        self.bundle: dict | None = None
        self.unproven_optimum = False
        """The target's optimum is pred's ILP's answer alone (brute force was cut short): it can
        disprove a claimed optimum, never prove one."""

    # -- calls, with their output kept as evidence -----------------------------------------------

    def _write(self, name: str, value: Any) -> str:
        (self.workdir / name).write_text(json.dumps(value))
        return name

    def _run(self, *args: str) -> PredCall:
        return self.pred.run(*args, cwd=self.workdir)

    def _read_output(self, check: str, call: PredCall, out: str) -> tuple[PredCall, dict]:
        try:
            text = (self.workdir / out).read_text()
            data = json.loads(text)
        except (OSError, ValueError) as exc:
            raise Rejected(check, f"`{_command(call)}` wrote no readable JSON ({exc})", [call]) from None
        call = call.model_copy(update={"stdout": _clip(text)})
        if not isinstance(data, dict):
            raise Rejected(check, f"`{_command(call)}` wrote {type(data).__name__}, not a JSON object", [call])
        return call, data

    def _evaluate(self, problem_file: str, problem: dict, label: str, config: list[int]) -> tuple[Evaluation, PredCall]:
        """pred's evaluation; an empty configuration (a problem without variables) goes to the
        extractor, as `pred evaluate` cannot take one."""
        if not config:
            try:
                text, call = self.extractor.evaluate(problem, config, self.workdir)
            except ExtractorFailure as exc:
                raise Rejected(SOLUTIONS, f"{label} []: {exc.message}", [exc.call]) from None
            return Evaluation.parse(text), call
        call = self._run("evaluate", problem_file, "--config", _configs(config))
        if not call.ok:
            raise Rejected(SOLUTIONS, f"{label} {_show(config)}: {pred_failure(call, self.pred.limits)}", [call])
        try:
            result = json.loads(call.stdout)["result"]
        except (ValueError, KeyError, TypeError):
            raise Rejected(SOLUTIONS, f"`{_command(call)}` printed no result", [call]) from None
        return Evaluation.parse(str(result)), call

    def _no_overflow(self, check: str, label: str, problem: dict, config: list[int], evidence: list[PredCall]) -> None:
        """Evaluate `config` again in the extractor, whose arithmetic is overflow-checked: pred wraps an
        overflowing sum or product silently (weights near 2^31 once made a set of two evaluate to
        Max(-2)), and no value computed past one can be trusted."""
        try:
            _, call = self.extractor.evaluate(problem, config, self.workdir)
        except ExtractorFailure as exc:
            if exc.overflowed:
                raise Rejected(
                    check,
                    f"integer overflow: evaluating {label} {_show(config)} overflows the library's arithmetic "
                    f"({exc.message}); pred wraps it silently, so its value cannot be trusted: use smaller numbers",
                    [*evidence, exc.call],
                ) from None
            if stopped_by_limit(exc.call):  # the check itself was cut short: nothing is shown either way
                raise Rejected(
                    check,
                    f"the overflow check of {label}: {limit_hit(exc.call, self.pred.limits)}",
                    [*evidence, exc.call],
                ) from None
            return  # any other failure: pred's own evaluation of it has been judged already
        evidence.append(call)

    def _pass(self, name: str, detail: str, evidence: list[PredCall]) -> None:
        self.checks.append(Check(name=name, passed=True, detail=detail, evidence=evidence))

    # -- 1. the source instance --------------------------------------------------------------

    def check_instance(self) -> None:
        cert = self.cert
        for role, problem in (("source", cert.source), ("target", cert.target)):
            name = spec(problem.type, problem.variant)
            if len(name) > MAX_SPEC_LENGTH or not all(_NAME.fullmatch(p) for p in name.split("/")):
                shown = json.dumps(name)
                raise Rejected(
                    INSTANCE,
                    f"the {role}'s type and variant ({shown[:80]}{'...' if len(shown) > 80 else ''}) are not a "
                    "problem pred can know: its names are printable ASCII, not starting with `-`, "
                    f"at most {MAX_SPEC_LENGTH} characters",
                )
        source = json.loads(cert.source.to_pred_json())
        self._write("source.json", source)
        for problem in (literal_problem(source, "source"), arithmetic_problem(source, "source")):
            if problem:
                raise Rejected(INSTANCE, f"not an instance that shows anything about a rule: {problem}")
        try:
            validity, call = self.extractor.validate(source, self.workdir)
        except ExtractorFailure as exc:
            why = f"the source is not a problem the library loads: {exc.message}"
            raise Rejected(INSTANCE, why, [exc.call]) from None
        if not validity.valid:
            raise Rejected(
                INSTANCE, f"the source is not a valid instance by the library's own rules: {validity.reason}", [call]
            )
        evidence = [call, *self._resolve_aliases()]
        how = f"{validity.constructor} accepts it" if validity.checked else f"no constructor check: {validity.reason}"
        self._pass(INSTANCE, f"the source is a valid instance ({how})", evidence)

    def _resolve_aliases(self) -> list[PredCall]:
        """The certificate with its problem names as pred resolves them (`MVC`, `mvc` ->
        MinimumVertexCover): pred accepts an alias wherever it takes a name, so a certificate may
        use one; every later step, and the verdict, use the canonical name."""
        cert = self.cert
        names = [cert.source.type, cert.target.type]
        try:
            resolved, call = self.extractor.canonical(names, self.workdir)
        except ExtractorFailure as exc:
            raise Rejected(INSTANCE, f"the problem names cannot be resolved: {exc.message}", [exc.call]) from None
        if resolved != names:
            self.cert = cert.model_copy(
                update={
                    "source": cert.source.model_copy(update={"type": resolved[0]}),
                    "target": cert.target.model_copy(update={"type": resolved[1]}),
                }
            )
            self._write("source.json", json.loads(self.cert.source.to_pred_json()))
        return [call]

    # -- 2. one rule: re-derive the target ---------------------------------------------------

    def rederive(self) -> None:
        cert = self.cert
        source = {"name": cert.source.type, "variant": cert.source.variant}
        target = {"name": cert.target.type, "variant": cert.target.variant}
        self._write("via.json", {"path": [{"from": source, "to": target, "step": 1}], "steps": 1})
        self.rule = f"{cert.source.type} -> {cert.target.type}"
        self.path = [spec(cert.source.type, cert.source.variant), spec(cert.target.type, cert.target.variant)]
        call = self._run("reduce", "source.json", "--via", "via.json", "-o", "bundle.json", "-q")
        panic = panic_message(call)
        if panic is not None:
            self._attribute(
                call, f"pred panics reducing the source to {_label(cert.target.type, cert.target.variant)}: {panic}"
            )
        if not call.ok:
            raise Rejected(REDERIVE, self._not_one_rule(call), [call])
        call, bundle = self._read_output(REDERIVE, call, "bundle.json")
        derived = bundle.get("target")
        if not isinstance(derived, dict) or len(bundle.get("path") or []) != 2:
            raise Rejected(REDERIVE, f"`{_command(call)}` wrote no one-step bundle (target and path)", [call])
        claimed = json.loads(cert.target.to_pred_json())
        for field in ("type", "variant", "data"):
            if canonical(derived.get(field)) != canonical(claimed[field]):
                raise Rejected(
                    REDERIVE,
                    f"the certificate's target {field} differs from what `pred reduce` derives "
                    f"({first_difference(claimed[field], derived.get(field), 'target.' + field)})",
                    [call],
                )
        problem = arithmetic_problem(derived, "target")
        if problem:
            raise Rejected(REDERIVE, f"{problem} (they come from the source's)", [call])
        self.bundle = bundle
        self._write("target.json", derived)
        self._pass(REDERIVE, f"pred derives the certificate's target by the one rule {self.rule}", [call])

    def _not_one_rule(self, failed: PredCall) -> str:
        """Why there is no one-step reduction: pred's own word, and the route pred would take."""
        cert = self.cert
        edge = f"{_label(cert.source.type, cert.source.variant)} -> {_label(cert.target.type, cert.target.variant)}"
        why = pred_failure(failed, self.pred.limits)
        routed = self._run("reduce", "source.json", "--to", spec(cert.target.type, cert.target.variant), "-q")
        try:
            steps = json.loads(routed.stdout)["path"] if routed.ok else []
            hops = [_label(s["name"], s.get("variant") or {}) for s in steps]
        except (ValueError, KeyError, TypeError):
            hops = []
        if len(hops) > 2:
            last = steps[-2]
            return (
                f"{edge} is not one rule: pred reaches the target in {len(hops) - 1} steps "
                f"({' -> '.join(hops)}): a certificate names one rule, so certify one step, e.g. the last, "
                f"from the instance `pred reduce source.json --to {spec(last['name'], last.get('variant') or {})}` "
                "derives"
            )
        try:
            hint = rule_table(self.pred.binary).names_no_rule(self.path[0], self.path[1])
        except ListingError:
            hint = None
        return f"there is no one-step rule {edge} to judge ({why}){'; ' + hint if hint else ''}"

    def _attribute(self, call: PredCall, what: str) -> None:
        """pred panicked reducing the source: a crash of the rule only when the library's replay of
        the reduction (the extractor, which reports where a panic happens) panics while the rule's
        own code runs — not while the source loads, nor outside the library."""
        cert = self.cert
        path = [{"name": p.type, "variant": p.variant} for p in (cert.source, cert.target)]
        source = json.loads((self.workdir / "source.json").read_text())
        try:
            _, replay = self.extractor.reduce(source, path, self.workdir)
        except ExtractorFailure as exc:
            if exc.in_rule:
                self._crashed(REDERIVE, f"{what}; in the rule's own code ({exc.panic.rule_frame})", [call, exc.call])
            why = _not_the_rule(exc) if exc.panicked else f"the library's replay of the rule fails ({exc.message})"
            raise Rejected(REDERIVE, f"{what}; {why}", [call, exc.call]) from None
        raise Rejected(
            REDERIVE,
            f"{what}; but the library's replay of the rule does not panic: the panic is outside the rule's code",
            [call, replay],
        )

    def _crashed(self, check: str, what: str, evidence: list[PredCall]) -> None:
        """A panic in the rule's own code: the proof of a crash claim, and a rejection of any other."""
        if self.cert.violation is Violation.CRASH:
            raise Confirmed(check, f"crash confirmed: {what}", evidence)
        raise Rejected(check, f"{what}; that is a crash of the rule: submit it as a `crash` certificate", evidence)

    # -- 3. the listed solutions -------------------------------------------------------------

    def check_solutions(self) -> dict[str, Evaluation]:
        cert, seen, evidence = self.cert, {}, []
        for label in ("target_solution", "source_solution", "better_source_solution"):
            config = getattr(cert, label) or []
            huge = next((i for i, v in enumerate(config) if v > MAX_VALUE), None)
            if huge is not None:
                raise Rejected(
                    SOLUTIONS,
                    f"{label}[{huge}] is a {config[huge].bit_length()}-bit number, beyond any of pred's domains "
                    "(values are below 2^64)",
                )

        def evaluate(label: str, problem_file: str, config: list[int]) -> Evaluation:
            problem = json.loads((self.workdir / problem_file).read_text())
            found, call = self._evaluate(problem_file, problem, label, config)
            evidence.append(call)
            if config:  # an empty one was evaluated by the extractor already
                self._no_overflow(SOLUTIONS, label, problem, config, evidence)
            if not found.understood:
                why = f"pred evaluates {label} as {found}: only Or, Max and Min are handled"
                raise Rejected(SOLUTIONS, why, evidence)
            seen[label] = found
            return found

        if cert.target_solution is not None:
            target = evaluate("target_solution", "target.json", cert.target_solution)
            if not target.valid:
                raise Rejected(
                    SOLUTIONS, f"target_solution evaluates to {target}: not a valid target solution", evidence
                )
        if cert.source_solution is not None:
            source = evaluate("source_solution", "source.json", cert.source_solution)
            if cert.violation is Violation.UNSOUND_EXTRACTION and source.valid:
                why = f"source_solution evaluates to {source}, a valid solution: nothing unsound to show"
                raise Rejected(SOLUTIONS, why, evidence)
            if cert.violation in (Violation.SUBOPTIMAL_EXTRACTION, Violation.INCOMPLETE_REDUCTION) and not source.valid:
                raise Rejected(
                    SOLUTIONS,
                    f"source_solution evaluates to {source}, not a valid solution"
                    + (" (an invalid extraction is an unsound_extraction claim)" if cert.target_solution else ""),
                    evidence,
                )
        if cert.better_source_solution is not None:
            better = evaluate("better_source_solution", "source.json", cert.better_source_solution)
            if not better.valid:
                raise Rejected(
                    SOLUTIONS, f"better_source_solution evaluates to {better}: not a valid solution", evidence
                )
            source = json.loads((self.workdir / "source.json").read_text())
            configs = [cert.source_solution or [], cert.better_source_solution]
            exactness = precision(source, max((v for c in configs for v in c), default=0), self.arithmetic)
            same = cert.source_solution == cert.better_source_solution
            found = compare(better, seen["source_solution"], exactness, same_configuration=same)
            versus = f"better_source_solution evaluates to {better}, source_solution to {seen['source_solution']}"
            if found is Comparison.UNDECIDED:
                why = f"{versus}: whether it is strictly better cannot be proved ({_compared(exactness)})"
                raise Undecided(SOLUTIONS, why, evidence)
            if found is not Comparison.BETTER:
                raise Rejected(
                    SOLUTIONS,
                    f"better_source_solution evaluates to {better}, "
                    f"not strictly better than source_solution's {seen['source_solution']} ({_compared(exactness)})",
                    evidence,
                )
        if seen:
            self._pass(SOLUTIONS, "; ".join(f"{k} evaluates to {v}" for k, v in seen.items()), evidence)
        return seen

    # -- 4. the library's own mapping back ----------------------------------------------------

    def extract(self) -> Extraction:
        cert = self.cert
        assert self.bundle is not None and cert.target_solution is not None
        try:
            found, call = self.extractor.extract(self.bundle, cert.target_solution, self.workdir)
        except ExtractorFailure as exc:
            if exc.overflowed:
                raise Rejected(
                    EXTRACTION,
                    f"integer overflow {STAGES.get(exc.stage or '', 'in the library')} ({exc.message}); pred wraps it "
                    "silently, so nothing computed past it can be trusted: use smaller numbers",
                    [exc.call],
                ) from None
            if exc.in_rule:
                self._crashed(
                    EXTRACTION,
                    f"the library panics mapping target_solution {_show(cert.target_solution)} back ({exc.stage}): "
                    f"{exc.message}; in the rule's own code ({exc.panic.rule_frame})",
                    [exc.call],
                )
            if exc.panicked:
                raise Rejected(EXTRACTION, _not_the_rule(exc), [exc.call]) from None
            why = f"the extractor cannot map target_solution back: {exc.message}"
            raise Rejected(EXTRACTION, why, [exc.call]) from None
        if not found.target_matches:
            raise Rejected(EXTRACTION, "the library derives another target from the source than pred did", [call])
        if cert.violation is Violation.CRASH:
            raise Rejected(
                EXTRACTION,
                f"the library maps target_solution {_show(cert.target_solution)} back to "
                f"{_show(found.source_solution)} ({found.source_evaluation}) without panicking: no crash",
                [call],
            )
        if found.source_solution != cert.source_solution:
            raise Rejected(
                EXTRACTION,
                f"the library maps target_solution {_show(cert.target_solution)} back to "
                f"{_show(found.source_solution)}, not the certificate's source_solution "
                f"{_show(cert.source_solution or [])}",
                [call],
            )
        self._pass(
            EXTRACTION,
            f"the library maps target_solution {_show(cert.target_solution)} ({found.target_evaluation}) back to "
            f"{_show(found.source_solution)} ({found.source_evaluation})",
            [call],
        )
        return found

    # -- 5. the violation ---------------------------------------------------------------------

    def _solve(self, problem_file: str, solver: str) -> tuple[PredCall, dict | None]:
        out = f"{Path(problem_file).stem}-{solver}.json"
        # no `--timeout`: pred's own is wall-clock, so the machine's load would decide; the call's CPU
        # limit bounds it instead (verify/reach.py)
        call = self._run("solve", problem_file, "--solver", solver, "-o", out, "-q")
        if not call.ok:
            return call, None
        try:
            call, answer = self._read_output(VIOLATION, call, out)
        except Rejected:
            return call, None
        return call, answer

    def _enumeration_size(self, problem_file: str) -> tuple[int | None, str, list[PredCall], int]:
        """How many configurations brute force enumerates on a problem, from the extractor's dims, and
        the largest value any of them holds."""
        problem = json.loads((self.workdir / problem_file).read_text())
        try:
            dims, call = self.extractor.dims(problem, self.workdir)
        except ExtractorFailure as exc:
            return None, f"its configuration space is unknown ({exc.message})", [exc.call], 0
        size, largest = 1, max(dims, default=1) - 1
        for d in dims:
            size *= d
            if size >= ENUMERATION_LIMIT:
                return None, f"it has {len(dims)} variables, at least 2^64 configurations", [call], largest
        return size, f"it has {size} configurations", [call], largest

    def _optimum(self, problem_file: str, role: str) -> tuple[Evaluation, str, list[PredCall], Precision]:
        """The problem's optimum on trusted evidence: brute force's, within its reach, cross-checked
        by pred's ILP where that applies; with the Precision of every evaluation brute force made."""
        size, note, evidence, largest = self._enumeration_size(problem_file)
        if size is None:
            raise Rejected(VIOLATION, f"unproven: the {role}'s optimum cannot be trusted: {note}", evidence)
        call, brute = self._solve(problem_file, "brute-force")
        evidence.append(call)
        best = Evaluation.parse(str((brute or {}).get("evaluation")))
        if brute is None or not best.optimizing or not best.valid:
            why = pred_failure(call, self.pred.limits) if brute is None else f"it answers {best}"
            if stopped_by_limit(call):
                found = self._ilp_instead(problem_file, role, why, evidence, largest)
                if found is not None:
                    return found
            raise Rejected(VIOLATION, f"unproven: pred's brute force finds no optimum of the {role} ({why})", evidence)
        reason = f"pred's brute force tries all {size} {role} configurations: the optimum is {best}"
        problem = json.loads((self.workdir / problem_file).read_text())
        exactness = precision(problem, largest, self.arithmetic)
        self._solver_solutions(problem, brute, f"brute force's {role} optimum", evidence)
        ilp_call, ilp = self._solve(problem_file, "ilp")
        evidence.append(ilp_call)
        if ilp is not None:
            other = Evaluation.parse(str(ilp.get("evaluation")))
            self._solver_solutions(problem, ilp, f"pred's ILP {role} optimum", evidence)
            if other.kind != best.kind or compare(other, best, exactness) in (Comparison.BETTER, Comparison.WORSE):
                raise Rejected(
                    VIOLATION,
                    f"unproven: pred's brute force and ILP disagree on the {role}'s optimum ({best} vs {other})",
                    evidence,
                )
            reason += ", and pred's ILP agrees"
        return best, reason, evidence, exactness

    def _ilp_instead(
        self, problem_file: str, role: str, why: str, evidence: list[PredCall], largest: int
    ) -> tuple[Evaluation, str, list[PredCall], Precision] | None:
        """Brute force was cut short by the verifier's limits: pred's other way, its ILP, within its
        own. Its answer is a valid solution, re-checked for overflow, but no proof of optimality (a MIP
        solver stops within a gap): it can only show that a claimed optimum is not one. Marks the
        optimum unproven (see confirm_extraction); None when the ILP does not answer either."""
        call, ilp = self._solve(problem_file, "ilp")
        evidence.append(call)
        found = Evaluation.parse(str((ilp or {}).get("evaluation")))
        if ilp is None or not found.optimizing or not found.valid:
            return None
        problem = json.loads((self.workdir / problem_file).read_text())
        solutions = self._solver_solutions(problem, ilp, f"pred's ILP {role} solution", evidence)
        if not solutions:
            return None
        self.unproven_optimum = True
        how = f"pred's brute force was cut short ({why}); pred's ILP finds {_show(solutions[0])} ({found})"
        return found, how, evidence, precision(problem, largest, self.arithmetic)

    def _only_a_better_solution_decides(
        self, target: Evaluation, found: Evaluation, exactness: Precision, how: str, evidence: list[PredCall]
    ) -> None:
        """With the optimum unproven (brute force cut short, ILP answering): a valid target solution
        better than the claimed one disproves its optimality; anything else leaves it undecided."""
        if compare(found, target, exactness) is Comparison.BETTER:
            raise Rejected(
                VIOLATION,
                f"target_solution is {target}, not optimal: {how}, a better valid solution ({_compared(exactness)})",
                evidence,
                undecided=False,
            )
        raise Rejected(
            VIOLATION,
            f"unproven: {how}, no better than target_solution's {target}, but a MIP solver's answer proves no optimum",
            evidence,
            undecided=True,
        )

    def _solver_solutions(self, problem: dict, answer: dict | None, label: str, evidence: list[PredCall]) -> list:
        """The solution a solver returned, checked for overflow like every listed one: a value that
        wrapped could make a configuration look optimal."""
        solution = (answer or {}).get("solution")
        if not (isinstance(solution, list) and solution and all(isinstance(v, int) for v in solution)):
            return []
        self._no_overflow(VIOLATION, label, problem, solution, evidence)
        return [solution]

    def _has_solution(self, problem_file: str, role: str) -> tuple[bool, str, list[PredCall]]:
        """Whether the problem has a valid solution, on trusted evidence (see the module docstring)."""
        call, brute = self._solve(problem_file, "brute-force")
        evidence = [call]
        answer = Evaluation.parse(str((brute or {}).get("evaluation")))
        problem = json.loads((self.workdir / problem_file).read_text())
        if brute is not None and "solution" in brute and answer.valid:
            self._solver_solutions(problem, brute, f"brute force's {role} solution", evidence)
            return True, f"pred's brute force finds {_show(brute['solution'])} ({answer})", evidence
        if brute is not None and answer.understood:
            size, note, probes, _ = self._enumeration_size(problem_file)
            evidence += probes
            if size is not None:
                return False, f"pred's brute force tries all {size} {role} configurations ({answer})", evidence
            distrust = f'brute force\'s "no solution" ({answer}) cannot be trusted: {note}'
        else:
            distrust = f"brute force could not decide ({pred_failure(call, self.pred.limits)})"
        ilp_call, ilp = self._solve(problem_file, "ilp")
        evidence.append(ilp_call)
        found = Evaluation.parse(str((ilp or {}).get("evaluation")))
        if ilp is not None and "solution" in ilp and found.valid:
            self._solver_solutions(problem, ilp, f"pred's ILP {role} solution", evidence)
            return True, f"{distrust}, and pred's ILP finds {_show(ilp['solution'])} ({found})", evidence
        if ilp is None and "found no solution" in ilp_call.stderr:
            return False, f"{distrust}, and pred's ILP cross-check finds no {role} solution", evidence
        ilp_note = f"it answers {found}" if ilp else pred_failure(ilp_call, self.pred.limits)
        why = f"unproven: {distrust}; the ILP cross-check does not settle it ({ilp_note})"
        raise Rejected(VIOLATION, why, evidence)

    def confirm_incomplete(self) -> str:
        claim = f"incomplete_reduction confirmed: source_solution {_show(self.cert.source_solution or [])} is valid"
        solvable, how, evidence = self._has_solution("target.json", "target")
        if solvable:
            raise Rejected(VIOLATION, f"the target has a solution: {how}", evidence, undecided=False)
        reason = f"{claim}, and the target has none: {how}"
        self._pass(VIOLATION, reason, evidence)
        return reason

    def confirm_extraction(self, seen: dict[str, Evaluation], extraction: Extraction) -> str:
        cert = self.cert
        target = seen["target_solution"]
        source = Evaluation.parse(extraction.source_evaluation)
        if not source.same_value(seen["source_solution"]):
            raise Rejected(
                VIOLATION,
                f"the extractor evaluates the extraction as {source}, pred as {seen['source_solution']}: "
                "they must agree",
            )
        evidence: list[PredCall] = []
        notes = []
        mapping = (
            f"the target's {'optimal' if target.optimizing else 'valid'} solution {_show(cert.target_solution or [])} "
            f"({target}) maps back to {_show(cert.source_solution or [])} ({source})"
        )
        if target.optimizing:
            optimum, how, calls, exactness = self._optimum("target.json", "target")
            evidence += calls
            if self.unproven_optimum:
                self._only_a_better_solution_decides(target, optimum, exactness, how, evidence)
            found = compare(target, optimum, exactness)
            if found is Comparison.WORSE:
                raise Rejected(
                    VIOLATION,
                    f"target_solution is {target}, not optimal: {how}; an optimization target's solution "
                    f"qualifies only at its optimum ({_compared(exactness)})",
                    evidence,
                    undecided=False,
                )
            if found is not Comparison.EQUAL:
                raise Undecided(
                    VIOLATION,
                    f"target_solution is {target} and {how}: that it is optimal cannot be proved "
                    f"({_compared(exactness)}; optimality needs every evaluation exact)",
                    evidence,
                )
            notes.append(how)
        if cert.violation is Violation.UNSOUND_EXTRACTION:
            if target.optimizing:
                feasible, how, calls = self._has_solution("source.json", "source")
                evidence += calls
                if not feasible:
                    raise Rejected(
                        VIOLATION,
                        f"{mapping}, but the source has no valid solution ({how}): from a source without one, "
                        "no extraction can be valid",
                        evidence,
                        undecided=False,
                    )
                notes.append(f"the source has valid solutions: {how}")
            reason = f"unsound_extraction confirmed: {mapping}, which is not a valid source solution"
        else:
            if not seen["source_solution"].optimizing:
                raise Rejected(
                    VIOLATION,
                    f"the source evaluates as {seen['source_solution']}: suboptimal_extraction needs an optimization "
                    "source (Min or Max)",
                    evidence,
                )
            better = seen["better_source_solution"]
            reason = (
                f"suboptimal_extraction confirmed: {mapping}, "
                f"while {_show(cert.better_source_solution or [])} is {better}"
            )
        self._pass(VIOLATION, reason + "".join(f"; {n}" for n in notes), evidence)
        return reason

    def run(self) -> str:
        self.check_instance()
        self.rederive()
        seen = self.check_solutions()
        if self.cert.violation is Violation.CRASH:
            if self.cert.target_solution is None:
                raise Rejected(
                    REDERIVE,
                    f"pred reduces the source by {self.rule} without panicking, and no target_solution "
                    "is given whose mapping back would",
                )
            self.extract()  # raises Confirmed on a panic, Rejected otherwise
        if self.cert.violation is Violation.INCOMPLETE_REDUCTION:
            return self.confirm_incomplete()
        return self.confirm_extraction(seen, self.extract())


_verified_binaries: set[tuple[str, ...]] = set()


def _key(record: EnvRecord) -> tuple[str, ...]:
    return (record.pred_path, record.pred_sha256, record.pred_version, record.extractor_path, record.extractor_sha256)


def checked_environment(version: str, path: str | None = None) -> EnvRecord:
    """The record at `path` (default: the one setup wrote for the version), checked against its
    binaries once per process: hashing them costs as much as several pred calls, so never twice."""
    record = checked_record(version, path)
    _verified_binaries.add(_key(record))
    return record


def _checked(record: EnvRecord) -> EnvRecord:
    """The record a verification runs on (the caller's choice, never a default), checked against its
    binaries once per process."""
    if _key(record) not in _verified_binaries:
        check_pred(record)
        _verified_binaries.add(_key(record))
    return record


def judge(record: EnvRecord | None) -> dict[str, str | None]:
    """The Verdict fields naming the pred (and extractor) that judged it."""
    if record is None:
        return {}
    return {
        "pred_version": record.pred_version,
        "pred_sha256": record.pred_sha256,
        "extractor_sha256": record.extractor_sha256,
    }


def rejected(
    reason: str, *, check: str = CERTIFICATE, source: str | None = None, record: EnvRecord | None = None
) -> Verdict:
    """A verdict for input that never reached pred (`record`: the environment it was refused on)."""
    return Verdict(
        accepted=False,
        reason=reason,
        checks=[Check(name=check, passed=False, detail=reason)],
        certificate=source,
        **judge(record),
    )


def _revalidated(cert: Any) -> tuple[Certificate | None, str | None]:
    """The certificate validated again (a Certificate's fields can be assigned anything after its
    validation), or why it is not one."""
    if not isinstance(cert, Certificate):
        return None, f"a certificate is a Certificate, got {type(cert).__name__}"
    try:
        text = json.dumps(cert.model_dump(mode="json", warnings=False))
    except Exception as exc:  # noqa: BLE001 - whatever a field was set to, it is no certificate
        return None, f"it cannot be written as JSON ({type(exc).__name__}: {str(exc)[:200]})"
    try:
        return parse_certificate(text), None
    except CertificateError as exc:
        return None, str(exc)


def verify(
    cert: Certificate,
    record: EnvRecord,
    *,
    source: str | None = None,
    limits: PredLimits | None = None,
) -> Verdict:
    """Verify one certificate with the pinned library alone.

    Raises PredEnvironmentError when pred or the extractor is missing or differs from its record,
    and LimitError when their limits cannot be set: neither is a verdict about the certificate.
    Everything about the certificate becomes the Verdict."""
    record = _checked(record)
    cert, problem = _revalidated(cert)
    if cert is None:
        return rejected(f"malformed certificate: {problem}", source=source, record=record)
    problem = certificate_problem(cert)
    if problem:
        return rejected(f"malformed certificate: {problem}", source=source, record=record)
    size = len(cert.model_dump_json().encode())
    if size > MAX_CERTIFICATE_BYTES:
        return rejected(
            f"certificate is {size} bytes, over the {MAX_CERTIFICATE_BYTES}-byte limit", source=source, record=record
        )
    if cert.pred_version is not None and cert.pred_version != record.pred_version:
        return rejected(
            f"the certificate is for pred {cert.pred_version}, this verification is on pred {record.pred_version}",
            source=source,
            record=record,
        )
    arithmetic = library_arithmetic(record.source_dir)
    if not arithmetic:
        raise PredEnvironmentError(
            f"the library source at {record.source_dir} shows no problem's evaluation: run `predbench setup`"
        )
    limits = limits or DEFAULT_LIMITS
    budget = Budget(limits.budget_cpu_s, limits.budget_wall_s)  # one for all the calls of this verification
    pred = Pred(Path(record.pred_path), limits, budget=budget)
    extractor = Extractor(Path(record.extractor_path), limits, budget=budget)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="predbench-verify-") as tmp:
        verification = _Verification(cert, pred, extractor, Path(tmp), arithmetic)
        accepted, outcome = False, Outcome.REJECTED
        try:
            reason = verification.run()
            accepted = True
        except Confirmed as proof:
            proved = Check(name=proof.check, passed=True, detail=proof.reason, evidence=proof.evidence)
            verification.checks.append(proved)
            reason, accepted = proof.reason, True
        except Rejected as exc:
            verification.checks.append(Check(name=exc.check, passed=False, detail=exc.detail, evidence=exc.evidence))
            if isinstance(exc, Undecided):
                outcome = Outcome.INCONCLUSIVE
                reason = f"undecided at {exc.check}: {exc.detail}"
            elif exc.undecided:
                outcome = Outcome.INCONCLUSIVE
                cut = next((limit_hit(call, limits) for call in exc.evidence if stopped_by_limit(call)), None)
                reason = f"inconclusive at {exc.check}, the verifier's own limits cut it short: {cut or exc.detail}"
            else:
                reason = f"rejected at {exc.check}: {exc.detail}"
        except (PredEnvironmentError, LimitError):
            raise
        except Exception as exc:  # noqa: BLE001 - the verifier's own fault: an error, never the certificate's
            outcome = Outcome.ERROR
            reason = (
                f"error: the verifier failed ({type(exc).__name__}: {str(exc)[:200]}), a fault of predbench, "
                "not a verdict on the certificate"
            )
            verification.checks.append(Check(name="verifier", passed=False, detail=reason))
    if accepted:
        outcome = Outcome.ACCEPTED
    return Verdict(
        accepted=accepted,
        outcome=outcome,
        violation=cert.violation if accepted else None,
        reason=reason,
        rule=verification.rule,
        reduction_path=verification.path,
        checks=verification.checks,
        pred_calls=pred.calls + extractor.calls,
        seconds=round(time.monotonic() - start, 3),
        certificate=source,
        **judge(record),
    )


def verify_text(
    text: str | bytes,
    record: EnvRecord,
    *,
    source: str | None = None,
    limits: PredLimits | None = None,
) -> Verdict:
    """Like verify, for raw input: a malformed certificate is a rejected Verdict, not an exception."""
    try:
        cert = parse_certificate(text)
    except CertificateError as exc:
        return rejected(f"malformed certificate: {exc}", source=source)
    return verify(cert, record, source=source, limits=limits)


def verify_file(path: Path, record: EnvRecord, *, limits: PredLimits | None = None) -> Verdict:
    try:
        cert = load_certificate(Path(path))
    except CertificateError as exc:
        return rejected(f"malformed certificate: {exc}", source=str(path))
    return verify(cert, record, source=str(path), limits=limits)
