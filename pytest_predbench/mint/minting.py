"""`predbench mint`: screening builds until N mutants are proven bugs, then the pool's own build.

A mutant is kept only when execution proves it a bug (validate.py), and most are not: equivalent
under pred's semantics, or out of any small instance's reach. A failed mutant cannot stay in the
pool's source (the source would differ from the pristine in more than N rules, and a model could
find a change no one validated), and taking it out means building again. So a round builds
SCREEN_FACTOR times as many candidates as bugs are still needed (candidates.py's seeded order),
validates them all, and the next round screens more only if too few passed; then the first N
validated, in the seeded order, get the pool's own build — a build of exactly those N mutants —
on which every certificate is verified again and each bug's difficulty measured. A mutant whose
own rule's canonical example fails breaks `pred create --example` for every rule, so each one's
example is replayed on every build and such a mutant dropped there; the rest of its round is
validated all the same, the probe taking its examples from the pristine build. A round's build
reuses the cargo targets of the one before, so only the library and what depends on it is
compiled again; at most MAX_ROUNDS builds, then the pool has fewer bugs and says so.

The pool is written to a folder beside OUT and renamed into place when complete: a mint that is
interrupted or fails leaves nothing half-written.
"""

import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pytest_predbench.mint.build import CompileFailure, MintError, minted_build, mutated_source
from pytest_predbench.mint.candidates import eligible, seeded_order
from pytest_predbench.mint.mutator import Mutant, list_mutants, mutator_label
from pytest_predbench.mint.rules import rules_by_file
from pytest_predbench.mint.validate import (
    Breakage,
    Prober,
    Validation,
    breaks_own_example,
    difficulty,
    examples_broken,
    leaks,
    outcome_on,
    validate,
)
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import EnvRecord, build_record, checked_record
from pytest_predbench.verify.known_bugs import load_registry
from pytest_predbench.verify.pool import (
    BINARIES,
    FORMAT,
    MANIFEST,
    SOURCE,
    MintedBug,
    MintedRule,
    PoolManifest,
    compute_digest,
    file_hashes,
    load_pool,
)
from pytest_predbench.verify.setup import ensured_record
from pytest_predbench.verify.verdict import Outcome

MAX_ROUNDS = 10
"""Builds at most: screening rounds, then the pool's own build."""
SCREEN_FACTOR = 2
"""A screening round builds twice as many candidates as bugs are still needed: most mutants are
equivalent or out of a probe's reach, and a build costs minutes."""
MIN_SCREEN = 4
"""A round screens at least this many: a round's build costs the same for one candidate as for
four, and a single candidate that fails costs another build."""
JOBS = 2
"""Mutants validated at once: each probe is one pred process at a time, so one per core."""


def say(line: str) -> None:
    print(f"[mint] {line}", flush=True)


class Minting:
    """One mint: the pristine build, the candidates in their order, the rounds, the pool."""

    def __init__(self, version: str, seed: int, bugs: int, out: Path, log: Callable[[str], None] = say):
        self.version, self.seed, self.bugs, self.out, self.log = version, seed, bugs, out, log
        self.work = out.parent / f".{out.name}.minting"
        self.rounds = 0
        self.dropped: list[tuple[Mutant, str]] = []

    def run(self) -> PoolManifest:
        started = time.monotonic()
        ensured_record(self.version)
        pristine = self.pristine = checked_record(self.version)
        source = Path(pristine.source_dir)
        self.rules = rules_by_file(Path(pristine.pred_path))
        mutants = list_mutants(source)
        candidates = eligible(mutants, self.rules, load_registry(self.version), source)
        queue = seeded_order(candidates, self.version, self.seed)
        self.log(
            f"pred {self.version}, seed {self.seed}: {len(mutants)} mutants from {mutator_label()}, "
            f"{sum(map(len, candidates.values()))} eligible in {len(candidates)} rule files; minting {self.bugs}"
        )
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        try:
            kept, record = self._rounds(pristine, source, queue)
            manifest = self._write(kept, record, time.monotonic() - started)
        finally:
            shutil.rmtree(self.work, ignore_errors=True)
        return manifest

    def _rounds(self, pristine: EnvRecord, source: Path, queue: list[Mutant]) -> tuple[dict, EnvRecord]:
        """Screening builds until N mutants are validated, then the pool's own build of exactly those N
        (none when the last screening build holds exactly them)."""
        position = {mutant: n for n, mutant in enumerate(queue)}
        queue = list(queue)
        validated: dict[Mutant, Validation] = {}
        built: list[Mutant] = []
        prober = None
        while len(validated) < self.bugs and queue:
            if self.rounds >= MAX_ROUNDS - 1:
                self.log(
                    f"stopping the screening after {self.rounds} builds: {len(validated)} of {self.bugs} validated"
                )
                break
            need = self.bugs - len(validated)
            batch = queue[: max(SCREEN_FACTOR * need, MIN_SCREEN)]
            del queue[: len(batch)]
            mutated = sorted([*validated, *batch], key=position.__getitem__)
            try:
                prober = self._build(source, mutated)
            except CompileFailure as failure:
                broken = {m: failure.why for m in batch if m.file in failure.files}
                if not broken:
                    raise MintError(f"{failure} (none of the new mutants is in those files)") from None
                self._drop(broken)
                queue[:0] = [m for m in batch if m not in broken]
                continue
            built = mutated
            breakers = self._breakers(batch, prober, examples_broken(prober, pristine))
            self._drop(breakers)
            batch = [m for m in batch if m not in breakers]
            results = self._validate(batch, prober, pristine, mutated)
            self._drop({m: v.reason for m, v in results.items() if v.certificate is None})
            validated.update({m: v for m, v in results.items() if v.certificate is not None})
            passed = sum(v.certificate is not None for v in results.values())
            self.log(f"round {self.rounds}: {passed} of {len(batch)} validated")
        if not validated:
            raise MintError(f"no mutant was validated in {self.rounds} build(s)")
        chosen = sorted(validated, key=position.__getitem__)[: self.bugs]
        while built != chosen or prober is None:
            self.log(f"the pool's own build: the {len(chosen)} validated mutants, and nothing else")
            try:
                prober, built = self._build(source, chosen), chosen
                broken = examples_broken(prober, pristine)
                failed = {} if broken is None else self._breakers(chosen, prober, broken)
            except CompileFailure as failure:
                failed = {m: failure.why for m in chosen if m.file in failure.files}
                if not failed:
                    raise MintError(f"{failure} (none of the validated mutants is in those files)") from None
            if failed:
                self._drop(failed)
                remaining = [m for m in chosen if m not in failed]
                if not remaining:
                    raise MintError("every validated mutant failed on the pool's own build")
                chosen = remaining
        kept = self._settle({m: validated[m] for m in chosen}, prober, pristine)
        return kept, prober.record

    def _build(self, source: Path, mutated: list[Mutant]) -> Prober:
        """One round: the mutated source built (or found built), and the probe installed on it."""
        self.rounds += 1
        library = self.work / SOURCE
        digest = mutated_source(source, mutated, library)
        self.log(f"round {self.rounds}: {len(mutated)} mutated rule files (source {digest[:12]}); building")
        pred, extractor = minted_build(self.version, library, digest)
        record = build_record(self.version, pred, library, extractor)
        return Prober(record, self.work / f"probe-{self.rounds}", examples=self.pristine.pred_path)

    def _breakers(self, mutants: list[Mutant], prober: Prober, broken: Breakage | None) -> dict[Mutant, str]:
        """The mutants that break pred's canonical examples: each found by replaying its own example
        (validate.breaks_own_example), or named by `broken`, the panic of the build's examples (an
        example whose spec checks its own solution panics in its file). Should the examples still
        fail with none of them to blame, the suspects are every mutant of a rule into ILP when the panic came
        from solving an example's integer program, else every one: blaming too many costs
        candidates, never a pool. The rest of a round is validated all the same (the probe takes its
        examples from the pristine build: Prober)."""

        def own(mutant: Mutant) -> str | None:
            return breaks_own_example(self.rules[mutant.file], prober, self.pristine)

        with ThreadPoolExecutor(max_workers=JOBS) as jobs:
            found = {m: why for m, why in zip(mutants, jobs.map(own, mutants), strict=True) if why}
        if broken is None:
            return found
        named = "breaks pred's canonical examples of every rule (the panic is in its file)"
        found |= {m: named for m in mutants if m.file in broken.files and m not in found}
        if found:
            return found
        why, suspects = "suspected of breaking pred's canonical examples (the panic names no rule)", mutants
        if broken.solving_ilp:
            why = "suspected of breaking pred's canonical examples (an example's ILP panics; a rule into ILP)"
            suspects = [m for m in mutants if any(r.target.name == "ILP" for r in self.rules[m.file])] or mutants
        return dict.fromkeys(suspects, why)

    def _drop(self, failed: dict[Mutant, str]) -> None:
        for mutant, why in failed.items():
            self.dropped.append((mutant, why))
            self.log(f"dropped {mutant.file}: {mutant.description[:90]} — {why}")

    def _validate(self, pending: list[Mutant], prober: Prober, pristine: EnvRecord, mutated: list[Mutant]) -> dict:
        minted_rules = [rule for m in mutated for rule in self.rules[m.file]]

        def one(mutant: Mutant) -> Validation:
            result = validate(self.rules[mutant.file], prober, pristine)
            if result.certificate is not None:
                elsewhere = leaks(result.certificate, prober, pristine, minted_rules)
                if elsewhere:
                    return Validation(None, f"changes behaviour outside its rule: {', '.join(elsewhere[:3])}")
            self.log(f"{mutant.file}: {result.reason}")
            return result

        with ThreadPoolExecutor(max_workers=JOBS) as jobs:
            return dict(zip(pending, jobs.map(one, pending), strict=True))

    def _settle(self, kept: dict, prober: Prober, pristine: EnvRecord) -> dict:
        """On the final build: every certificate accepted again (validated again if not), and each
        bug's difficulty measured."""

        def one(mutant: Mutant) -> Validation:
            settled = kept[mutant]
            if outcome_on(settled.certificate, prober.record) is not Outcome.ACCEPTED:
                settled = validate(self.rules[mutant.file], prober, pristine)
                if settled.certificate is None:
                    return settled
            settled.exposed, settled.probes = difficulty(self.rules[mutant.file], prober)
            self.log(f"{mutant.file}: exposed by {settled.exposed} of {settled.probes} random probes")
            return settled

        with ThreadPoolExecutor(max_workers=JOBS) as jobs:
            settled = dict(zip(kept, jobs.map(one, kept), strict=True))
        self._drop(
            {m: f"not validated on the pool's build: {v.reason}" for m, v in settled.items() if v.certificate is None}
        )
        return {m: v for m, v in settled.items() if v.certificate is not None}

    def _write(self, kept: dict, record: EnvRecord, seconds: float) -> PoolManifest:
        staging = self.work / "pool"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(record.source_dir, staging / SOURCE)
        for name, path in (("pred", record.pred_path), ("pred-extract", record.extractor_path)):
            (staging / BINARIES[name]).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, staging / BINARIES[name])
        (staging / "diffs").mkdir()
        (staging / "certificates").mkdir()
        order = sorted(kept, key=lambda m: m.file)
        bugs = []
        for n, mutant in enumerate(order, 1):
            validation = kept[mutant]
            bug_id = f"minted-{n:02d}"
            (staging / "diffs" / f"{bug_id}.diff").write_text(mutant.diff)
            shutil.copy2(validation.certificate, staging / "certificates" / f"{bug_id}.json")
            bugs.append(
                MintedBug(
                    id=bug_id, file=mutant.file, function=mutant.function, mutation=mutant.description,
                    line=mutant.line, genre=mutant.genre, rules=self.rules[mutant.file],
                    diff=f"diffs/{bug_id}.diff", certificate=f"certificates/{bug_id}.json",
                    probes=validation.probes, exposed=validation.exposed,
                )
            )  # fmt: skip
        manifest = PoolManifest(
            format=FORMAT, pred_version=self.version, seed=self.seed, requested=self.bugs, mutator=mutator_label(),
            bugs=bugs, files=file_hashes(staging), digest="", built_in_rounds=self.rounds, seconds=round(seconds, 1),
        )  # fmt: skip
        manifest.digest = compute_digest(manifest)
        (staging / MANIFEST).write_text(manifest.model_dump_json(indent=1) + "\n")
        shutil.rmtree(self.out, ignore_errors=True)
        staging.rename(self.out)
        load_pool(self.out)
        return manifest


def mint(version: str, seed: int, bugs: int, out: Path, log: Callable[[str], None] = say) -> PoolManifest:
    """Mint a pool of `bugs` validated bugs into `out` (which must not hold anything yet)."""
    pin.check_version(version)
    out = Path(out).resolve()
    if out.exists() and any(out.iterdir()):
        raise MintError(f"{out} is not empty: a pool is written into a new folder")
    return Minting(version, seed, bugs, out, log).run()


__all__ = ["MintError", "MintedRule", "mint"]
