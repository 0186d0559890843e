# ruff: noqa: E501 - the cases' descriptions and the IK source are data, one line each
"""Build issue 29's calibration cases (classes 1-3: a false claim on a correct rule and its contrast)
with the real pred of a version: `python tests/support/build_exactness_cases.py 0.6.0`. Each target is
what `pred reduce` derives, so the certificates are exactly what a model would submit; the sidecars
say the verdict each must get. The IK source was found by a search for a permutation of three equal
links whose float squared distance rounds differently (the old verifier judged it strictly better)."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_predbench.verify import pin

VERSION = sys.argv[1]
PRED = str(pin.pred_binary(VERSION)) if len(sys.argv) < 3 else sys.argv[2]
OUT = Path(__file__).resolve().parents[2] / "fixtures" / "calibration" / VERSION
IK_SOURCE = '{"type": "MinimumDiscretePlanarInverseKinematics", "variant": {}, "data": {"link_lengths": [1000.0, 1000.0, 1000.0], "target_point": [-1956.2, -451.0], "orientation_samples": [[2.348, 3.362, 4.149], [2.348, 3.362, 4.149], [2.348, 3.362, 4.149]], "allowed_pairs": [[[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [2, 0], [2, 1], [2, 2]], [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [2, 0], [2, 1], [2, 2]]]}}'

E = {
    "exact_norm_target_above_optimum_large": dict(
        description="Class 1, a false claim on the correct SubsetSum -> ClosestVectorProblem rule. target_solution [1,0,1,0] sums to the target minus 1, so it lies sqrt(2) from the target point while the optimum (the subset [0,1,1,0]) lies 1 from it: 0.41 above the optimum, and not optimal. The old tolerance for products grew with the square of the sizes (10^8 here) and took it for optimal, accepting the claim. The squared norm of these numbers is far past the range where floats are exact, so optimality cannot be proved: undecided, never accepted.",
        accepted=False,
        failed_check="violation",
        undecided=True,
        reason_contains=["undecided at violation", "cannot be proved"],
    ),
    "exact_norm_target_above_optimum_small": dict(
        description="The contrast of exact_norm_target_above_optimum_large: the same claim with sizes below 32. Every intermediate of the squared norm is exact and the square root is correctly rounded, so the values compare exactly and a target solution 0.41 above the optimum is refused as not optimal.",
        accepted=False,
        failed_check="violation",
        reason_contains=["not optimal", "compared exactly"],
    ),
    "exact_qubo_two_above_optimum_past_2_53": dict(
        description="Class 2, a false claim on the correct MaximumSetPacking -> QUBO rule. Weights 2^49 and 2^49 - 2 make the penalty about 2^50 and the QUBO's magnitudes past 2^53 (times its binary multipliers), where the old rounding bound jumped from 0 to about twice the number of terms: target_solution [0,1,1,0,0], 2 above the optimum, passed as optimal and its (worse-by-2) extraction as suboptimal. Its sums are not provably exact, so optimality is undecided, never accepted.",
        accepted=False,
        failed_check="violation",
        undecided=True,
        reason_contains=["undecided at violation", "cannot be proved"],
    ),
    "exact_qubo_two_above_optimum_small": dict(
        description="The contrast of exact_qubo_two_above_optimum_past_2_53: weights 10 and 8. Every sum is exact, so target_solution 2 above the optimum is refused as not optimal, compared exactly.",
        accepted=False,
        failed_check="violation",
        reason_contains=["not optimal", "compared exactly"],
    ),
    "exact_trig_tie_judged_better": dict(
        description="Class 3, a false claim on the correct MinimumDiscretePlanarInverseKinematics -> QUBO rule. Three equal links with the same three orientation samples: better_source_solution is a permutation of source_solution, the same end point exactly, but its squared distance (sums of cos and sin) rounds 2.5e-10 lower. The old bound assumed a plain sum of the instance's numbers and judged it strictly better. A value computed with trig functions has no rigorous bound here: undecided, never accepted.",
        accepted=False,
        failed_check="solutions",
        undecided=True,
        reason_contains=["undecided at solutions", "trig"],
    ),
    "exact_trig_same_configuration": dict(
        description="The contrast of exact_trig_tie_judged_better: better_source_solution is source_solution itself. One configuration has one value whatever the arithmetic, so it is proved no better and the claim is rejected.",
        accepted=False,
        failed_check="solutions",
        reason_contains=["not strictly better"],
    ),
}


def reduce(source, target_type, target_variant):
    with tempfile.TemporaryDirectory() as d:
        Path(d, "source.json").write_text(json.dumps(source))
        via = {
            "path": [
                {
                    "from": {"name": source["type"], "variant": source["variant"]},
                    "to": {"name": target_type, "variant": target_variant},
                    "step": 1,
                }
            ],
            "steps": 1,
        }
        Path(d, "via.json").write_text(json.dumps(via))
        r = subprocess.run(
            [PRED, "reduce", "source.json", "--via", "via.json", "-o", "bundle.json", "-q"],
            cwd=d,
            capture_output=True,
            text=True,
        )
        if r.returncode:
            raise SystemExit(r.stderr)
        t = json.loads(Path(d, "bundle.json").read_text())["target"]
        return {"type": t["type"], "variant": t["variant"], "data": t["data"]}


def cert(name, violation, source, ttype, tvariant, target_solution, source_solution, better=None):
    c = {
        "violation": violation,
        "rule": f"{source['type']} -> {ttype}",
        "source": source,
        "target": reduce(source, ttype, tvariant),
        "target_solution": target_solution,
        "source_solution": source_solution,
    }
    if better is not None:
        c["better_source_solution"] = better
    (OUT / f"{name}.json").write_text(json.dumps(c, indent=2) + "\n")
    print("wrote", name)


def subsetsum(sizes, target):
    return {"type": "SubsetSum", "variant": {}, "data": {"sizes": [str(s) for s in sizes], "target": str(target)}}


cvp = ("ClosestVectorProblem", {"weight": "i32"})
# class 1: x = [1,0,1,0] sums to T - 1 (sqrt(2) from the target, 0.41 above the optimum 1)
cert(
    "exact_norm_target_above_optimum_large",
    "unsound_extraction",
    subsetsum([100000000, 100000001, 200000000, 7], 300000001),
    *cvp,
    [1, 0, 1, 0],
    [1, 0, 1, 0],
)
cert(
    "exact_norm_target_above_optimum_small",
    "unsound_extraction",
    subsetsum([10, 11, 20, 7], 31),
    *cvp,
    [1, 0, 1, 0],
    [1, 0, 1, 0],
)


def msp(w):
    return {
        "type": "MaximumSetPacking",
        "variant": {"weight": "f64"},
        "data": {"sets": [[0], [0], [1], [1], [0, 1]], "weights": w},
    }


qubo = ("QUBO", {"weight": "f64"})
cert(
    "exact_qubo_two_above_optimum_past_2_53",
    "suboptimal_extraction",
    msp([float(2**49), float(2**49 - 2), 1.0, 1.0, 1.0]),
    *qubo,
    [0, 1, 1, 0, 0],
    [0, 1, 1, 0, 0],
    [1, 0, 1, 0, 0],
)
cert(
    "exact_qubo_two_above_optimum_small",
    "suboptimal_extraction",
    msp([10.0, 8.0, 1.0, 1.0, 1.0]),
    *qubo,
    [0, 1, 1, 0, 0],
    [0, 1, 1, 0, 0],
    [1, 0, 1, 0, 0],
)


def onehot(p):
    return [1 if a == c else 0 for c in p for a in range(3)]


def solve(problem):
    with tempfile.TemporaryDirectory() as d:
        Path(d, "p.json").write_text(json.dumps(problem))
        r = subprocess.run(
            [PRED, "solve", "p.json", "--solver", "brute-force", "-o", "o.json", "-q"],
            cwd=d,
            capture_output=True,
            text=True,
        )
        if r.returncode:
            raise SystemExit(r.stderr)
        return json.loads(Path(d, "o.json").read_text())


def evaluate(problem, config):
    with tempfile.TemporaryDirectory() as d:
        Path(d, "p.json").write_text(json.dumps(problem))
        r = subprocess.run(
            [PRED, "evaluate", "p.json", "--config", ",".join(map(str, config))], cwd=d, capture_output=True, text=True
        )
        return json.loads(r.stdout)["result"]


if VERSION != "0.5.0":  # the trig problem is new in 0.6.0
    import itertools

    source = json.loads(IK_SOURCE)
    vals = {p: float(evaluate(source, list(p))[4:-1]) for p in itertools.permutations(range(3))}
    print(vals)
    high = max(vals, key=vals.get)
    low = min(vals, key=vals.get)
    cert(
        "exact_trig_tie_judged_better",
        "suboptimal_extraction",
        source,
        "QUBO",
        {"weight": "f64"},
        onehot(high),
        list(high),
        list(low),
    )
    cert(
        "exact_trig_same_configuration",
        "suboptimal_extraction",
        source,
        "QUBO",
        {"weight": "f64"},
        onehot(high),
        list(high),
        list(high),
    )

for name in E:
    if (OUT / f"{name}.json").exists():
        (OUT / "expected" / f"{name}.json").write_text(json.dumps(E[name], indent=2) + "\n")
