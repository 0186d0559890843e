"""Certificate cost: the most CPU time the verifier spends on one certificate, against the bound that
verify/reach.py states and enforces (a verification's budget, shared by all its pred and extractor
calls, and the last call's one-second grain).

    python -m benchmarks.certificate_cost [--repeat 1] [--quick] [--json FILE]

It verifies, one at a time in this process, the pinned version's calibration set and slow claims
built here: false claims on a correct rule (Satisfiability -> MaximumIndependentSet) whose target has
2^42 configurations, more than brute force enumerates within a call's CPU limit, so the verifier
has to reach for pred's ILP; one with the full budget (ILP answers: rejected), one with a budget
that brute force alone spends (undecided). The CPU time of each verification is its children's
(RUSAGE_CHILDREN), so the machine's load does not count. The figure is the largest; its target, the
bound of one verification. The note gives the bound of a certificate across the run and the
report's two tries (reach.certificate_cost_bound), the figure README and docs/verifier.md state.
--quick: a command timeout of 1 s (2 CPU seconds per call, a 6 s budget) and five calibration cases.
"""

import json
import resource
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from benchmarks.figures import Figure, parser, report
from pytest_predbench.verify import pin, reach
from pytest_predbench.verify.calibration import calibration_dir, discover
from pytest_predbench.verify.certificate import load_certificate, parse_certificate
from pytest_predbench.verify.environment import EnvRecord
from pytest_predbench.verify.extractor import Extractor
from pytest_predbench.verify.pred import Pred, PredLimits
from pytest_predbench.verify.verifier import checked_environment, verify

CLAUSES = 14
"""Disjoint positive 3-clauses: the target has 3 x 14 = 42 vertices, every optimum picks one per clause."""
MIS = "MaximumIndependentSet/SimpleGraph/One"
QUICK_TIMEOUT_S = 1.0
QUICK_CASES = 5


def slow_sat() -> dict:
    clauses = [{"literals": [3 * c + 1, 3 * c + 2, 3 * c + 3]} for c in range(CLAUSES)]
    return {"type": "Satisfiability", "variant": {}, "data": {"num_vars": 3 * CLAUSES, "clauses": clauses}}


def slow_claim(record: EnvRecord) -> dict:
    """unsound_extraction on a correct rule: the empty independent set (valid, Max(0), not optimal)
    maps back to the all-false assignment, which satisfies no clause. Only a target optimum would
    show a bug; brute force cannot reach one within a call's limit, pred's ILP finds a better one."""
    source = slow_sat()
    pred = Pred(Path(record.pred_path), PredLimits(timeout_s=60))
    with tempfile.TemporaryDirectory(prefix="predbench-perf-cost-") as tmp:
        work = Path(tmp)
        (work / "source.json").write_text(json.dumps(source))
        call = pred.run("reduce", "source.json", "--to", MIS, "-o", "bundle.json", "-q", cwd=work)
        if not call.ok:
            raise RuntimeError(f"cannot build the slow claim: {call.brief()}")
        bundle = json.loads((work / "bundle.json").read_text())
        target = bundle["target"]
        empty = [0] * target["data"]["graph"]["num_vertices"]
        found, _ = Extractor(Path(record.extractor_path), PredLimits(timeout_s=60)).extract(bundle, empty, work)
    return {
        "violation": "unsound_extraction",
        "source": source,
        "target": {key: target[key] for key in ("type", "variant", "data")},
        "target_solution": empty,
        "source_solution": found.source_solution,
    }


class Cost(BaseModel):
    name: str
    outcome: str
    cpu_s: float
    wall_s: float
    pred_calls: int


class Costs(BaseModel):
    command_timeout_s: float
    cpu_per_call_s: float
    budget_cpu_s: float
    bound_cpu_s: float
    """The most one verification may use (reach.verification_cpu_bound)."""
    certificate_bound: dict[str, float]
    costs: list[Cost]
    quick: bool = False


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cost(name: str, certificate, record: EnvRecord, limits: PredLimits) -> Cost:
    before = _children_cpu()
    verdict = verify(certificate, record, limits=limits)
    return Cost(
        name=name,
        outcome=verdict.outcome.value,
        cpu_s=round(_children_cpu() - before, 3),
        wall_s=verdict.seconds,
        pred_calls=verdict.pred_calls,
    )


def measure(quick: bool) -> Costs:
    record = checked_environment(pin.default_choice())
    timeout = QUICK_TIMEOUT_S if quick else reach.COMMAND_TIMEOUT_S
    limits = reach.verifier_limits(timeout)
    claim = parse_certificate(json.dumps(slow_claim(record)))
    spent_by_brute_force = limits.model_copy(update={"budget_cpu_s": limits.cpu_s})
    costs = [
        cost("slow claim, full budget", claim, record, limits),
        cost("slow claim, budget of one call", claim, record, spent_by_brute_force),
    ]
    cases = (
        discover(calibration_dir(pin.default_choice()))[:QUICK_CASES]
        if quick
        else discover(calibration_dir(pin.default_choice()))
    )
    for path in cases:
        try:
            certificate = load_certificate(path)
        except Exception:  # noqa: BLE001 - a malformed case costs the verifier no pred call
            continue
        costs.append(cost(path.stem, certificate, record, limits))
    return Costs(
        command_timeout_s=timeout,
        cpu_per_call_s=limits.cpu_s or 0.0,
        budget_cpu_s=limits.budget_cpu_s or 0.0,
        bound_cpu_s=reach.verification_cpu_bound(timeout),
        certificate_bound=reach.certificate_cost_bound(timeout),
        costs=costs,
        quick=quick,
    )


def judge(c: Costs) -> Figure:
    worst = max(c.costs, key=lambda one: one.cpu_s)
    typical = sorted(one.cpu_s for one in c.costs)[len(c.costs) // 2]
    full, short = c.costs[0], c.costs[1]
    bound = c.certificate_bound
    return Figure(
        key="certificate_cost",
        title="certificate cost",
        value=worst.cpu_s,
        target=c.bound_cpu_s,
        unit=" cpu s",
        digits=1,
        conditions={
            "the slow claim is decided by pred's ILP": full.outcome == "rejected",
            "past its budget the slow claim is undecided": short.outcome == "inconclusive",
        },
        note=(
            f"the most CPU one verification used, {worst.name} ({worst.outcome}); median {typical:.2f} s over "
            f"{len(c.costs)} certificates; limits at a {c.command_timeout_s:g} s command timeout: "
            f"{c.cpu_per_call_s:g} s of CPU per call, {c.budget_cpu_s:g} s per verification; a certificate costs "
            f"at most {bound['run_cpu_s']:g} CPU s in the run and {bound['report_cpu_s']:g} in the report "
            f"(its first try and the retry at {reach.RETRY_FACTOR:g}x), {bound['total_cpu_s']:g} in all"
        ),
        raw=c.model_dump(),
        quick=c.quick,
    )


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__.splitlines()[0], repeat=1).parse_args(argv)
    return report("certificate cost", lambda: judge(measure(args.quick)), args.json)


if __name__ == "__main__":
    sys.exit(main())
