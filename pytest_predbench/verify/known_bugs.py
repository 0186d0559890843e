"""The known-bug registry: the rules of the pinned pred known to be buggy, with upstream's evidence.

It is the ground truth a leaderboard measures recall against ("found k of N known bugs"), in the
way Magma's benchmark counts its planted bugs. Built from the upstream repository's history
between the pinned release and the newest (its rule fixes and bug reports) and from bugs
reproduced here with the pinned pred; versions/<V>/known_bugs.json, one per supported version and
shipped in the package, holds it. A bug a
model finds outside it is a candidate to report upstream, not an error.

A certificate names one rule (a one-step reduction), so a bug is found when an accepted
verdict's source and target — names and variants as pred derived them — match an entry.
"""

from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pytest_predbench.verify import pin

REGISTRY_FILE = "known_bugs.json"

Kind = Literal["unsound_extraction", "incomplete_reduction", "suboptimal_extraction", "crash", "unsound_reduction"]


class ProblemRef(BaseModel):
    """A problem as pred names it; `variant` None means every variant of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    variant: dict[str, str] | None = None

    def matches(self, name: str, variant: dict[str, str]) -> bool:
        return self.name == name and (self.variant is None or self.variant == variant)


class Evidence(BaseModel):
    """Where upstream says so: a commit, pull request or issue, and what it says."""

    model_config = ConfigDict(extra="forbid")

    commit: str | None = None
    pr: int | None = None
    issue: int | None = None
    path: str | None = None
    """The file the commit changed, when it matters."""
    title: str
    summary: str


class Reproduction(BaseModel):
    """How to see it with pred: the commands, run in the entry's own directory of files."""

    model_config = ConfigDict(extra="forbid")

    solver: str
    commands: list[str]


class OtherDefect(BaseModel):
    """A further defect of the same rule, with its own instance."""

    model_config = ConfigDict(extra="forbid")

    kind: Kind
    note: str
    observable: bool | None = None
    confirmed_with_pred: bool = False
    instance: dict | None = None


class KnownBug(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    rule: str
    """'Source -> Target', as pred names the problems."""
    rule_spec: str
    """The rule with its variants, in pred's slash notation."""
    rule_file: str
    """The rule's source file in the library."""
    source: ProblemRef
    target: ProblemRef
    kind: Kind
    upstream: list[Evidence] = []
    """Upstream's word on it (empty: found here, backed by code_evidence and a reproduction)."""
    code_evidence: str | None = None
    observable: bool | Literal["unknown"]
    """Whether pred's round trip (reduce, solve the target, extract, evaluate) can show it."""
    observable_note: str = ""
    note: str
    """What goes wrong, in a sentence or two."""
    confirmed_with_pred: bool
    instance: dict | None = None
    """A source instance that shows it (`{"type", "variant", "data"}`, as pred reads it)."""
    via: dict | None = None
    """The one-step path file (`pred reduce --via`) that pins this rule."""
    repro: Reproduction | None = None
    confidence: str | None = None
    """Absent for clear cases; says why when the bug needs unusual input."""
    degenerate_input: bool = False
    """Shown only on an empty or degenerate instance."""
    additional_bugs: list[OtherDefect] = []


class Registry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pred_version: str
    generated_by: str
    sources: list[dict] = []
    """The upstream references the registry was built from."""
    schema_notes: dict[str, str] = {}
    bugs: list[KnownBug]
    not_in_pinned_version: list[dict[str, str]] = []
    """Rules upstream fixed that the pinned version does not have."""
    not_in_pinned_version_note: str = ""
    considered_not_listed: list[dict[str, str]] = []
    """Upstream changes looked at and judged not to be bugs of the pinned version, with why."""

    def find(
        self, source: str, source_variant: dict[str, str], target: str, target_variant: dict[str, str]
    ) -> list[KnownBug]:
        """The entries of the one-step rule from (source, variant) to (target, variant)."""
        return [
            bug
            for bug in self.bugs
            if bug.source.matches(source, source_variant) and bug.target.matches(target, target_variant)
        ]


def load_registry(version: str | None = None) -> Registry:
    """The registry of a version (default: the process's), validated: a broken file is a bug of
    this package."""
    return _registry(version or pin.selected())


@cache
def _registry(version: str) -> Registry:
    text = (pin.version_dir(version) / REGISTRY_FILE).read_text(encoding="utf-8")
    return Registry.model_validate_json(text)
