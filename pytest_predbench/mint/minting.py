"""`predbench mint`: rounds of build and validation until N mutants are proven bugs, then the pool.

Round one applies the first N candidates of the seeded order (candidates.py) to a copy of the
pristine source and builds pred and the extractor on it once (build.py); every mutant is then
validated by execution (validate.py). A mutant that fails — no probe exposes it, it is a bug the
pristine build shares, it changes a rule outside its file, or it does not compile — is dropped and
the next candidate takes its place in another round, until N are validated or MAX_ROUNDS builds
were made (then the pool has fewer, and says so). A round's build reuses the cargo target of the
one before, so only the library and what depends on it is compiled again.

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
from pytest_predbench.mint.validate import Prober, Validation, difficulty, leaks, outcome_on, validate
from pytest_predbench.verify import pin
from pytest_predbench.verify.environment import EnvRecord, build_record, pristine_record
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

MAX_ROUNDS = 4
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
        pristine = pristine_record(self.version)
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
        kept: dict[Mutant, Validation] = {}
        pending, queue = queue[: self.bugs], queue[self.bugs :]
        record = None
        while pending:
            if self.rounds == MAX_ROUNDS:
                self.log(f"stopping after {MAX_ROUNDS} builds with {len(kept)} of {self.bugs} bugs validated")
                break
            self.rounds += 1
            mutated = [*kept, *pending]
            library = self.work / SOURCE
            digest = mutated_source(source, mutated, library)
            self.log(f"round {self.rounds}: {len(mutated)} mutated rule files (source {digest[:12]}); building")
            try:
                pred, extractor = minted_build(self.version, library, digest)
            except CompileFailure as failure:
                broken = [m for m in pending if m.file in failure.files]
                if not broken:
                    raise MintError(f"{failure} (none of the new mutants is in those files)") from None
                pending = self._replace(pending, {m: "does not compile" for m in broken}, queue)
                continue
            record = build_record(pred, library, extractor, self.version)
            prober = Prober(record, self.work / f"probe-{self.rounds}")
            results = self._validate(pending, prober, pristine, [*kept, *pending])
            failed = {m: v.reason for m, v in results.items() if v.certificate is None}
            kept.update({m: v for m, v in results.items() if v.certificate is not None})
            self.log(f"round {self.rounds}: {len(results) - len(failed)} of {len(results)} validated")
            pending = self._replace(pending, failed, queue)
            if pending:
                continue
            kept = self._settle(kept, prober, pristine)
            if len(kept) < self.bugs and queue:
                pending = self._replace([], {}, queue, need=self.bugs - len(kept))
        if record is None:
            raise MintError("no mutant could be built")
        return kept, record

    def _replace(self, pending: list[Mutant], failed: dict, queue: list[Mutant], need: int = 0) -> list[Mutant]:
        for mutant, why in failed.items():
            self.dropped.append((mutant, why))
            self.log(f"dropped {mutant.file}: {mutant.description[:90]} — {why}")
        fresh = queue[: len(failed) + need]
        del queue[: len(fresh)]
        return [m for m in pending if m not in failed] + fresh

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
        lost = {m: f"not validated on the final build: {v.reason}" for m, v in settled.items() if v.certificate is None}
        self._replace([], lost, [])
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
