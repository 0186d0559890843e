"""cargo-mutants, pinned: the mutants of a library's rule files, listed as diffs without building.

cargo-mutants (on the crates registry) parses the source with syn and proposes the mutations the
field uses — operator swaps, replaced return values, deleted match arms, negations removed —
each as a unified diff against one file. Listing them reads the source only (seconds, no
compiler). The version is pinned: the same source and the same cargo-mutants list the same
mutants in the same order on any machine, which is what makes a pool reproducible from its seed.
It is installed once per machine into the predbench cache, beside the pred builds.
"""

import json
import os
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import PredEnvironmentError
from pytest_predbench.verify.setup import Build, run_builds, say

MUTATOR = "cargo-mutants"
MUTATOR_VERSION = "27.1.0"
RULE_FILES = "src/rules/*.rs"


class Mutant(BaseModel):
    """One mutation of one function of one rule file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str
    function: str
    """As cargo-mutants names it: `<impl ReductionResult for ReductionVCToEC>::extract_solution`."""
    line: int
    column: int
    genre: str
    """BinaryOperator, UnaryOperator, FnValue, MatchArm, MatchArmGuard."""
    description: str
    """`replace * with + in ...`: what it does, in cargo-mutants' words."""
    diff: str
    """A unified diff of `file`, both headers naming it (applies with `patch -p0`)."""

    @property
    def short_function(self) -> str:
        """The function's own name (`extract_solution`), without its impl."""
        return self.function.rsplit("::", 1)[-1]


def mutator_label() -> str:
    return f"{MUTATOR} {MUTATOR_VERSION}"


def mutator_binary() -> Path:
    return pin.cache_root() / f"{MUTATOR}-{MUTATOR_VERSION}" / "bin" / MUTATOR


def ensure_mutator() -> Path:
    """cargo-mutants, installed the first time it is needed (about 2 minutes on 2 cores)."""
    binary = mutator_binary()
    if not binary.is_file():
        say(f"{mutator_label()} is not installed in {pin.cache_root()} yet: installing it")
        argv = ["cargo", "install", MUTATOR, "--version", MUTATOR_VERSION, "--locked"]
        run_builds([Build(f"{MUTATOR}-{MUTATOR_VERSION}", argv, binary.parent.parent)])
    return binary


def _normalised(diff: str, file: str) -> str:
    """cargo-mutants writes its description as the `+++` header; a diff names the file on both."""
    lines = diff.split("\n")
    if len(lines) > 1 and lines[1].startswith("+++ "):
        lines[1] = f"+++ {file}"
    return "\n".join(lines) if diff.endswith("\n") else "\n".join(lines) + "\n"


def list_mutants(source: Path) -> list[Mutant]:
    """Every mutant cargo-mutants proposes in the rule files of the crate at `source`, in its order."""
    binary = ensure_mutator()
    argv = [str(binary), "mutants", "--list", "--json", "--diff", "--file", RULE_FILES, "--dir", str(source)]
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "CARGO_NET_OFFLINE": "true"})
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise PredEnvironmentError(f"{mutator_label()} could not list the mutants of {source}: {last}")
    mutants = []
    for entry in json.loads(done.stdout):
        function = entry.get("function") or {}
        mutants.append(
            Mutant(
                file=entry["file"],
                function=function.get("function_name", ""),
                line=entry["span"]["start"]["line"],
                column=entry["span"]["start"]["column"],
                genre=entry["genre"],
                description=entry["name"].split(": ", 1)[-1],
                diff=_normalised(entry["diff"], entry["file"]),
            )
        )
    return mutants


def main() -> int:
    """`python -m pytest_predbench.mint.mutator`: install the pinned cargo-mutants (make setup does)."""
    try:
        say(f"{mutator_label()} at {ensure_mutator()}")
    except PredEnvironmentError as exc:
        print(f"setup failed: {exc}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
