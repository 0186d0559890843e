#!/usr/bin/env python3
"""predbench-probe: the random baseline's hands inside the agent's sandbox (stdlib Python, and the
verifier's own evaluation.py and instances.py, installed next to it).

The baseline (session/baseline.py) has no model: it drives this script, one sandbox command per
rule, under the same sandbox, pred-call quota, wall time and command timeout as any model. Every
`pred` and `pred-extract` call it makes goes through the harness's pred gateway, which books it, so the
baseline pays for its calls exactly as a model does; it sees nothing a model could not.

    predbench-probe catalogue OUT            the witness-carrying one-step rules of pred (1 call)
    predbench-probe rule --rules FILE --index I --seed S --calls C --deadline SECONDS --out DIR
                         [--instance FILE]   only that instance (the funnel's: report/funnel.py)

For one rule A -> B, `rule` tries small instances of A — pred's canonical example of the rule (or
of A), then random variants: pred's own random graphs, random formulas, and mutations of the
canonical example (numbers changed, list entries dropped, emptied or repeated, sizes past i32) —
each checked by the library's own constructors (`pred-extract validate`). For each it reduces
one step (`pred reduce --via`), solves the target and the source by brute force and compares the
round trip: validity for yes/no sources, the optimum for optimization sources, feasibility when
the target has no solution; a panic (exit 101) is a crash. A failed round trip is confirmed as the
verifier will judge it (the source valid, the extraction redone by pred-extract, an optimal target
cross-checked by ILP, "no solution" only when brute force can be trusted, the reduction
deterministic) before it is written as a certificate and handed to `submit-certificate`; an
unconfirmed one is reported, never submitted, since a false alarm would be the baseline's own bug.

It prints nothing but one line, `PROBE {json}`, that the harness reads: the rule, what each
instance showed, what was submitted, and why it stopped (`done`, `allowance`, `deadline`,
`quota`). Evaluations and the instance checks are the verifier's own code (imported below).
"""

import argparse
import copy
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

# The verifier's own modules (verify/evaluation.py, verify/instances.py, stdlib only), installed
# next to this script in the sandbox: the probe judges an evaluation and an instance with the very
# code the verifier will, not a copy of it.
from evaluation import Evaluation
from instances import arithmetic_problem, literal_problem

PRED = "pred"
EXTRACT = "pred-extract"
SUBMIT = "submit-certificate"
QUOTA_EXIT = 125
"""What the pred gateway's client exits with once the session's pred calls are used up."""
PANIC_EXIT = 101
SOLVE_SECONDS = 5
"""Per solve (brute force, or pred's ILP where brute force cannot reach): a small instance solves
in far less, and what solves here solves within the verifier's 30 s."""
CROSS_CHECK_SECONDS = 25
"""pred's ILP on an optimal target, as the verifier will cross-check it: only before a submission."""
MARGIN_SECONDS = 1.0
ENUMERATION_LIMIT = 2**64
MAX_SOLUTION_LENGTH = 4096
MAX_CERTIFICATE_BYTES = 256 * 1024
BIG_NUMBER = 3_000_000_000
"""Past i32 (2^31 - 1), within the exact range: what a rule into an i32 problem must handle."""
MAX_INSTANCE_BYTES = 20_000
"""A mutated instance larger than this is not a small instance: skipped."""


class QuotaUsedUp(Exception):
    """The sandbox refused a call: the session's pred calls are used up."""


class OutOfTime(Exception):
    """The command's deadline is near: stop, keeping what was found."""


# -- random instances ----------------------------------------------------------------------


def _sites(value: object) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """Paths to the numeric leaves (numbers, and numbers written as strings), to the lists whose length
    may change (not a tuple of scalars inside a list, like an edge), and to the leaves that are
    quantities rather than indices: a field's value, or an entry of a flat list that is a field's
    value (sizes, weights, a bound), never an entry of a pair (an edge)."""
    leaves, lists, quantities = [], [], []
    stack: list[tuple[object, tuple, bool]] = [(value, (), False)]
    while stack:
        item, where, quantity = stack.pop()
        if isinstance(item, dict):
            stack.extend((inner, (*where, key), True) for key, inner in sorted(item.items()))
        elif isinstance(item, list):
            scalars = not any(isinstance(inner, list | dict) for inner in item)
            if quantity or not scalars:
                lists.append(where)
            flat = quantity and scalars
            stack.extend((inner, (*where, i), flat) for i, inner in enumerate(item))
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int | float) or (isinstance(item, str) and item.isdigit()):
            leaves.append(where)
            if quantity:
                quantities.append(where)
    return sorted(leaves, key=str), sorted(lists, key=str), sorted(quantities, key=str)


def _get(value: object, path: tuple) -> object:
    for key in path:
        value = value[key]
    return value


def _set(value: object, path: tuple, new: object) -> None:
    _get(value, path[:-1])[path[-1]] = new


def _as_kind(old: object, number: int) -> object:
    """`number` written as `old` is: an int, a float, or a string of digits."""
    if isinstance(old, str):
        return str(max(0, number))
    if isinstance(old, float):
        return float(number)
    return number


def mutate(instance: dict, rng: random.Random) -> tuple[dict, str]:
    """The instance with one to three random changes to its data, and what they were."""
    mutant = copy.deepcopy(instance)
    data = mutant["data"]
    i32 = "i32" in (mutant.get("variant") or {}).values()
    done = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        leaves, lists, quantities = _sites(data)
        nonempty = [p for p in lists if _get(data, p)]
        weights = {"tweak": 4 * bool(leaves), "negate": bool(leaves), "big": bool(quantities) and not i32}
        weights |= dict.fromkeys(("drop", "empty", "repeat", "copy"), 2 * bool(nonempty))
        weights["drop"] *= 2
        ops = [op for op, weight in weights.items() for _ in range(int(weight))]
        if not ops:
            break
        op = rng.choice(ops)
        if op in ("tweak", "big", "negate"):
            path = rng.choice(quantities if op == "big" else leaves)
            old = _get(data, path)
            value = float(old) if isinstance(old, float) else int(old)
            if op == "big":
                new = BIG_NUMBER + rng.randrange(3)
            elif op == "negate":
                new = -value if value else -1
                if isinstance(old, str):
                    continue
            else:
                new = rng.choice([value + 1, value - 1, rng.randrange(0, 6), rng.randrange(1, 10), 0, 1, 2])
            _set(data, path, _as_kind(old, int(new)))
            done.append(f"{op} {'.'.join(map(str, path))}")
        else:
            path = rng.choice(nonempty)
            items = _get(data, path)
            if op == "drop":
                del items[rng.randrange(len(items))]
            elif op == "empty":
                items.clear()
            elif op == "repeat":
                items.append(copy.deepcopy(rng.choice(items)))
            elif len(items) >= 2:  # copy: one entry becomes another (a repeated literal)
                a, b = rng.sample(range(len(items)), 2)
                items[a] = copy.deepcopy(items[b])
            done.append(f"{op} {'.'.join(map(str, path)) or 'data'}")
    return mutant, ", ".join(done) or "unchanged"


def random_formula(instance: dict, rng: random.Random) -> dict | None:
    """A random CNF formula in the shape of `instance` (num_vars, clauses of literals), or None:
    pred has no random generator for formulas. k-SAT variants keep their clause length."""
    data = instance.get("data")
    if not (isinstance(data, dict) and isinstance(data.get("num_vars"), int) and isinstance(data.get("clauses"), list)):
        return None
    k = {"K2": 2, "K3": 3}.get((instance.get("variant") or {}).get("k", ""))
    num_vars = rng.randint(1, 8) if k is None else rng.randint(k - 1 if k > 1 else 1, 8)
    clauses = []
    for _ in range(rng.randint(0, 6)):
        width = k or rng.randint(1, 4)
        literals = [rng.choice((1, -1)) * rng.randint(1, num_vars) for _ in range(width)]
        clauses.append({"literals": literals})
    if k and num_vars < 1:
        return None
    formula = copy.deepcopy(instance)
    formula["data"] = {**data, "num_vars": num_vars, "clauses": clauses}
    return formula


# -- one sandbox command's worth of work -----------------------------------------------------


class Probe:
    """Counted calls to pred and pred-extract within the command's deadline. The rule's allowance
    is checked between instances only, so a finding is always confirmed to the end."""

    def __init__(self, workdir: Path, deadline: float):
        self.workdir = workdir
        self.deadline = deadline
        self.calls = 0

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, program: str, *args: str, stdin: str | None = None, limit: float | None = None):
        """One counted call: (exit code, stdout, stderr)."""
        seconds = self.left() - MARGIN_SECONDS
        if limit is not None:
            seconds = min(seconds, limit + 5)
        if seconds <= 0.5:
            raise OutOfTime("deadline")
        self.calls += 1
        try:
            done = subprocess.run(
                [program, *args], input=stdin, capture_output=True, text=True, timeout=seconds, cwd=self.workdir
            )
        except subprocess.TimeoutExpired:
            raise OutOfTime("deadline") from None
        if done.returncode == QUOTA_EXIT and "limit is used up" in done.stderr:
            raise QuotaUsedUp()
        return done.returncode, done.stdout, done.stderr

    def write(self, name: str, value: object) -> str:
        (self.workdir / name).write_text(json.dumps(value))
        return name

    def pred_json(self, *args: str, limit: float | None = None) -> tuple[int, dict | None, str]:
        code, out, err = self.run(PRED, *args, limit=limit)
        try:
            answer = json.loads(out) if code == 0 else None
        except ValueError:
            answer = None
        return code, answer if isinstance(answer, dict) else None, err

    def extractor(self, *args: str, stdin: object | None = None) -> tuple[int, dict | None]:
        code, out, _ = self.run(EXTRACT, *args, stdin=None if stdin is None else json.dumps(stdin))
        try:
            answer = json.loads(out)
        except ValueError:
            answer = None
        return code, answer if isinstance(answer, dict) else None

    def solve(
        self, problem_file: str, solver: str = "brute-force", seconds: float = SOLVE_SECONDS
    ) -> tuple[int, dict | None, str]:
        seconds = int(max(1, min(seconds, self.left() - 2 * MARGIN_SECONDS)))
        return self.pred_json("solve", problem_file, "--solver", solver, "--timeout", str(seconds), limit=seconds)


def spec(problem: dict) -> str:
    variant = problem.get("variant") or {}
    return "/".join([problem["name"], *(variant[k] for k in sorted(variant))])


def first_error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:") or "panicked" in line]
    return (errors or lines or [""])[0][:160]


class Finding(Exception):
    """A round trip that failed, confirmed as the verifier will judge it: the certificate."""

    def __init__(self, certificate: dict):
        super().__init__(certificate["violation"])
        self.certificate = certificate


class Skip(Exception):
    """The instance shows nothing about the rule (or cannot be judged within the limits)."""


class RuleTrial:
    """Instances of one rule's source, each through the round trip."""

    def __init__(self, probe: Probe, rule: dict, rng: random.Random):
        self.probe = probe
        self.rule = rule
        self.rng = rng
        self.source = rule["source"]
        self.target = rule["target"]
        self.label = f"{spec(self.source)} -> {spec(self.target)}"
        self.via = {"path": [{"from": self.source, "to": self.target}]}
        self.random_graphs = True
        """False once pred says it has no random generator for the source problem."""

    # -- instances ------------------------------------------------------------------------

    def canonical(self) -> tuple[dict | None, str, bool]:
        """pred's canonical example of the rule, else of the source problem, else of another of its
        variants relabelled (the constructors' check decides whether that is one); and whether it
        was checked by the library's constructors already."""
        for args, how in (
            (("--example", spec(self.source), "--to", spec(self.target)), "rule example"),
            (("--example", spec(self.source)), "problem example"),
            (("--example", self.source["name"]), "another variant's example, relabelled"),
        ):
            _, instance, _ = self.probe.pred_json("create", *args, "-q")
            if instance is None or instance.get("type") != self.source["name"]:
                continue
            if instance.get("variant") == self.source["variant"]:
                return instance, how, False
            instance["variant"] = dict(self.source["variant"])
            return (instance, how, True) if self.valid(instance) else (None, how, False)
        return None, "no example", False

    def variant(self, base: dict | None) -> tuple[dict, str] | None:
        """A random variant of the source: pred's own random graph, a random formula, or a mutation
        of the canonical example (whichever apply), or None when none does."""
        kinds = ["mutation", "mutation"] if base is not None else []
        if base is not None and random_formula(base, self.rng) is not None:
            kinds += ["formula", "formula"]
        if self.random_graphs and (base is None or "graph" in base.get("data", {})):
            kinds.append("graph")
        if not kinds:
            return None
        kind = self.rng.choice(kinds)
        if kind == "graph":
            instance = self.random_graph()
            if instance is not None:
                return instance, "pred's random graph"
            self.random_graphs = False
            return self.variant(base)
        if kind == "formula":
            return random_formula(base, self.rng), "random formula"
        mutant, what = mutate(base, self.rng)
        return mutant, f"mutation: {what}"

    def random_graph(self) -> dict | None:
        """pred's own random graph of the source problem, relabelled to the rule's variant, with
        random numbers when its weights are not unit."""
        n, p = self.rng.randint(2, 7), self.rng.choice(("0.3", "0.5", "0.7"))
        seed = str(self.rng.randrange(10**6))
        args = ("create", self.source["name"], "--random", "--num-vertices", str(n), "--edge-prob", p, "--seed", seed)
        _, instance, _ = self.probe.pred_json(*args, "-q")
        if instance is None or instance.get("type") != self.source["name"]:
            return None
        instance["variant"] = dict(self.source["variant"])
        if "One" not in instance["variant"].values():
            instance, _ = mutate(instance, self.rng)
        return instance

    def valid(self, instance: dict) -> bool:
        """By the library's own constructors (pred-extract validate) and the verifier's own checks."""
        if literal_problem(instance, "source") or arithmetic_problem(instance, "source"):
            return False
        if len(json.dumps(instance)) > MAX_INSTANCE_BYTES:
            return False
        _, answer = self.probe.extractor("validate", stdin=instance)
        return bool(answer and answer.get("valid") is True)

    # -- the round trip -------------------------------------------------------------------

    def reduce(self, out: str) -> tuple[int, dict | None, str]:
        code, _, err = self.probe.run(PRED, "reduce", "source.json", "--via", "via.json", "-o", out, "-q")
        if code != 0:
            return code, None, err
        try:
            bundle = json.loads((self.probe.workdir / out).read_text())
        except (OSError, ValueError):
            return code, None, "no readable bundle"
        if not isinstance(bundle, dict) or len(bundle.get("path") or []) != 2 or "target" not in bundle:
            return code, None, "not a one-step bundle"
        return code, bundle, ""

    def check(self, source: dict, checked: bool) -> str:
        """One instance through the round trip: what it showed, or raises Skip or Finding."""
        if literal_problem(source, "source") or arithmetic_problem(source, "source"):
            raise Skip("not a real instance (its literals or numbers)")
        self.checked = checked
        self.instance = source
        self.probe.write("source.json", source)
        self.probe.write("via.json", self.via)
        code, bundle, err = self.reduce("bundle.json")
        if code == PANIC_EXIT:
            self.reduce_crash(err)
        if bundle is None:
            raise Skip(f"reduce: {first_error(err) or 'failed'}")
        self.target_data = bundle["target"]
        if arithmetic_problem(self.target_data, "target"):
            raise Skip("the target's numbers are too large to judge")
        self.probe.write("target.json", self.target_data)
        code, answer, err = self.probe.solve("bundle.json")
        if code == PANIC_EXIT:
            self.extraction_crash()
            raise Skip("pred panics solving the bundle, not in the rule's extraction")
        if answer is not None and "solution" in (answer.get("intermediate") or {}):
            return self.judge(answer, optimum_trusted=True)
        if code != 0 and "aggregate-value" not in err:  # pred's words for "no witness found"
            raise Skip(f"the target is not solved: {first_error(err) or 'no answer'}")
        return self.no_witness()

    def judge(self, answer: dict, optimum_trusted: bool) -> str:
        """Compare the round trip of a solved bundle: the extraction's validity, and for an
        optimization source its value against the source's optimum."""
        intermediate = answer["intermediate"]
        target_eval, extracted = (
            Evaluation.parse(intermediate.get("evaluation")),
            Evaluation.parse(answer.get("evaluation")),
        )
        if not (target_eval.understood and extracted.understood and target_eval.valid):
            raise Skip(f"evaluations {target_eval} and {extracted} are not judged")
        if target_eval.optimizing and not optimum_trusted:
            # the verifier trusts an optimum only from brute force; this one is pred's ILP's
            return f"not judged ({extracted} back from the target's {target_eval}, an optimum only pred's ILP found)"
        solution = intermediate["solution"]
        if not extracted.valid:
            if target_eval.optimizing and not self.source_optimum()[0].valid:
                return "holds (the source has no solution: no extraction can be valid)"
            self.confirm_extraction("unsound_extraction", solution, target_eval)
        if extracted.optimizing:
            best, best_solution = self.source_optimum()
            if best.better_than(extracted):
                self.confirm_extraction("suboptimal_extraction", solution, target_eval, best, best_solution)
        return f"holds ({extracted} back from the target's {target_eval})"

    def source_optimum(self) -> tuple[Evaluation, list | None]:
        _, answer, err = self.probe.solve("source.json")
        if answer is None:
            raise Skip(f"the source is not solved: {first_error(err) or 'no answer'}")
        best = Evaluation.parse(answer.get("evaluation"))
        if not best.understood:
            raise Skip(f"the source evaluates as {best}")
        solution = answer.get("solution")
        return best, solution if best.valid and isinstance(solution, list) else None

    def no_witness(self) -> str:
        """Brute force found no target solution: trusted when the target has fewer than 2^64
        configurations (the verifier's rule); past that, pred's ILP solves the bundle instead."""
        _, dims = self.probe.extractor("dims", stdin=self.target_data)
        sizes = (dims or {}).get("dims")
        if not isinstance(sizes, list):
            raise Skip("the target's configuration space is unknown")
        size = math.prod(sizes)
        if size < ENUMERATION_LIMIT:
            return self.incomplete("brute-force", f"brute force tries all {size} target configurations")
        code, answer, err = self.probe.solve("bundle.json", "ilp")
        if code == PANIC_EXIT:
            raise Skip("pred panics solving the target with ILP")
        if answer is not None and "solution" in (answer.get("intermediate") or {}):
            return self.judge(answer, optimum_trusted=False)
        if "found no solution" in err:
            return self.incomplete("ilp", "pred's ILP finds no target solution")
        raise Skip(f"the target is beyond brute force, and pred's ILP does not solve it: {first_error(err)}")

    def incomplete(self, solver: str, how: str) -> str:
        """The target has no solution (by `solver`): a bug when the source has one."""
        best, solution = self.source_optimum()
        if not best.valid or solution is None:
            return "holds (neither side has a solution)"
        code, answer, err = self.probe.solve("target.json", solver)  # the verifier's own call
        found = Evaluation.parse((answer or {}).get("evaluation"))
        if solver == "ilp":
            decided = answer is None and "found no solution" in err
        else:
            decided = answer is not None and found.understood and not ("solution" in answer and found.valid)
        if not decided:
            raise Skip(f"pred's {solver} does not decide the target file as it did the bundle")
        self.confirm_instance()
        note = f"the source has {best}; {how}: no solution"
        raise Finding(self.certificate("incomplete_reduction", self.target_data, note, source_solution=solution))

    # -- crashes ----------------------------------------------------------------------------

    def reduce_crash(self, err: str) -> None:
        """pred panicked reducing: again on a second try, on a valid source, is a crash."""
        self.confirm_valid()
        code, _, _ = self.reduce("again.json")
        if code != PANIC_EXIT:
            raise Skip("pred panicked reducing once, not twice")
        target = {"type": self.target["name"], "variant": dict(self.target["variant"]), "data": None}
        raise Finding(self.certificate("crash", target, f"pred panics reducing: {first_error(err)}"))

    def extraction_crash(self) -> None:
        """pred panicked solving the bundle: a crash when the library panics mapping a valid target
        solution back."""
        _, answer, _ = self.probe.solve("target.json")
        solution = (answer or {}).get("solution")
        if not (isinstance(solution, list) and solution and Evaluation.parse((answer or {}).get("evaluation")).valid):
            return
        found = self.extract(solution)
        if not found or found.get("error") != "panic":
            return
        self.confirm_instance()
        what = f"({found.get('stage') or 'extraction'}): {str(found.get('message'))[:200]}"
        note = f"the library panics mapping a valid target solution back {what}"
        raise Finding(self.certificate("crash", self.target_data, note, target_solution=solution))

    # -- confirmation, as the verifier will judge ----------------------------------------------

    def confirm_valid(self) -> None:
        if not self.checked and not self.valid(self.instance):
            raise Skip("a failed round trip on an instance the library's constructors refuse")
        self.checked = True

    def confirm_instance(self) -> None:
        """The source is valid, and pred derives the same target from it again (a rule that does not
        cannot be judged on one derivation)."""
        self.confirm_valid()
        _, again, _ = self.reduce("again.json")
        if again is None or again.get("target") != self.target_data:
            raise Skip("the rule derives a different target the second time")

    def extract(self, target_solution: list) -> dict | None:
        _, answer = self.probe.extractor("bundle.json", "--config", ",".join(str(v) for v in target_solution))
        return answer

    def confirm_extraction(
        self, violation: str, solution: object, target_eval: Evaluation,
        best: Evaluation | None = None, better: list | None = None,
    ) -> None:  # fmt: skip
        if not isinstance(solution, list) or not solution or len(solution) > MAX_SOLUTION_LENGTH:
            raise Skip("the target solution cannot go into a certificate")
        self.confirm_valid()
        found = self.extract(solution)
        mapped_back = found and "error" not in found and found.get("source_solution_in_range")
        if not (mapped_back and found.get("target_matches")):
            raise Skip("pred-extract does not map the target solution back as pred solve did")
        mapped = Evaluation.parse(found.get("source_evaluation"))
        if violation == "unsound_extraction" and mapped.valid:
            raise Skip("pred-extract's extraction is valid")
        if violation == "suboptimal_extraction" and not (best and better and mapped.valid and best.better_than(mapped)):
            raise Skip("pred-extract's extraction is not beaten by the source's optimum")
        if target_eval.optimizing:  # the verifier cross-checks an optimum with pred's ILP where it applies
            _, ilp, _ = self.probe.solve("target.json", "ilp", CROSS_CHECK_SECONDS)
            if ilp is not None and not Evaluation.parse(ilp.get("evaluation")).same_value(target_eval):
                raise Skip(f"pred's ILP disagrees on the target's optimum ({ilp.get('evaluation')} vs {target_eval})")
        self.confirm_instance()
        what = "optimal" if target_eval.optimizing else "valid"
        note = f"the target's {what} solution ({target_eval}) maps back to {mapped}" + (
            f", while the source's optimum is {best}" if better else ""
        )
        raise Finding(
            self.certificate(
                violation, self.target_data, note, target_solution=solution,
                source_solution=found["source_solution"], better_source_solution=better,
            )
        )  # fmt: skip

    def certificate(self, violation: str, target: dict, note: str, **solutions: object) -> dict:
        source = self.instance
        cert = {
            "violation": violation,
            "rule": f"{self.source['name']} -> {self.target['name']}",
            "source": {"type": source["type"], "variant": source["variant"], "data": source["data"]},
            "target": {"type": target["type"], "variant": target["variant"], "data": target["data"]},
            **{k: v for k, v in solutions.items() if v is not None},
            "solver": "brute-force",
            "note": f"predbench random baseline: {note}"[:4000],
        }
        if len(json.dumps(cert)) > MAX_CERTIFICATE_BYTES:
            raise Skip("the certificate would be over the size limit")
        return cert


def run_rule(args: argparse.Namespace) -> dict:
    """Try one rule until a certificate, the allowance, the instance limit, the deadline or the
    quota; the summary of what each instance showed."""
    started = time.monotonic()
    rule = json.loads(Path(args.rules).read_text())["rules"][args.index]
    workdir = Path(args.out) / f"rule-{args.index}"
    workdir.mkdir(parents=True, exist_ok=True)
    probe = Probe(workdir, started + args.deadline)
    rng = random.Random(args.seed)
    trial = RuleTrial(probe, rule, rng)
    entries: list[dict] = []
    summary: dict = {"rule": trial.label, "index": args.index, "instances": entries, "stopped": "done"}
    try:
        if args.instance:
            base, how, checked = _given(args.instance), "the given instance", False
        else:
            base, how, checked = trial.canonical()
        instance = None if args.variants_only else base
        most = 1 if args.instance else args.instances
        while len(entries) < most:
            if entries and probe.calls >= args.calls:
                raise OutOfTime("allowance")
            if instance is None:
                made = trial.variant(base)
                if made is None:
                    break
                (instance, how), checked = made, False
            entry = {"from": how}
            entries.append(entry)
            if not checked and not trial.valid(instance):
                entry["outcome"] = "refused by the library's constructors"
            else:
                try:
                    entry["outcome"] = trial.check(instance, checked)
                except Skip as skip:
                    entry["outcome"] = f"skipped: {skip}"
            instance = None
        if not entries:
            summary["stopped"] = "no instance"
    except Finding as found:
        entries[-1]["outcome"] = f"fails: {found.certificate['violation']}"
        summary["submitted"] = submit(found.certificate, workdir)
    except (OutOfTime, QuotaUsedUp) as stop:
        summary["stopped"] = "quota" if isinstance(stop, QuotaUsedUp) else str(stop)
        if entries and "outcome" not in entries[-1]:
            entries[-1]["outcome"] = "interrupted"
    summary["calls"] = probe.calls
    summary["seconds"] = round(time.monotonic() - started, 2)
    return summary


def _given(path: str) -> dict | None:
    """The instance in `path` (a problem file), or None when it is not one."""
    try:
        instance = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return instance if isinstance(instance, dict) and isinstance(instance.get("variant"), dict) else None


def submit(certificate: dict, workdir: Path) -> str:
    """Hand the certificate to the harness through the one channel every session uses."""
    path = workdir / "certificate.json"
    path.write_text(json.dumps(certificate, indent=1))
    done = subprocess.run([SUBMIT, str(path)], capture_output=True, text=True, timeout=30)
    return certificate["violation"] if done.returncode == 0 else f"not submitted: {first_error(done.stderr)}"


def catalogue(out: str) -> dict:
    """The one-step rules that carry a solution back (`pred export-graph`), sorted by name."""
    graph_file = Path(out).with_suffix(".graph.json")
    graph_file.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([PRED, "export-graph", "-o", str(graph_file), "-q"], capture_output=True, text=True)
    if done.returncode == QUOTA_EXIT:
        raise QuotaUsedUp()
    if done.returncode != 0:
        raise SystemExit(f"predbench-probe: pred export-graph failed: {first_error(done.stderr)}")
    graph = json.loads(graph_file.read_text())
    nodes = graph["nodes"]
    rules = []
    for edge in graph["edges"]:
        if not edge.get("witness"):  # pred reduce refuses a rule that cannot carry a solution back
            continue
        source, target = nodes[edge["source"]], nodes[edge["target"]]
        ends = (("source", source), ("target", target))
        rules.append({end: {"name": node["name"], "variant": node["variant"]} for end, node in ends})
    rules.sort(key=lambda r: (spec(r["source"]), spec(r["target"])))
    Path(out).write_text(json.dumps({"rules": rules}))
    return {"rules": len(rules), "edges": len(graph["edges"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="predbench-probe", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cat = sub.add_parser("catalogue")
    cat.add_argument("out")
    rule = sub.add_parser("rule")
    rule.add_argument("--rules", required=True)
    rule.add_argument("--index", type=int, required=True)
    rule.add_argument("--seed", type=int, required=True)
    rule.add_argument("--calls", type=int, required=True, help="pred calls this rule may use")
    rule.add_argument("--instances", type=int, default=1000, help="random variants after the canonical example")
    rule.add_argument("--variants-only", action="store_true", help="random variants only, not the example itself")
    rule.add_argument("--deadline", type=float, required=True, help="seconds this command may take")
    rule.add_argument("--out", required=True)
    rule.add_argument("--instance", help="try only this instance (a problem file), not the example or variants")
    args = parser.parse_args(argv)
    try:
        summary = catalogue(args.out) if args.command == "catalogue" else run_rule(args)
    except QuotaUsedUp:
        summary = {"stopped": "quota"}
    print("PROBE " + json.dumps(summary, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
