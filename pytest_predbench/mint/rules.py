"""Which witness-carrying rules each rule file implements, from pred's own reduction graph.

A minted bug is a mutation of one file; what a model can expose is a rule (a one-step reduction
that carries a solution back). `pred export-graph` gives every edge with its doc path, which the
library derives from the module that registered the rule (`rules/<file>/index.html`): the file,
named by pred itself. Edges registered from elsewhere (a model's module) belong to no rule file and
are never mutated.
"""

import json
import subprocess
import tempfile
from pathlib import Path

from pytest_predbench.verify.environment import PredEnvironmentError
from pytest_predbench.verify.known_bugs import ProblemRef
from pytest_predbench.verify.pool import MintedRule

DOC_PREFIX, DOC_SUFFIX = "rules/", "/index.html"


def reduction_graph(pred: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="predbench-graph-") as tmp:
        out = Path(tmp) / "graph.json"
        done = subprocess.run([str(pred), "export-graph", "-o", str(out), "-q"], capture_output=True, text=True)
        if done.returncode != 0:
            raise PredEnvironmentError(f"{pred} export-graph failed: {done.stderr.strip()[:200]}")
        return json.loads(out.read_text())


def rules_by_file(pred: Path) -> dict[str, list[MintedRule]]:
    """src/rules/<name>.rs -> the witness-carrying rules it registers, sorted."""
    graph = reduction_graph(pred)
    nodes = graph["nodes"]
    found: dict[str, list[MintedRule]] = {}
    for edge in graph["edges"]:
        doc = edge.get("doc_path") or ""
        if not edge.get("witness") or not (doc.startswith(DOC_PREFIX) and doc.endswith(DOC_SUFFIX)):
            continue
        stem = doc[len(DOC_PREFIX) : -len(DOC_SUFFIX)]
        if "/" in stem:
            continue
        ends = {end: nodes[edge[end]] for end in ("source", "target")}
        rule = MintedRule(**{end: ProblemRef(name=n["name"], variant=n["variant"]) for end, n in ends.items()})
        found.setdefault(f"src/rules/{stem}.rs", []).append(rule)
    return {file: sorted({_order(r): r for r in rules}.values(), key=_order) for file, rules in sorted(found.items())}


def _order(rule: MintedRule) -> str:
    return json.dumps(rule.model_dump(mode="json"), sort_keys=True)
