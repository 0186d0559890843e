"""The known-bug registry: the rules of the pinned pred known to be buggy, with upstream's evidence.

It is the ground truth a leaderboard measures recall against ("found k of N known bugs"), in the
way Magma's benchmark counts its planted bugs. Built from the upstream repository's history
between the pinned release and the newest (its rule fixes and bug reports) and from bugs
reproduced here with the pinned pred; versions/<V>/known_bugs.json, one per supported version and
shipped in the package, holds it. A bug a
model finds outside it is a candidate to report upstream, not an error.

A certificate names one rule (a one-step reduction), so a bug is found when an accepted
verdict's source and target — names and variants as pred derived them — match an entry.

Every entry says whether the bug was public as of the registry's date (`Registry.as_of`): a model
trained after a bug's disclosure may recall it rather than find it, so the report shows recall on
disclosed and on undisclosed bugs apart (report/scoring.py), and apart again on the bugs disclosed
after a model's training cutoff. In doubt an entry is `disclosed`: the undisclosed figure must stay
clean; a reference to the same rule for another defect does not disclose the entry's defect.
"""

import datetime as dt
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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


class Disclosure(BaseModel):
    """Whether the bug was public as of the registry's date, and where first."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["disclosed", "undisclosed"]
    """undisclosed: found here, with no public report of this defect as of the registry's date."""
    reference: str | None = None
    """The earliest public report of this defect that was found (a URL); disclosed only."""
    date: dt.date | None = None
    """When that report was made public; disclosed only."""
    note: str = ""
    """What the reference says of the defect, or how the absence of one was checked."""

    @model_validator(mode="after")
    def _reference_iff_disclosed(self) -> "Disclosure":
        disclosed = self.status == "disclosed"
        if disclosed and (not self.reference or self.date is None):
            raise ValueError("a disclosed bug needs its reference and date")
        if not disclosed and (self.reference or self.date is not None):
            raise ValueError("an undisclosed bug has no reference or date")
        return self


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
    disclosure: Disclosure
    """Required: recall is reported on disclosed and on undisclosed bugs apart."""

    def disclosed_after(self, cutoff: dt.date) -> bool:
        """Public only after a model's training cutoff: the model cannot have read of it."""
        return self.disclosure.date is not None and self.disclosure.date > cutoff


class Registry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pred_version: str
    generated_by: str
    as_of: dt.date
    """The registry's date: `undisclosed` means not public as of this day."""
    sources: list[dict] = []
    """The upstream references the registry was built from."""
    schema_notes: dict[str, str] = {}
    bugs: list[KnownBug]
    not_in_pinned_version: list[dict[str, str]] = []
    """Rules upstream fixed that the pinned version does not have."""
    not_in_pinned_version_note: str = ""
    considered_not_listed: list[dict[str, str]] = []
    """Upstream changes looked at and judged not to be bugs of the pinned version, with why."""

    @model_validator(mode="after")
    def _disclosed_by_its_date(self) -> "Registry":
        late = [bug.id for bug in self.bugs if bug.disclosure.date is not None and bug.disclosure.date > self.as_of]
        if late:
            raise ValueError(f"disclosed after the registry's date {self.as_of}: {', '.join(late)}")
        return self

    def find(
        self, source: str, source_variant: dict[str, str], target: str, target_variant: dict[str, str]
    ) -> list[KnownBug]:
        """The entries of the one-step rule from (source, variant) to (target, variant)."""
        return [
            bug
            for bug in self.bugs
            if bug.source.matches(source, source_variant) and bug.target.matches(target, target_variant)
        ]


def load_registry(version: str) -> Registry:
    """The registry of a version, validated: a broken file is a bug of this package."""
    return _registry(version)


@cache
def _registry(version: str) -> Registry:
    text = (pin.version_dir(version) / REGISTRY_FILE).read_text(encoding="utf-8")
    return Registry.model_validate_json(text)
