"""A scripted demo model that finds a minted bug the way demo/finder finds the real one: from a pool's
validating certificate it takes only the source instance and the rule, and REPRODUCES the rest with
pred inside the session's sandbox — it writes the instance, reduces it one step (`pred reduce --via`),
solves the bundle (and, where the violation needs it, the source), builds the certificate from pred's
output and submits it. On the minted build that output shows the planted bug; on the pristine build
the same script gets the rule's correct answer, so the certificate it builds is rejected there.

`write_demo(pool, bug_id, folder)` writes the script and a model-settings file naming it
`demo/minted` (pass `--model-settings=<folder>/models.toml --models demo/minted`).
"""

import json
from pathlib import Path

from pytest_predbench.verify.certificate import Certificate
from pytest_predbench.verify.hostpaths import SOURCE_DIR
from pytest_predbench.verify.pool import Pool

MODEL = "demo/minted"

BUILD = """import json
bundle = json.load(open("bundle.json"))
solved = json.load(open("solved.json")) if {solves_bundle} else {{}}
best = json.load(open("best.json")) if {solves_source} else {{}}
cert = {{"violation": {violation!r}, "rule": {rule!r}, "source": bundle["source"], "target": bundle["target"]}}
if {solves_bundle}:
    cert["target_solution"] = solved["intermediate"]["solution"]
    cert["source_solution"] = solved["solution"]
if {violation!r} == "suboptimal_extraction":
    cert["better_source_solution"] = best["solution"]
if {violation!r} == "incomplete_reduction":
    cert["source_solution"] = best["solution"]
cert["note"] = "built from pred's own output: the rule's round trip on this instance"
json.dump(cert, open("cert.json", "w"), indent=1)
print(json.dumps(cert)[:600])
"""


def turns(certificate: Certificate) -> list[dict]:
    """The model's replies: each a bash command run in the sandbox, as finder.json's."""
    source, target = certificate.source, certificate.target
    violation = certificate.violation.value
    if violation == "crash":
        raise ValueError("a crash certificate is not rebuilt from pred's output; pick another minted bug")
    solves_bundle = violation in ("unsound_extraction", "suboptimal_extraction")
    solves_source = violation in ("suboptimal_extraction", "incomplete_reduction")
    rule = f"{source.type} -> {target.type}"
    via = {"path": [{"from": {"name": source.type, "variant": source.variant},
                     "to": {"name": target.type, "variant": target.variant}}]}  # fmt: skip
    solver = certificate.solver.value
    commands = ["pred reduce source.json --via via.json -o bundle.json"]
    if solves_bundle:
        commands.append(f"pred solve bundle.json --solver {solver} > solved.json")
    if solves_source:
        commands.append("pred solve source.json --solver brute-force > best.json")
    build = BUILD.format(violation=violation, rule=rule, solves_bundle=solves_bundle, solves_source=solves_source)
    return [
        {
            "say": "I will start with the list of reduction rules.",
            "bash": f"pred list --rules | grep -F '{source.type}'",
        },
        {
            "say": f"{rule} looks fragile. Let me build a small instance of {source.type} and the one-step path.",
            "bash": f"cat > source.json <<'EOF'\n{json.dumps(source.model_dump(mode='json'))}\nEOF\n"
            f"cat > via.json <<'EOF'\n{json.dumps(via)}\nEOF\ncat source.json",
        },
        {
            "say": "Now reduce it one step and solve.",
            "bash": " && ".join(commands) + " && cat bundle.json | head -c 1500",
        },
        {"say": "I will write the certificate from pred's own output.", "bash": f"python3 - <<'EOF'\n{build}EOF"},
        {"say": "Submitting the certificate.", "bash": "submit-certificate cert.json"},
        {"say": "Done.", "bash": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
    ]


def write_demo(pool: Pool, bug_id: str, folder: Path) -> Path:
    """minted.json (the script) and models.toml (naming it demo/minted) in `folder`; returns the
    settings file."""
    [bug] = [bug for bug in pool.manifest.bugs if bug.id == bug_id]
    certificate = Certificate.model_validate_json(pool.certificate_path(bug).read_text())
    folder.mkdir(parents=True, exist_ok=True)
    script = {"description": f"{MODEL}: reproduces {bug_id} of {pool.label()} with pred", "turns": turns(certificate)}
    (folder / "minted.json").write_text(json.dumps(script, indent=2))
    settings = folder / "models.toml"
    settings.write_text(
        f'[models."{MODEL}"]\ndemo_script = "minted.json"\ninput_cost_per_token = 1e-6\noutput_cost_per_token = 4e-6\n'
    )
    return settings


LOOKER = "demo/looker"
"""A scripted model that reads a minted rule's source and runs pred along it on an instance the bug
does not expose, and certifies nothing: reached, not triggered."""
HARMLESS = {
    "type": "SchedulingWithIndividualDeadlines",
    "variant": {},
    "data": {"deadlines": [1], "num_processors": 1, "num_tasks": 1, "precedences": []},
}
"""One task, one processor, deadline 1: the minted Scheduling -> ILP rule's round trip holds here."""


def reduce_turns(source: dict, target: dict, rule_file: str, name: str) -> list[dict]:
    """Read the rule's source, then reduce `source` one step to `target` (`pred reduce --via -o`),
    and go no further: a pred call along the rule, no certificate."""
    via = {"path": [{"from": {"name": source["type"], "variant": source["variant"]}, "to": target}]}
    return [
        {"say": f"Let me read {rule_file}.", "bash": f"head -c 600 {SOURCE_DIR}/{rule_file}; echo"},
        {
            "say": "I will reduce an instance along it and look at the bundle.",
            "bash": f"cat > {name}.json <<'EOF'\n{json.dumps(source)}\nEOF\n"
            f"cat > {name}-via.json <<'EOF'\n{json.dumps(via)}\nEOF\n"
            f"pred reduce {name}.json --via {name}-via.json -o {name}-bundle.json && head -c 300 {name}-bundle.json",
        },
    ]


def write_funnel_demo(pool: Pool, certified: str, looked_at: str, folder: Path) -> Path:
    """Two scripted models on `pool`: MODEL runs pred along `looked_at` on its exposing instance
    without certifying it, then reproduces and certifies `certified` (pool_demo's script); LOOKER
    runs pred along `looked_at` on HARMLESS only. Returns the settings file naming both."""
    bugs = {bug.id: bug for bug in pool.manifest.bugs}
    exposing = Certificate.model_validate_json(pool.certificate_path(bugs[looked_at]).read_text())
    found = Certificate.model_validate_json(pool.certificate_path(bugs[certified]).read_text())
    target = {"name": exposing.target.type, "variant": exposing.target.variant}
    rule_file = bugs[looked_at].file
    scripts = {
        "minted.json": reduce_turns(exposing.source.model_dump(mode="json"), target, rule_file, "other") + turns(found),
        "looker.json": [
            *reduce_turns(HARMLESS, target, rule_file, "small"),
            {"say": "Nothing wrong there.", "bash": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
        ],
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, steps in scripts.items():
        (folder / name).write_text(json.dumps({"description": f"funnel demo {name}", "turns": steps}, indent=2))
    settings = folder / "models.toml"
    settings.write_text(
        "".join(
            f'[models."{model}"]\ndemo_script = "{script}"\ninput_cost_per_token = 1e-6\noutput_cost_per_token = 4e-6\n'
            for model, script in ((MODEL, "minted.json"), (LOOKER, "looker.json"))
        )
    )
    return settings
