"""Which mutants may become a minted bug, and the seeded order they are tried in.

A candidate must stay inside its rule: it mutates `reduce_to`, `extract_solution` or a helper of
one rule file that no other file names (a shared helper would change other rules too), in a file
that registers at least one witness-carrying rule (else no round trip could expose it) and none
that the version's known-bug registry lists (a real bug there would confound the planted one). It
never touches what only describes a rule (`target_problem`, the canonical examples), and never
replaces the whole body of `reduce_to` or `extract_solution` with a constant (it rarely compiles,
and reads as what it is).

The order is a seeded shuffle of the eligible files with one mutant drawn for each: the first N
are minted, and a failed one is replaced by the next, so a pool mutates every file at most once
and the same version, seed and cargo-mutants give the same order everywhere.
"""

import random
import re
from pathlib import Path

from pytest_predbench.mint.mutator import Mutant
from pytest_predbench.verify.known_bugs import Registry
from pytest_predbench.verify.pool import MintedRule

DESCRIPTIVE = {"target_problem", "canonical_rule_example_specs"}
ENTRY_POINTS = {"reduce_to", "extract_solution"}
WORD = re.compile(r"\w+")


def known_bug_files(rules: dict[str, list[MintedRule]], registry: Registry) -> set[str]:
    """Rule files with a rule the registry lists, or that an entry names as its file."""
    named = {bug.rule_file for bug in registry.bugs}
    listed = {
        file
        for file, file_rules in rules.items()
        for rule in file_rules
        if registry.find(rule.source.name, rule.source.variant or {}, rule.target.name, rule.target.variant or {})
    }
    return listed | {file for file in rules if file in named or Path(file).name in named}


class Usage:
    """Whether a function of one file is named in any other source file of the crate."""

    def __init__(self, source: Path):
        self.words = {
            str(p.relative_to(source)): set(WORD.findall(p.read_text(errors="replace")))
            for p in (source / "src").rglob("*.rs")
        }

    def outside(self, file: str, name: str) -> bool:
        return any(name in words for path, words in self.words.items() if path != file)


def eligible(
    mutants: list[Mutant], rules: dict[str, list[MintedRule]], registry: Registry, source: Path
) -> dict[str, list[Mutant]]:
    """Rule file -> its candidate mutants, in a stable order."""
    excluded = known_bug_files(rules, registry)
    usage = Usage(source)
    chosen: dict[str, list[Mutant]] = {}
    for mutant in mutants:
        name = mutant.short_function
        if mutant.file not in rules or mutant.file in excluded or not name or name in DESCRIPTIVE:
            continue
        if name in ENTRY_POINTS:
            if mutant.genre == "FnValue":
                continue
        elif usage.outside(mutant.file, name):
            continue
        chosen.setdefault(mutant.file, []).append(mutant)
    return {
        file: sorted(found, key=lambda m: (m.line, m.column, m.description)) for file, found in sorted(chosen.items())
    }


def seeded_order(candidates: dict[str, list[Mutant]], version: str, seed: int) -> list[Mutant]:
    """One mutant per eligible file, the files shuffled by the seed: the order they are minted in."""
    rng = random.Random(f"predbench-mint/{version}/{seed}")
    files = sorted(candidates)
    rng.shuffle(files)
    return [rng.choice(candidates[file]) for file in files]
