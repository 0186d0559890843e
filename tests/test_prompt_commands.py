"""What the session prompt tells the agent holds, as the agent meets it: every documented command runs
in a session's sandbox, through the pred gateway, on the version the environment record is for
(instance.j2's lines for every version, versions/<V>/version.json's `prompt_facts` for its own).

Where the prompt warns about an answer (the "aggregate-value" refusal, brute force's "no solution"
past its reach, a bundle refused), the contrast shows the same command answering normally on an
instance where nothing is wrong, so a passing test means the warning is about pred, not about a
broken command. The prompt hash is per version and covers the version's facts.
"""

import json
from pathlib import Path

import jinja2
import pytest

from pytest_predbench.session import prompts
from pytest_predbench.session.sandbox import Sandbox
from pytest_predbench.verify import pin
from tests.support.sandboxes import session_channel

REPO = Path(__file__).resolve().parent.parent
TARGET_ALONE = "python3 -c \"import json; json.dump(json.load(open('bundle.json'))['target'], open('t.json', 'w'))\""
"""The prompt's one-liner that writes a bundle's target to t.json, exactly as instance.j2 has it."""
REFUSAL = "only supports aggregate-value solving"


@pytest.fixture(scope="module")
def sandbox(env_record, tmp_path_factory):
    made, _ = session_channel(env_record, tmp_path_factory.mktemp("state"))
    yield made
    made.close()


def run(sandbox: Sandbox, command: str) -> str:
    sandbox.set_pred_quota(None)
    return sandbox.run(command, timeout=60).output


def put(sandbox: Sandbox, name: str, value: dict) -> None:
    (sandbox.scratch / name).write_text(json.dumps(value))


def answer(sandbox: Sandbox, command: str) -> dict:
    return json.loads(run(sandbox, command))


def instance(problem: str, variant: dict, data: dict) -> dict:
    return {"type": problem, "variant": variant, "data": data}


def path_graph(n: int) -> dict:
    data = {"graph": {"num_vertices": n, "edges": [[i, i + 1] for i in range(n - 1)]}, "weights": [1] * n}
    return instance("MaximumIndependentSet", {"graph": "SimpleGraph", "weight": "i32"}, data)


def sat(clauses: list[list[int]], num_vars: int) -> dict:
    return instance("Satisfiability", {}, {"num_vars": num_vars, "clauses": [{"literals": c} for c in clauses]})


def test_the_template_quotes_the_commands_tested_here():
    text = prompts.template("instance.j2")
    quoted = (TARGET_ALONE, "pred-extract dims < p.json", "--to KColoring/SimpleGraph/K3", REFUSAL, "`--solver ilp`")
    for command in quoted:
        assert command in " ".join(text.split()), command


# -- for every version ----------------------------------------------------------------------------


def test_dims_sizes_a_search_and_brute_force_answers_no_solution_past_2_to_64(sandbox):
    put(sandbox, "p.json", path_graph(64))
    assert answer(sandbox, "pred-extract dims < p.json")["dims"] == [2] * 64
    assert answer(sandbox, "pred solve p.json --solver brute-force -q")["evaluation"] == "Max(None)"
    put(sandbox, "p.json", path_graph(12))  # contrast: within its reach, the optimum
    assert answer(sandbox, "pred-extract dims < p.json")["dims"] == [2] * 12
    assert answer(sandbox, "pred solve p.json --solver brute-force -q")["evaluation"] == "Max(6)"


def test_the_aggregate_value_refusal_means_no_target_solution_and_the_target_alone_is_solved(sandbox):
    put(sandbox, "p.json", sat([[1], [-1]], 1))  # unsatisfiable: its KSatisfiability target has no solution
    refused = run(sandbox, "pred reduce p.json --to KSatisfiability/K3 -o bundle.json -q && "
                  "pred solve bundle.json --solver brute-force; echo rc=$?")  # fmt: skip
    assert REFUSAL in refused and "KSatisfiability only supports" in refused and "rc=1" in refused, refused
    alone = answer(sandbox, f"{TARGET_ALONE} && pred solve t.json --solver brute-force -q")
    assert alone["problem"] == "KSatisfiability" and alone["evaluation"] == "Or(false)"
    put(sandbox, "p.json", path_graph(64))  # a target past brute force's reach gets the same refusal
    refused = run(sandbox, "pred reduce p.json --to MinimumVertexCover/SimpleGraph/i32 -o bundle.json -q && "
                  "pred solve bundle.json --solver brute-force")  # fmt: skip
    assert "MinimumVertexCover only supports aggregate-value solving" in refused, refused
    refused = run(
        sandbox,
        "pred create --example MinimumFeedbackVertexSet/i32 --to ILP/i32 -o p.json -q && "
        "pred reduce p.json --to ILP/i32 -o bundle.json -q && pred solve bundle.json --solver brute-force",
    )
    assert "ILP only supports aggregate-value solving" in refused, refused
    assert set(answer(sandbox, f"{TARGET_ALONE} && pred-extract dims < t.json")["dims"]) == {2**31}
    solved = answer(sandbox, "pred solve bundle.json --solver ilp -q")  # as the prompt says
    assert solved["evaluation"].startswith("Min(") and solved["intermediate"]["problem"] == "ILP"
    put(sandbox, "p.json", sat([[1, 2]], 2))  # contrast: a target with solutions
    solved = answer(sandbox, "pred reduce p.json --to KSatisfiability/K3 -o bundle.json -q && "
                    "pred solve bundle.json --solver brute-force -q")  # fmt: skip
    assert solved["evaluation"] == "Or(true)" and solved["intermediate"]["evaluation"] == "Or(true)"


def test_an_exact_variant_is_reached_by_its_full_name_or_a_pinned_path(sandbox):
    put(sandbox, "p.json", sat([[1, 2]], 2))
    bare = answer(sandbox, "pred reduce p.json --to KColoring -q")["path"]
    assert [s["variant"].get("k") for s in bare] == [None, "K3", "KN"], "the bare name goes on through a cast"
    exact = answer(sandbox, "pred reduce p.json --to KColoring/SimpleGraph/K3 -q")["path"]
    pinned = answer(
        sandbox,
        "pred path SAT KColoring/SimpleGraph/K3 -o path.json -q && "
        "pred reduce p.json --via path.json -o bundle.json -q && cat bundle.json",
    )["path"]
    assert exact == pinned == bare[:2]


def test_pred_extract_maps_a_hand_built_target_solution_back(sandbox):
    one_edge = {"graph": {"num_vertices": 2, "edges": [[0, 1]]}, "weights": [1, 1]}
    put(sandbox, "p.json", instance("MinimumVertexCover", {"graph": "SimpleGraph", "weight": "One"}, one_edge))
    mapped = answer(
        sandbox,
        "pred reduce p.json --to EnsembleComputation -o bundle.json -q && "
        "pred-extract bundle.json --config 1,0,2,3,0,0",
    )
    assert mapped["source_solution"] == [1, 1] and mapped["source_evaluation"] == "Min(2)" and mapped["target_matches"]


# -- each version's own facts ---------------------------------------------------------------------


FLOAT_TIE = REPO / "fixtures" / "calibration" / "0.6.0" / "float_tie_by_cancellation.json"
"""A QUBO with weights near 2^49: pred 0.6.0 refuses its own SpinGlass bundle of it, as it does that
of its canonical example."""


def test_the_version_facts_hold(sandbox, env_record):
    version = env_record.pred_version
    facts = " ".join(prompts.prompt_facts(version))
    one_edge = {"graph": {"num_vertices": 2, "edges": [[0, 1]]}, "weights": [1, 1]}
    put(sandbox, "p.json", instance("MinimumVertexCover", {"graph": "SimpleGraph", "weight": "One"}, one_edge))
    run(sandbox, "pred reduce p.json --to EnsembleComputation -o bundle.json -q")
    bundle = json.loads((sandbox.scratch / "bundle.json").read_text())
    bundle["target"]["data"]["budget"] -= 1
    put(sandbox, "edited.json", bundle)
    edited = run(sandbox, "pred solve edited.json --solver brute-force; echo rc=$?")
    if version == "0.5.0":
        assert "has no `extract` command" in facts and "does not check the bundle's `target`" in facts
        assert "unrecognized subcommand 'extract'" in run(sandbox, "pred extract bundle.json --config 0,1,2,3,0,0")
        assert "Malformed bundle" not in edited and "panicked" in edited and "rc=101" in edited, edited
        return
    assert version == "0.6.0", f"no facts checked for pred {version}: add them here"
    assert "`pred extract bundle.json --config 1,0,1`" in facts and "Malformed bundle" in facts
    native = answer(sandbox, "pred extract bundle.json --config 1,0,2,3,0,0 -q")
    ours = answer(sandbox, "pred-extract bundle.json --config 1,0,2,3,0,0")
    assert native["solver"] == "external" and native["solution"] == ours["source_solution"] == [1, 1]
    assert {"evaluation", "intermediate"} <= set(native)
    assert "Malformed bundle: `target.data` does not match" in edited and "rc=1" in edited, edited
    example = "pred create --example QUBO/f64 --to SpinGlass/SimpleGraph/f64 -o q.json -q"
    assert example.split(" -o")[0] in facts
    run(sandbox, example)
    for qubo in (json.loads((sandbox.scratch / "q.json").read_text()), json.loads(FLOAT_TIE.read_text())["source"]):
        put(sandbox, "q.json", qubo)
        run(sandbox, "pred reduce q.json --to SpinGlass/SimpleGraph/f64 -o bundle.json -q")
        zeros = ",".join("0" * len(qubo["data"]["matrix"]))
        for command in ("pred solve bundle.json --solver brute-force", f"pred extract bundle.json --config {zeros}"):
            assert "Malformed bundle" in run(sandbox, command), f"pred refuses its own float bundle: {command}"
        mapped = answer(sandbox, f"pred-extract bundle.json --config {zeros}")
        assert mapped["target_matches"] and mapped["source_evaluation"] == "Min(0)"
        alone = answer(sandbox, f"{TARGET_ALONE} && pred solve t.json --solver brute-force -q")
        assert alone["problem"] == "SpinGlass" and alone["evaluation"].startswith("Min(")


def test_the_aggregate_only_edges_the_facts_name_are_those_pred_reduce_refuses(sandbox, env_record):
    run(sandbox, "pred-extract rules > rules.json")  # long: the observation would cut it
    rules = json.loads((sandbox.scratch / "rules.json").read_text())["rules"]
    aggregate = [(r["source"], r["target"]) for r in rules if not r["witness"]]
    facts = " ".join(prompts.prompt_facts(env_record.pred_version))
    named = [f"{source} -> {target}" for source, target in aggregate]
    assert aggregate and all(edge in facts for edge in named), f"the facts must name {named}"
    assert f"lists {len(named)} edges that carry no solution back" in facts
    contrast = ("MinimumVertexCover/SimpleGraph/i32", "MaximumIndependentSet/SimpleGraph/i32")  # witness-capable
    for source, target in [*aggregate, contrast]:
        if "rc=0" not in run(sandbox, f"pred create --example {source} -o p.json -q; echo rc=$?"):
            one_edge = {"graph": {"num_vertices": 2, "edges": [[0, 1]]}, "weights": [1, 1]}  # no canonical example
            put(sandbox, "p.json", instance(source.split("/")[0], variant_of(sandbox, source), one_edge))
        problem = json.loads((sandbox.scratch / "p.json").read_text())
        to = {"name": target.split("/")[0], "variant": variant_of(sandbox, target)}
        step = {"from": {"name": problem["type"], "variant": problem["variant"]}, "to": to, "step": 1}
        put(sandbox, "via.json", {"path": [step], "steps": 1})
        reduced = run(sandbox, "pred reduce p.json --via via.json -o bundle.json -q; echo rc=$?")
        if (source, target) == contrast:
            assert "rc=0" in reduced, reduced
        else:
            assert "Reduction bundles require witness-capable paths" in reduced and "rc=1" in reduced, reduced


def variant_of(sandbox: Sandbox, spec: str) -> dict:
    return answer(sandbox, f"pred show {spec} --json")["variant"]


# -- the prompt hash is per version ---------------------------------------------------------------


def test_the_prompt_hash_covers_the_version_and_its_facts(monkeypatch):
    hashes = {v: prompts.prompt_hash(v) for v in pin.supported()}
    assert len(set(hashes.values())) == len(hashes) == len(pin.supported()) >= 2
    version = pin.supported()[0]
    changed = pin.facts(version).model_copy(update={"prompt_facts": [*pin.facts(version).prompt_facts, "more"]})
    monkeypatch.setattr(pin, "facts", lambda v: changed)
    prompts._prompt_hash.cache_clear()
    try:
        assert prompts.prompt_hash(version) != hashes[version], "a changed fact changes the hash"
    finally:
        prompts._prompt_hash.cache_clear()


@pytest.mark.parametrize("version", pin.supported())
def test_each_version_renders_its_own_facts_as_a_list(version):
    text = jinja2.Template(prompts.template("instance.j2"), undefined=jinja2.StrictUndefined).render(
        scratch_dir="/scratch", source_dir="/src", pred_version=version, pred_call_limit=1, memory_mib=1,
        refused_exit=125, processes=1, disk_mib=1, command_timeout=60, finish_word="DONE", step_limit=1,
        prompt_facts=prompts.prompt_facts(version), **prompts.brute_force_reach(60),
    )  # fmt: skip
    facts = prompts.prompt_facts(version)
    assert facts and all(f"\n- {fact}\n" in text for fact in facts)
    others = [f for v in pin.supported() if v != version for f in prompts.prompt_facts(v)]
    assert not any(fact in text for fact in others), "another version's facts leak in"
