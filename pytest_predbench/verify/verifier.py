"""The independent verifier: a certificate is a bug only when pred itself says so.

It reads the certificate and runs pred; it never imports the agent stack and never takes a
claim on the certificate's word. The steps, each recorded as a Check with pred's output:

1. ``rederive``: ``pred reduce`` the source to the target's type and variant; the result must
   equal the certificate's target (type, variant and data compared as canonical JSON values).
   From here on only pred's own bundle is used: ``pred solve`` 0.5.0 re-runs the reduction to
   extract and never checks that a bundle's target belongs to its source.
2. ``solutions``: every listed solution is evaluated by ``pred evaluate`` (which also rejects a
   wrong length or an out-of-range value) and must evaluate as the claim needs: the target
   solution valid; the source solution invalid for unsound_extraction and valid otherwise; the
   better source solution valid and strictly better (lower for Min, higher for Max).
3. ``round_trip`` (unsound and suboptimal extraction). pred 0.5.0 has no ``extract`` command, so
   the only mapping back that is pred's own is ``pred solve`` on the verifier's bundle with the
   certificate's solver. The rule: pred's solver must return exactly the certificate's
   ``target_solution`` (brute force is deterministic: the lexicographically first optimum) and
   pred's extraction of it must be exactly the certificate's ``source_solution``. A target
   solution pred's solver does not produce cannot be mapped back by pred, and a source solution
   that differs from pred's extraction is not pred's word: both are rejected.
4. ``violation``: pred's own evaluations confirm the claim. The target solution must be a best
   one: brute force returns an optimum by exhaustive search; an ILP answer, reached through
   reductions to ILP that may themselves be wrong, must match brute force's optimum value.
   unsound_extraction: pred evaluates its extraction as invalid, and, unless source and target
   are both yes/no problems, pred's own solve of the source finds a valid solution (from an
   infeasible source, say an unsatisfiable formula reduced to MaximumIndependentSet, every
   extraction is invalid and no rule is wrong). suboptimal_extraction: the target is a Min or
   Max problem (a yes/no witness need not map back to an optimum) and the better source
   solution beats pred's extraction. incomplete_reduction: the target has no
   solution, on trusted evidence only. Brute force enumerates the product of the variables'
   domain sizes in a machine word and silently reports "no solution" at 2^64 or more
   configurations, so its "no solution" counts only when that product is known (``pred
   inspect`` and ``pred evaluate`` range errors) to be smaller; otherwise pred's ILP must
   report no solution, and anything else is rejected as inconclusive. (The certificate's
   ``solver`` plays no part here: both solvers are consulted in that order.)

Bad input never raises: it becomes a rejected Verdict with a one-line reason. Input over the
documented size limits (certificate.MAX_CERTIFICATE_BYTES, MAX_SOLUTION_LENGTH) is rejected
before pred runs; every pred call runs under PredLimits (timeout, CPU, memory, file size, its
own process group) in a private temporary directory.
"""

import json
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_predbench.verify.certificate import (
    MAX_CERTIFICATE_BYTES,
    Certificate,
    CertificateError,
    Solver,
    Violation,
    certificate_problem,
    load_certificate,
    parse_certificate,
    step,
)
from pytest_predbench.verify.environment import EnvRecord, check_pred, checked_record
from pytest_predbench.verify.pred import Pred, PredCall, PredLimits, _clip
from pytest_predbench.verify.verdict import Check, Verdict

DEFAULT_LIMITS = PredLimits(timeout_s=30.0, memory_bytes=2 * 1024**3, file_size_bytes=64 * 1024**2)
ENUMERATION_LIMIT = 2**64
"""Brute force counts configurations in a usize: at this many it enumerates none at all."""

# Check names, in the order they run; calibration cases name the one expected to reject.
CERTIFICATE, REDERIVE, SOLUTIONS, ROUND_TRIP, VIOLATION = (
    "certificate",
    "rederive",
    "solutions",
    "round_trip",
    "violation",
)

_HUGE_VALUE = str(2**64 - 1)
MAX_VALUE = 2**64 - 1
"""pred reads a configuration's values as machine words: a larger one is never in any domain. The
bound also keeps `--config` within the kernel's limit on one argument (128 KiB) at the longest
allowed solution."""
MAX_SPEC_LENGTH = 1000
_SPEC = re.compile(r"[A-Za-z0-9_][\x21-\x7e]*")
"""pred's problem and variant names are printable ASCII; anything else could not even be passed
as an argument (a NUL byte, a lone surrogate), would read as an option (a leading `-`) or would
break a one-line reason (a newline)."""
_RANGE_ERROR = re.compile(r"variable (\d+) has (\d+) possible values")
_EVALUATION = re.compile(r"^(Or|And|Max|Min|Sum)\((.*)\)$")


class Rejected(Exception):
    """A check failed; carries the check's name, its one-line detail and pred's evidence."""

    def __init__(self, check: str, detail: str, evidence: list[PredCall] | None = None):
        super().__init__(detail)
        self.check = check
        self.detail = detail
        self.evidence = evidence or []


@dataclass(frozen=True)
class Evaluation:
    """pred's evaluation string (``Min(2)``, ``Max(None)``, ``Or(true)``) made comparable."""

    text: str
    kind: str
    value: Any

    @classmethod
    def parse(cls, text: str) -> "Evaluation":
        match = _EVALUATION.match(text.strip())
        if not match:
            return cls(text, "unknown", None)
        kind, raw = match.groups()
        if raw in ("true", "false"):
            return cls(text, kind, raw == "true")
        if raw == "None":
            return cls(text, kind, None)
        try:
            value: Any = int(raw)
        except ValueError:
            try:
                value = float(raw)
            except ValueError:
                return cls(text, "unknown", None)
        return cls(text, kind, value)

    @property
    def optimizing(self) -> bool:
        return self.kind in ("Max", "Min")

    @property
    def understood(self) -> bool:
        return self.kind == "Or" or self.optimizing

    @property
    def valid(self) -> bool:
        """A feasible solution: Or(true), or Max/Min with a value."""
        return (self.kind == "Or" and self.value is True) or (self.optimizing and self.value is not None)

    def better_than(self, other: "Evaluation") -> bool:
        if not (self.valid and other.valid and self.optimizing and self.kind == other.kind):
            return False
        return self.value > other.value if self.kind == "Max" else self.value < other.value

    def __str__(self) -> str:
        return self.text


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


def _spec(type_name: str, variant: dict[str, str]) -> str:
    """pred's problem spec: the name, then every variant value (pred resolves each to its dimension)."""
    return "/".join([type_name, *(variant[k] for k in sorted(variant))])


def _command(call: PredCall, most: int = 48) -> str:
    """The command for a one-line reason: a long argument (a 4096-value --config) is cut; the
    evidence keeps it whole."""
    return " ".join(arg if len(arg) <= most else f"{arg[: most - 8]}...({len(arg)} chars)" for arg in call.argv)


def pred_failure(call: PredCall, limits: PredLimits) -> str:
    """One line saying why a pred call failed, in pred's own words where it has any."""
    lines = [line.strip() for line in call.stderr.splitlines() if line.strip()]
    if call.timed_out:
        return f"`{_command(call)}` exceeded the {limits.timeout_s:g}s time limit and was killed"
    if any("memory allocation" in line for line in lines):
        return f"`{_command(call)}` ran out of memory (limit {limits.memory_bytes // 2**20} MiB)"
    if call.exit_code is not None and call.exit_code < 0:
        return f"`{_command(call)}` was killed by signal {-call.exit_code} (CPU or file-size limit?)"
    errors = [line.removeprefix("Error:").strip() for line in lines if line.startswith("Error:")]
    if errors:
        return f"`{_command(call)}` failed: {errors[0][:300]}"
    panics = [i for i, line in enumerate(lines) if "panicked at" in line]
    if panics:
        message = lines[panics[-1] + 1] if panics[-1] + 1 < len(lines) else lines[panics[-1]]
        return f"`{_command(call)}` panicked: {message[:300]}"
    return f"`{_command(call)}` exited {call.exit_code}" + (f": {lines[-1][:300]}" if lines else "")


class _Verification:
    """One certificate against one pred, in one private working directory."""

    def __init__(self, cert: Certificate, pred: Pred, workdir: Path):
        self.cert = cert
        self.pred = pred
        self.workdir = workdir
        self.checks: list[Check] = []
        self.path: list[str] = []
        self.rule: str | None = None

    # -- pred, with its output kept as evidence ---------------------------------------------

    def _write(self, name: str, value: Any) -> str:
        (self.workdir / name).write_text(json.dumps(value))
        return name

    def _run(self, *args: str) -> PredCall:
        return self.pred.run(*args, cwd=self.workdir)

    def _run_to_file(self, check: str, out: str, *args: str) -> tuple[PredCall, dict]:
        """Run with ``-o out`` (stdout is clipped as evidence; the file is read whole)."""
        call = self._run(*args, "-o", out, "-q")
        if not call.ok:
            raise Rejected(check, pred_failure(call, self.pred.limits), [call])
        try:
            text = (self.workdir / out).read_text()
            data = json.loads(text)
        except (OSError, ValueError) as exc:
            raise Rejected(check, f"`{_command(call)}` wrote no readable JSON ({exc})", [call]) from None
        call = call.model_copy(update={"stdout": _clip(text)})
        if not isinstance(data, dict):
            raise Rejected(check, f"`{_command(call)}` wrote {type(data).__name__}, not a JSON object", [call])
        return call, data

    def _evaluate(self, check: str, problem_file: str, label: str, config: list[int]) -> tuple[Evaluation, PredCall]:
        if not config:
            raise Rejected(check, f"{label} is empty")
        call = self._run("evaluate", problem_file, "--config", _configs(config))
        if not call.ok:
            raise Rejected(check, f"{label} {_show(config)}: {pred_failure(call, self.pred.limits)}", [call])
        try:
            result = json.loads(call.stdout)["result"]
        except (ValueError, KeyError, TypeError):
            raise Rejected(check, f"`{_command(call)}` printed no result", [call]) from None
        return Evaluation.parse(str(result)), call

    def _pass(self, name: str, detail: str, evidence: list[PredCall]) -> None:
        self.checks.append(Check(name=name, passed=True, detail=detail, evidence=evidence))

    # -- 1. re-derive the target ------------------------------------------------------------

    def rederive(self) -> None:
        cert = self.cert
        self._write("source.json", json.loads(cert.source.to_pred_json()))
        to = _spec(cert.target.type, cert.target.variant)
        if len(to) > MAX_SPEC_LENGTH or not _SPEC.fullmatch(to):
            shown = json.dumps(to)
            raise Rejected(
                REDERIVE,
                f"the target's type and variant ({shown[:80]}{'...' if len(shown) > 80 else ''}) are not a "
                "problem pred can know: its names are printable ASCII, not starting with `-`, "
                f"at most {MAX_SPEC_LENGTH} characters",
            )
        call, bundle = self._run_to_file(REDERIVE, "bundle.json", "reduce", "source.json", "--to", to)
        target, steps = bundle.get("target"), bundle.get("path")
        if not isinstance(target, dict) or not isinstance(steps, list):
            raise Rejected(REDERIVE, f"`{_command(call)}` wrote no bundle (target and path)", [call])
        self.path = [_spec(str(s.get("name")), dict(s.get("variant") or {})) for s in steps if isinstance(s, dict)]
        self.rule = " -> ".join(str(s.get("name")) for s in steps if isinstance(s, dict))
        hops = f" ({len(steps) - 1} hops: {' -> '.join(self.path)})" if len(steps) > 2 else ""
        for field, derived, claimed in (
            ("type", target.get("type"), cert.target.type),
            ("variant", target.get("variant"), cert.target.variant),
            ("data", target.get("data"), cert.target.data),
        ):
            if canonical(derived) != canonical(claimed):
                raise Rejected(
                    REDERIVE,
                    f"the certificate's target {field} differs from what `pred reduce` derives"
                    f"{hops} ({first_difference(claimed, derived, 'target.' + field)})",
                    [call],
                )
        self._write("target.json", target)
        self._pass(REDERIVE, f"pred derives the certificate's target via {self.rule}{hops}", [call])

    # -- 2. the listed solutions ------------------------------------------------------------

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
            found, call = self._evaluate(SOLUTIONS, problem_file, label, config)
            evidence.append(call)
            if not found.understood:
                raise Rejected(
                    SOLUTIONS,
                    f"pred evaluates {label} as {found}: only Or, Max and Min are handled",
                    evidence,
                )
            seen[label] = found
            return found

        if cert.target_solution is not None:
            target = evaluate("target_solution", "target.json", cert.target_solution)
            if not target.valid:
                raise Rejected(
                    SOLUTIONS, f"target_solution evaluates to {target}: not a valid target solution", evidence
                )
        source = evaluate("source_solution", "source.json", cert.source_solution)
        if cert.violation is Violation.UNSOUND_EXTRACTION and source.valid:
            raise Rejected(
                SOLUTIONS,
                f"source_solution evaluates to {source}, a valid solution: nothing unsound to show",
                evidence,
            )
        if cert.violation is not Violation.UNSOUND_EXTRACTION and not source.valid:
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
            if not better.better_than(source):
                raise Rejected(
                    SOLUTIONS,
                    f"better_source_solution evaluates to {better}, "
                    f"not strictly better than source_solution's {source}",
                    evidence,
                )
        self._pass(SOLUTIONS, "; ".join(f"{k} evaluates to {v}" for k, v in seen.items()), evidence)
        return seen

    # -- 3. pred's own round trip -----------------------------------------------------------

    def _solve_args(self, solver: str) -> list[str]:
        return ["--solver", solver, "--timeout", str(max(1, int(self.pred.limits.timeout_s) - 1))]

    def round_trip(self) -> tuple[Evaluation, Evaluation, PredCall]:
        cert = self.cert
        call, out = self._run_to_file(ROUND_TRIP, "solve.json", "solve", "bundle.json", *self._solve_args(cert.solver))
        inter = out.get("intermediate") or {}
        target_solution, source_solution = inter.get("solution"), out.get("solution")
        if target_solution != cert.target_solution:
            raise Rejected(
                ROUND_TRIP,
                f"pred's {cert.solver} solve of the derived bundle returns target solution "
                f"{_show(target_solution or [])}, not the certificate's {_show(cert.target_solution or [])}: "
                "pred 0.5.0 can only map back the solution its own solver returns",
                [call],
            )
        if source_solution != cert.source_solution:
            raise Rejected(
                ROUND_TRIP,
                f"pred's own extraction of {_show(target_solution)} is {_show(source_solution or [])}, "
                f"not the certificate's source_solution {_show(cert.source_solution)}",
                [call],
            )
        target_eval = Evaluation.parse(str(inter.get("evaluation")))
        source_eval = Evaluation.parse(str(out.get("evaluation")))
        self._pass(
            ROUND_TRIP,
            f"pred's {cert.solver} solve maps target {_show(target_solution)} ({target_eval}) "
            f"back to {_show(source_solution)} ({source_eval})",
            [call],
        )
        return target_eval, source_eval, call

    # -- 4. the violation -------------------------------------------------------------------

    def _target_is_best(self, target_eval: Evaluation) -> tuple[str, list[PredCall]]:
        """Brute force's witness is an optimum; an ILP answer must match brute force's optimum."""
        if target_eval.kind == "Or" or self.cert.solver is Solver.BRUTE_FORCE:
            return "", []
        call = self._run("solve", "target.json", *self._solve_args(Solver.BRUTE_FORCE))
        if not call.ok:
            raise Rejected(
                VIOLATION,
                f"inconclusive: the ILP target solution's optimality cannot be cross-checked "
                f"({pred_failure(call, self.pred.limits)})",
                [call],
            )
        try:
            reference = json.loads(call.stdout)
            best = Evaluation.parse(str(reference["evaluation"]))
        except (ValueError, KeyError, TypeError):
            raise Rejected(VIOLATION, f"`{_command(call)}` printed no evaluation", [call]) from None
        if "solution" not in reference or best.value != target_eval.value or best.kind != target_eval.kind:
            raise Rejected(
                VIOLATION,
                f"the ILP target solution ({target_eval}) is not the optimum brute force finds ({best})",
                [call],
            )
        return f"; brute force confirms the target optimum {best}", [call]

    def confirm_extraction(self, seen: dict[str, Evaluation]) -> str:
        cert = self.cert
        target_eval, source_eval, solve = self.round_trip()
        if not target_eval.valid:
            raise Rejected(VIOLATION, f"pred's solver found no valid target solution ({target_eval})", [solve])
        cross, evidence = self._target_is_best(target_eval)
        evidence = [solve, *evidence]
        mapping = (
            f"pred's {cert.solver} solve maps the target's best solution {_show(cert.target_solution or [])} "
            f"({target_eval}) back to {_show(cert.source_solution)} ({source_eval})"
        )
        if cert.violation is Violation.UNSOUND_EXTRACTION:
            if source_eval.valid:
                raise Rejected(VIOLATION, f"{mapping}, a valid source solution", evidence)
            if not (target_eval.kind == "Or" and source_eval.kind == "Or"):
                feasible, found = self._source_is_feasible(mapping)
                cross, evidence = cross + feasible, evidence + found
            reason = f"unsound_extraction confirmed: {mapping}, which is not a valid source solution"
        else:
            if not target_eval.optimizing:
                raise Rejected(
                    VIOLATION,
                    f"{mapping}: a yes/no target has no best solution, so its witness need not map back to an "
                    "optimum (suboptimal_extraction needs a Min or Max target)",
                    evidence,
                )
            better = seen["better_source_solution"]
            if not better.better_than(source_eval):
                raise Rejected(VIOLATION, f"{mapping}; better_source_solution's {better} does not beat it", evidence)
            reason = (
                f"suboptimal_extraction confirmed: {mapping}, "
                f"while {_show(cert.better_source_solution or [])} is {better}"
            )
        self._pass(VIOLATION, reason + cross, evidence)
        return reason

    def _source_is_feasible(self, mapping: str) -> tuple[str, list[PredCall]]:
        """pred's own solve of the source finds a valid solution. Only then must an optimization
        target's best solution map back to a valid one: from a source that has none (an unsatisfiable
        formula reduced to MaximumIndependentSet), every extraction is invalid and no rule is wrong.
        A yes/no target needs no such proof: its witness for a source without one is itself the bug."""
        evidence, answers = [], []
        for solver in (Solver.BRUTE_FORCE, Solver.ILP):
            out_file = f"source-{solver}.json"
            call = self._run("solve", "source.json", *self._solve_args(solver), "-o", out_file, "-q")
            evidence.append(call)
            out = None
            if call.ok:
                try:
                    out = json.loads((self.workdir / out_file).read_text())
                except (OSError, ValueError):
                    out = None
            if not isinstance(out, dict):
                answers.append(f"{solver}: {pred_failure(call, self.pred.limits) if not call.ok else 'no answer'}")
                continue
            found = Evaluation.parse(str(out.get("evaluation")))
            if isinstance(out.get("solution"), list) and found.valid:
                return f"; the source has valid solutions: pred's {solver} finds {_show(out['solution'])} ({found})", [
                    *evidence[:-1],
                    call.model_copy(update={"stdout": _clip(json.dumps(out))}),
                ]
            answers.append(f"{solver} answers {found}")
        raise Rejected(
            VIOLATION,
            f"{mapping}, but pred finds no valid source solution ({'; '.join(answers)}): from a source without one, "
            "no extraction can be valid",
            evidence,
        )

    def _enumeration_size(self) -> tuple[int | None, str, list[PredCall]]:
        """The number of configurations brute force enumerates on the target, when pred tells it."""
        inspect = self._run("inspect", "target.json")
        evidence = [inspect]
        try:
            count = int(json.loads(inspect.stdout)["num_variables"])
        except (ValueError, KeyError, TypeError):
            return None, pred_failure(inspect, self.pred.limits), evidence
        if count >= 64:
            return None, f"the target has {count} variables", evidence
        size = 1
        for i in range(count):
            probe = ["0"] * count
            probe[i] = _HUGE_VALUE
            call = self._run("evaluate", "target.json", "--config", ",".join(probe))
            evidence.append(call)
            found = _RANGE_ERROR.search(call.stderr)
            if not found or int(found.group(1)) != i:
                return None, f"pred did not report variable {i}'s domain", evidence
            size *= int(found.group(2))
            if size >= ENUMERATION_LIMIT:
                return None, f"the target has at least {size} configurations", evidence
        return size, f"the target has {size} configurations", evidence

    def _solve_target(self, solver: str) -> tuple[PredCall, dict | None]:
        call = self._run("solve", "target.json", *self._solve_args(solver))
        if not call.ok:
            return call, None
        try:
            out = json.loads(call.stdout)
        except ValueError:
            return call, None
        return call, out if isinstance(out, dict) else None

    def _refute_if_solved(self, out: dict | None, finder: str, evidence: list[PredCall]) -> None:
        if out is not None and "solution" in out and Evaluation.parse(str(out.get("evaluation"))).valid:
            found = f"{_show(out['solution'])} ({out.get('evaluation')})"
            raise Rejected(VIOLATION, f"the target has a solution: {finder} finds {found}", evidence)

    def confirm_incomplete(self) -> str:
        claim = f"incomplete_reduction confirmed: source_solution {_show(self.cert.source_solution)} is valid"
        brute_call, brute = self._solve_target(Solver.BRUTE_FORCE)
        evidence = [brute_call]
        self._refute_if_solved(brute, "pred's brute force", evidence)
        if brute is None:
            distrust = f"brute force could not decide ({pred_failure(brute_call, self.pred.limits)})"
        else:
            answer = Evaluation.parse(str(brute.get("evaluation")))
            if not answer.understood or answer.valid:
                raise Rejected(
                    VIOLATION,
                    f"inconclusive: pred's brute force answers {answer} for the target without a solution; "
                    "only Or, Max and Min answers are handled",
                    evidence,
                )
            size, size_note, probes = self._enumeration_size()
            evidence += probes
            if size is not None:
                reason = f"{claim}, and pred's brute force tries all {size} target configurations ({answer})"
                self._pass(VIOLATION, reason, evidence)
                return reason
            distrust = f'brute force\'s "no solution" ({answer}) cannot be trusted: {size_note}'
        ilp_call, ilp = self._solve_target(Solver.ILP)
        evidence.append(ilp_call)
        self._refute_if_solved(ilp, f"{distrust}, and pred's ILP", evidence)
        if ilp is None and "found no solution" in ilp_call.stderr:
            reason = f"{claim}; {distrust}, and pred's ILP cross-check finds no target solution"
            self._pass(VIOLATION, reason, evidence)
            return reason
        ilp_note = f"it answers {ilp.get('evaluation')}" if ilp else pred_failure(ilp_call, self.pred.limits)
        raise Rejected(
            VIOLATION,
            f"inconclusive: {distrust}; the ILP cross-check does not settle it ({ilp_note})",
            evidence,
        )

    def run(self) -> str:
        self.rederive()
        seen = self.check_solutions()
        if self.cert.violation is Violation.INCOMPLETE_REDUCTION:
            return self.confirm_incomplete()
        return self.confirm_extraction(seen)


_verified_binaries: set[tuple[str, str, str]] = set()


def _key(record: EnvRecord) -> tuple[str, str, str]:
    return (record.pred_path, record.pred_sha256, record.pred_version)


def checked_environment(path: str | None = None) -> EnvRecord:
    """The record at `path` (default: the one setup wrote), checked against its binary once per
    process: hashing the binary costs as much as several pred calls, so it is never done twice."""
    record = checked_record(path)
    _verified_binaries.add(_key(record))
    return record


def _checked(record: EnvRecord | None) -> EnvRecord:
    """The default record, or a given one checked against its binary once per process."""
    if record is None:
        return checked_environment()
    if _key(record) not in _verified_binaries:
        check_pred(record)
        _verified_binaries.add(_key(record))
    return record


def rejected(reason: str, *, check: str = CERTIFICATE, source: str | None = None) -> Verdict:
    """A verdict for input that never reached pred."""
    return Verdict(
        accepted=False,
        reason=reason,
        checks=[Check(name=check, passed=False, detail=reason)],
        certificate=source,
    )


def verify(
    cert: Certificate,
    record: EnvRecord | None = None,
    *,
    source: str | None = None,
    limits: PredLimits | None = None,
) -> Verdict:
    """Verify one certificate with pred alone.

    Raises PredEnvironmentError when pred is missing or differs from its record: that is not a
    verdict about the certificate. Everything about the certificate becomes the Verdict.
    """
    record = _checked(record)
    problem = certificate_problem(cert)
    if problem:
        return rejected(f"malformed certificate: {problem}", source=source)
    size = len(cert.model_dump_json().encode())
    if size > MAX_CERTIFICATE_BYTES:
        return rejected(f"certificate is {size} bytes, over the {MAX_CERTIFICATE_BYTES}-byte limit", source=source)
    pred = Pred(Path(record.pred_path), limits or DEFAULT_LIMITS)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="predbench-verify-") as tmp:
        verification = _Verification(cert, pred, Path(tmp))
        try:
            reason = verification.run()
            accepted = True
        except Rejected as exc:
            verification.checks.append(Check(name=exc.check, passed=False, detail=exc.detail, evidence=exc.evidence))
            reason, accepted = f"rejected at {exc.check}: {exc.detail}", False
    return Verdict(
        accepted=accepted,
        violation=cert.violation if accepted else None,
        reason=reason,
        rule=verification.rule,
        reduction_path=verification.path,
        checks=verification.checks,
        pred_calls=pred.calls,
        seconds=round(time.monotonic() - start, 3),
        certificate=source,
    )


def verify_text(
    text: str | bytes,
    record: EnvRecord | None = None,
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


def verify_file(path: Path, record: EnvRecord | None = None, *, limits: PredLimits | None = None) -> Verdict:
    try:
        cert = load_certificate(Path(path))
    except CertificateError as exc:
        return rejected(f"malformed certificate: {exc}", source=str(path))
    return verify(cert, record, source=str(path), limits=limits)
