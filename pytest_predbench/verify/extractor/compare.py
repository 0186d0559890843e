#!/usr/bin/env python3
"""Check that `pred-extract extract` agrees with `pred solve BUNDLE` on every rule we can run.

First, `pred-extract rules` must list exactly the edges of `pred list --rules --json`. Then,
for each direct rule in `pred list --rules --json`:
  1. source instance: `pred create --example SRC --to TGT` (the library's canonical rule
     example); if there is none, `pred create --example SRC` (canonical model example),
     then a small hand-made `pred create SRC ...` from FALLBACK_CREATE;
  2. `pred reduce source.json --to TGT` and keep it only if the bundle is one hop;
  3. `pred solve bundle.json --solver brute-force` (30 s); if that fails or times out,
     `--solver ilp` (pred's HiGHS build) as a fallback, recorded per rule;
  4. `pred-extract extract` on pred's own intermediate (target) solution, and compare
     source solution, source evaluation and target evaluation with pred's, plus
     `target_matches`.
Then `pred-extract validate` on every variant's canonical model example (must be valid and
checked) and on the hand-made VALIDATE_CASES (must give the expected verdict).

stdlib only. Usage: python3 compare.py (--version V | --pred PATH --extractor PATH) [--jobs N] [--only SUBSTR]
(--version V takes pred and the extractor from the environment record `make setup` wrote for V,
env-V.json in PREDBENCH_CACHE; --pred/--extractor override it). Writes compare-results-<pred's
version>.json next to this file.
"""

import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def recorded(version):
    """pred and the extractor of the environment record `make setup` wrote for `version`."""
    cache = os.environ.get("PREDBENCH_CACHE") or os.path.expanduser("~/.cache/predbench")
    path = os.path.join(cache, f"env-{version}.json")
    try:
        with open(path) as handle:
            record = json.load(handle)
        return record["pred_path"], record["extractor_path"]
    except (OSError, ValueError, KeyError) as exc:
        sys.exit(f"compare.py: no usable environment record {path} ({exc}); pass --pred and --extractor")


# Source instances for rule sources that have no canonical example in pred's database.
FALLBACK_CREATE = {  # source spec -> arguments after `pred create`
    "MaximumIndependentSet/KingsSubgraph/One": [
        "MaximumIndependentSet/KingsSubgraph/One",
        "--positions",
        "0,0;1,0;1,1;0,2;2,2",
    ],
    "MaximumIndependentSet/KingsSubgraph/i32": [
        "MaximumIndependentSet/KingsSubgraph/i32",
        "--positions",
        "0,0;1,0;1,1;0,2;2,2",
        "--weights",
        "1,2,3,1,2",
    ],
    "MaximumIndependentSet/TriangularSubgraph/i32": [
        "MaximumIndependentSet/TriangularSubgraph/i32",
        "--positions",
        "0,0;1,0;1,1;0,2;2,2",
        "--weights",
        "2,1,3,1,2",
    ],
    "MaximumIndependentSet/UnitDiskGraph/One": [
        "MaximumIndependentSet/UnitDiskGraph/One",
        "--positions",
        "0,0;1,0;0.5,0.8;2,0;2.5,1",
        "--radius",
        "1.1",
    ],
    "MaximumIndependentSet/UnitDiskGraph/i32": [
        "MaximumIndependentSet/UnitDiskGraph/i32",
        "--positions",
        "0,0;1,0;0.5,0.8;2,0;2.5,1",
        "--radius",
        "1.1",
        "--weights",
        "1,2,3,1,2",
    ],
    "KSatisfiability/K2": ["KSatisfiability/K2", "--num-vars", "3", "--clauses", "1,2;-1,3;-2,-3", "--k", "2"],
    "MaximumSetPacking/One": ["MaximumSetPacking/One", "--subsets", "0,1;1,2;2,3;3,4", "--weights", "1,1,1,1"],
    "MinimumDominatingSet/SimpleGraph/One": ["MinimumDominatingSet/SimpleGraph/One", "--graph", "0-1,1-2,2-3,3-4"],
    # ILP is "via reduction only": take the target side of a small canonical rule example.
    "ILP/bool": ["--example", "Knapsack", "--to", "ILP/bool", "--example-side", "target"],
}
ENV = dict(os.environ, RUST_BACKTRACE="0")  # pred's errors are anyhow messages; no backtraces


def run(cmd, timeout, stdin=None):
    """(returncode, stdout, stderr); returncode None on timeout."""
    try:
        p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout, env=ENV)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", "timeout"


def last_line(s):
    """pred's error message: the `Error: ...` line if any, else the last line."""
    lines = (s or "").strip().splitlines()
    err = [line for line in lines if line.startswith("Error")]
    return (err or lines or [""])[0 if err else -1][:300]


def one_rule(rule, pred, extractor):
    src, tgt = rule["source"], rule["target"]
    res = {"source": src, "target": tgt}
    with tempfile.TemporaryDirectory() as d:
        p_json, b_json = os.path.join(d, "p.json"), os.path.join(d, "b.json")
        rc, _, err = run(["timeout", "60", pred, "create", "--example", src, "--to", tgt, "-o", p_json], 70)
        res["instance"] = "rule-example"
        if rc != 0:
            rc, _, err2 = run(["timeout", "60", pred, "create", "--example", src, "-o", p_json], 70)
            res["instance"] = "model-example"
            if rc != 0 and src in FALLBACK_CREATE:
                rc, _, err2 = run(["timeout", "60", pred, "create", *FALLBACK_CREATE[src], "-o", p_json], 70)
                res["instance"] = "hand-made: pred create " + " ".join(FALLBACK_CREATE[src])
            if rc != 0:
                return dict(
                    res, status="skipped", why="no canonical example", detail=last_line(err) + " | " + last_line(err2)
                )
        rc, _, err = run(["timeout", "60", pred, "reduce", p_json, "--to", tgt, "-o", b_json], 70)
        if rc != 0:
            why = "no witness-capable path (aggregate-only edge)" if "witness-capable" in err else "pred reduce failed"
            return dict(res, status="skipped", why=why, detail=last_line(err))
        bundle = json.load(open(b_json))
        if len(bundle["path"]) != 2:
            return dict(
                res,
                status="skipped",
                why="pred reduce chose a multi-hop path",
                detail=" -> ".join(s["name"] for s in bundle["path"]),
            )
        solved = None
        for solver, limit in (("brute-force", 30), ("ilp", 60)):
            t0 = time.time()
            rc, out, err = run(["timeout", str(limit), pred, "solve", b_json, "--solver", solver, "--json"], limit + 10)
            if rc == 0:
                solved = json.loads(out)
                res["solver"], res["solve_seconds"] = solver, round(time.time() - t0, 2)
                break
            res.setdefault("solver_failures", []).append(
                f"{solver}: {'timeout' if rc in (None, 124) else last_line(err)}"
            )
        if solved is None:
            f = " ".join(res["solver_failures"])
            why = (
                "target has no witness solver in pred (aggregate-only brute force, no ILP path)"
                if "only supports aggregate-value solving" in f and "No reduction path" in f
                else "pred solve failed or timed out (brute-force 30 s, ilp 60 s)"
            )
            return dict(res, status="skipped", why=why)
        inter = solved["intermediate"]
        payload = json.dumps({"bundle": bundle, "target_solution": inter["solution"]})
        rc, out, err = run(["timeout", "60", extractor, "extract"], 70, stdin=payload)
        try:
            ext = json.loads(out)
        except ValueError:
            return dict(res, status="different", why=f"extractor rc={rc}, no JSON", detail=last_line(err))
        if rc == 2 and ext.get("error") == "input_too_large":
            return dict(
                res,
                status="skipped",
                why="extract input over the 16 MiB stdin cap",
                detail=f"{len(payload)} bytes; target solution has {len(inter['solution'])} values",
            )
        if rc != 0:
            return dict(res, status="different", why=f"extractor rc={rc}", detail=ext)
        checks = {
            "source_solution": (ext["source_solution"], solved["solution"]),
            "source_evaluation": (ext["source_evaluation"], solved["evaluation"]),
            "target_evaluation": (ext["target_evaluation"], inter["evaluation"]),
            "target_matches": (ext["target_matches"], True),
        }
        bad = {k: {"extractor": a, "pred": b} for k, (a, b) in checks.items() if a != b}
        res.update(pred_evaluation=solved["evaluation"], extractor=ext)
        return dict(res, status="different", mismatches=bad) if bad else dict(res, status="equal")


# Hand-made instances for `validate`: (type, variant, data, expected `valid`, what it tests).
VALIDATE_CASES = [
    (
        "KSatisfiability",
        {"k": "K3"},
        {"num_vars": 3, "clauses": [{"literals": [1, 2]}]},
        False,
        "clause with fewer than k literals",
    ),
    (
        "KSatisfiability",
        {"k": "K3"},
        {"num_vars": 3, "clauses": [{"literals": [1, 0, 3]}]},
        True,
        "literal 0: the library has no rule against it for KSAT (accepted)",
    ),
    (
        "OneInThreeSatisfiability",
        {},
        {"num_vars": 3, "clauses": [{"literals": [1, 0, 3]}]},
        False,
        "literal 0 (OneInThreeSatisfiability::new checks variable range)",
    ),
    (
        "MaximumIndependentSet",
        {"graph": "SimpleGraph", "weight": "i32"},
        {"graph": {"num_vertices": 2, "edges": [[0, 5]]}, "weights": [1, 1]},
        False,
        "edge out of range",
    ),
    (
        "MaximumIndependentSet",
        {"graph": "SimpleGraph", "weight": "i32"},
        {"graph": {"num_vertices": 2, "edges": [[0, 1]]}, "weights": [1, 1, 1]},
        False,
        "weights length mismatch",
    ),
    (
        "DecisionMinimumVertexCover",
        {"graph": "SimpleGraph", "weight": "i32"},
        {"inner": {"graph": {"num_vertices": 2, "edges": [[0, 1]]}, "weights": [1]}, "bound": 1},
        False,
        "Decision wrapper: inner weights length mismatch",
    ),
    ("SubsetSum", {}, {"sizes": ["3", "0"], "target": "3"}, False, "zero size"),
    (
        "MIS",
        {"graph": "SimpleGraph", "weight": "i32"},
        {"graph": {"num_vertices": 2, "edges": [[0, 1]]}, "weights": [1, 1]},
        True,
        "alias name, valid instance",
    ),
]


def validate_section(pred, extractor, variants):
    """Every variant's canonical model example must validate (valid and checked); the
    hand-made cases must give their expected verdict."""
    out = []
    for name in variants:
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "p.json")
            rc, _, err = run(["timeout", "60", pred, "create", "--example", name, "-o", f], 70)
            if rc != 0:
                out.append({"problem": name, "status": "no-example"})
                continue
            rc, o, _ = run([extractor, "validate"], 60, stdin=open(f).read())
            v = json.loads(o)
            ok = v.get("valid") is True and v.get("checked") is True
            out.append({"problem": name, "status": "ok" if ok else "unexpected", "verdict": v})
    for typ, variant, data, expect, what in VALIDATE_CASES:
        rc, o, _ = run([extractor, "validate"], 60, stdin=json.dumps({"type": typ, "variant": variant, "data": data}))
        v = json.loads(o)
        out.append(
            {"problem": typ, "case": what, "status": "ok" if v.get("valid") is expect else "unexpected", "verdict": v}
        )
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", help="take pred and the extractor from env-VERSION.json")
    ap.add_argument("--pred", help="the pred binary")
    ap.add_argument("--extractor", help="the pred-extract binary built on the same library version")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", help="default: compare-results-<pred's version>.json next to this file")
    a = ap.parse_args()
    if not (a.pred and a.extractor):
        if not a.version:
            ap.error("give --version, or both --pred and --extractor")
        pred, extractor = recorded(a.version)
        a.pred, a.extractor = a.pred or pred, a.extractor or extractor
    rc, out, err = run([a.pred, "--version"], 30)
    if rc != 0:
        sys.exit(f"compare.py: {a.pred} --version failed: {last_line(err)}")
    pred_version = out.split()[-1]
    a.out = a.out or os.path.join(HERE, f"compare-results-{pred_version}.json")
    rc, out, err = run(["timeout", "60", a.pred, "list", "--rules", "--json"], 70)
    listed = json.loads(out)["rules"]
    rules = [r for r in listed if a.only in r["source"] + " " + r["target"]]
    rc, out, err = run([a.extractor, "rules"], 60)
    if rc != 0:
        sys.exit(f"compare.py: {a.extractor} rules failed: {last_line(out + err)}")
    edges = sorted((r["source"], r["target"]) for r in json.loads(out)["rules"])
    pred_edges = sorted((r["source"], r["target"]) for r in listed)
    t0, results = time.time(), []
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        futs = {ex.submit(one_rule, r, a.pred, a.extractor): r for r in rules}
        for f in cf.as_completed(futs):
            r = f.result()
            results.append(r)
            print(f"{r['status']:9} {r['source']} -> {r['target']}  {r.get('why', '')}", flush=True)
    results.sort(key=lambda r: (r["source"], r["target"]))
    rc, out, _ = run(["timeout", "60", a.pred, "list", "--json"], 70)
    variants = [v["name"] for v in json.loads(out)["variants"] if a.only in v["name"]]
    vres = validate_section(a.pred, a.extractor, variants)

    def count(s):
        return sum(r["status"] == s for r in results)

    why = {}
    for r in results:
        if r["status"] == "skipped":
            why[r["why"]] = why.get(r["why"], 0) + 1
    summary = {
        "pred": a.pred,
        "pred_version": pred_version,
        "extractor": a.extractor,
        "rules_listed": len(rules),
        "extractor_rules": {
            "count": len(edges),
            "same_as_pred": edges == pred_edges,
            "missing": [" -> ".join(e) for e in sorted(set(pred_edges) - set(edges))],
            "extra": [" -> ".join(e) for e in sorted(set(edges) - set(pred_edges))],
        },
        "tried": len(results) - count("skipped"),
        "equal": count("equal"),
        "different": count("different"),
        "skipped": count("skipped"),
        "skipped_by_reason": why,
        "solved_with": {s: sum(r.get("solver") == s for r in results) for s in ("brute-force", "ilp")},
        "seconds": round(time.time() - t0, 1),
    }

    def vcount(st):
        return sum(r["status"] == st for r in vres)

    summary["validate"] = {
        "variants_listed": len(variants),
        "examples_ok": vcount("ok") - len(VALIDATE_CASES),
        "no_example": vcount("no-example"),
        "unexpected": vcount("unexpected"),
        "hand_cases": len(VALIDATE_CASES),
    }
    json.dump({"summary": summary, "results": results, "validate": vres}, open(a.out, "w"), indent=1)
    print(json.dumps(summary, indent=1))
    bad = summary["different"] or summary["validate"]["unexpected"] or not edges == pred_edges
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
