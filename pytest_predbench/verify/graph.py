"""pred's rules as pred itself lists them: the one count of rules, and which rule a certificate names.

A certificate names one rule by its source's and its target's type and variant. The target of a
crash while reducing has no bundle to copy from, so a model writes that variant by hand, and a
guessed one names no rule: the verifier rejects it after the session ("there is no one-step rule
... to judge"). The submission channel tells the model at once instead (session/submission.py),
with the variants pred's rules do reach and the command that prints one as JSON.

The table is `pred list --rules --json` of the very binary the session runs, read once per binary:
it is pred's fact, never a copy that could drift. Its length is the version's one count of rules
("the rules": every `Source -> Target` edge that listing shows, between exact variants; a few of them
carry no solution back, see versions/<V>/version.json). The listing writes a variant as its values
in the order of their keys (a BTreeMap), which is how `spec` writes a certificate's.

The check is a hint and never a verdict: pred reads names the listing does not show (aliases, in any
case), so a name the table does not hold as a type says nothing; only a certificate whose two types
are exactly types of the table, and whose two variants pred's listing never joins by one rule, is
told so — and is still verified like any other.
"""

import json
from functools import cache
from pathlib import Path

from pydantic import BaseModel

from pytest_predbench.verify.pred import Pred, PredLimits

LIST_TIMEOUT_S = 30.0
MOST_SHOWN = 6
"""How many of the variants pred's rules do reach a hint lists."""


def spec(type_name: str, variant: dict[str, str]) -> str:
    """pred's slash name of a problem: its type, then its variant's values in the order of their keys."""
    return "/".join([type_name, *(variant[k] for k in sorted(variant))])


class Rule(BaseModel):
    source: str
    """The source's slash name, e.g. MaximumIndependentSet/SimpleGraph/One."""
    target: str


def _type(name: str) -> str:
    return name.split("/", 1)[0]


class RuleTable(BaseModel):
    """Every rule of one pred binary, as `pred list --rules --json` lists them."""

    rules: list[Rule]

    @property
    def count(self) -> int:
        return len(self.rules)

    def types(self) -> set[str]:
        return {_type(name) for rule in self.rules for name in (rule.source, rule.target)}

    def names_no_rule(self, source: str, target: str) -> str | None:
        """Why the slash names `source -> target` are no rule of this table, with the variants that
        would be; None when they are one, or when a type is not one the table holds by that name."""
        if any(r.source == source and r.target == target for r in self.rules):
            return None
        source_type, target_type = _type(source), _type(target)
        if not {source_type, target_type} <= self.types():
            return None
        reached = sorted({r.target for r in self.rules if r.source == source and _type(r.target) == target_type})
        if reached:
            return (
                f"pred lists no rule {source} -> {target}; its rules from {source} to {target_type} reach "
                f"{_some(reached)} (`pred show {reached[0]} --json` prints that target's type and variant as JSON)"
            )
        sources = sorted(
            {r.source for r in self.rules if _type(r.source) == source_type and _type(r.target) == target_type}
        )
        if sources:
            return (
                f"pred lists no rule from {source} to {target_type}; its rules to {target_type} start at "
                f"{_some(sources)} (`pred show {sources[0]} --json` lists its rules with their exact variants)"
            )
        return (
            f"pred lists no rule from {source_type} to {target_type} at all (`pred show {source_type}` lists its rules)"
        )


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:MOST_SHOWN])
    return shown if len(names) <= MOST_SHOWN else f"{shown} and {len(names) - MOST_SHOWN} more"


class ListingError(RuntimeError):
    """pred did not list its rules: one line saying why."""


def read_listing(text: str) -> RuleTable:
    """The table from `pred list --rules --json`'s output; its num_rules must match what it lists."""
    try:
        data = json.loads(text)
        table = RuleTable(rules=[Rule(source=r["source"], target=r["target"]) for r in data["rules"]])
    except (ValueError, KeyError, TypeError) as exc:
        raise ListingError(f"`pred list --rules --json` printed no rule listing ({exc})") from None
    if data.get("num_rules") != table.count:
        raise ListingError(f"`pred list --rules --json` says {data.get('num_rules')} rules but lists {table.count}")
    return table


@cache
def rule_table(pred: Path) -> RuleTable:
    """The rules of the pred binary at `pred`, listed once per process and binary."""
    try:
        call = Pred(pred, PredLimits(timeout_s=LIST_TIMEOUT_S)).run("list", "--rules", "--json")
    except OSError as exc:
        raise ListingError(f"`{pred} list --rules --json` did not run: {exc}") from None
    if not call.ok:
        raise ListingError(f"`{pred} list --rules --json` failed: {call.brief()}")
    return read_listing(call.full_stdout)
