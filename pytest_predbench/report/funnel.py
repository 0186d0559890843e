"""Reached / triggered / certified: how far each session of a pool run got with each minted bug.

Recall says only whether a session certified a planted bug. The funnel (as Magma measures fuzzers)
separates a session that never looked from one that looked and failed to write the certificate:

- **reached**: the session ran `pred reduce` along a rule the bug changes — the path of a reduce
  call's bundle (casts included, any hop) holds the minted one-step rule, source and target with
  their variants (`MintedRule.matches`). The gateway snapshot each reduce call's instance and path
  (session/reductions.py, PredCall.reduction).
- **triggered**: a round trip along the rule that pred itself shows wrong, decided by proof and by
  the verifier alone: the instance of one of the session's reduce calls whose first hop is the rule
  goes through the baseline's probe (session/probe: reduce one step, solve, map back, compare, on
  the minted build, outside any sandbox), and the certificate the probe builds from pred's own
  output must be ACCEPTED by the real verifier on the minted build — the same entry that judges
  every certificate (leaderboard.Verifier). A hop deeper in a path has no instance of the rule's
  source on record, so only first hops are tried. The verifier's work is capped: at most MAX_TRIALS
  distinct instances per session and minted bug, smallest first, each probe at most TRIAL_CALLS
  pred calls and TRIAL_SECONDS; identical (instance, rule) pairs are judged once per report.
- **certified**: an accepted certificate of the session found the bug — the minted finds the report
  already attributes (report/minted.py, `Session.minted`), not a second matching.

A certificate is itself a round trip along the rule that the verifier showed wrong, so a certified
bug counts as triggered and reached even when the log lacks its call (a session past its snapshot
share, a record from before the gateway took snapshots): reached >= triggered >= certified always.
"""

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from pytest_predbench.mint.validate import Prober
from pytest_predbench.report.model import BugFunnel, FunnelCounts
from pytest_predbench.report.scoring import Session
from pytest_predbench.session.protocol import PredCall
from pytest_predbench.session.reductions import load_instance
from pytest_predbench.verify.certificate import CertificateError, load_certificate
from pytest_predbench.verify.environment import EnvRecord
from pytest_predbench.verify.pool import MintedBug, MintedRule, Pool
from pytest_predbench.verify.verdict import Verdict

MAX_TRIALS = 3
"""Distinct instances of one session the verifier is run on for one minted bug (smallest first)."""
TRIAL_CALLS = 40
"""pred calls one probe of one instance may make (the baseline's allowance for a rule)."""
TRIAL_SECONDS = 60.0

Verifier = Callable[[object, EnvRecord], Verdict]


def _hops(call: PredCall) -> list[tuple]:
    path = call.reduction.path if call.reduction else []
    return [(a.name, a.variant, b.name, b.variant) for a, b in zip(path, path[1:], strict=False)]


def reaches(call: PredCall, bug: MintedBug) -> bool:
    """The call's reduction path holds one of the bug's rules as one of its hops."""
    return any(rule.matches(*hop) for hop in _hops(call) for rule in bug.rules)


def first_rule(call: PredCall, bug: MintedBug) -> MintedRule | None:
    """The bug's rule that is the call's first hop (its instance is that rule's source), if any."""
    hops = _hops(call)
    return next((rule for rule in bug.rules if hops and rule.matches(*hops[0])), None)


class Trigger:
    """The verifier's side of `triggered`: the probe on the minted build, started on first use, and
    the verdicts of every (instance, rule) it judged."""

    def __init__(self, record: Callable[[], EnvRecord], verifier: Verifier):
        self.build, self.verifier = record, verifier
        self.record: EnvRecord | None = None
        self.work: Path | None = None
        self.prober: Prober | None = None
        self.judged: dict[tuple[str, str], bool] = {}

    def triggers(self, instance: dict, sha: str, rule: MintedRule) -> bool:
        key = (sha, rule.model_dump_json())
        if key not in self.judged:
            self.judged[key] = self._judge(instance, sha, rule)
        return self.judged[key]

    def _judge(self, instance: dict, sha: str, rule: MintedRule) -> bool:
        if self.prober is None:
            self.record = self.build()  # the minted build, checked on first use: a run that reached nothing needs none
            self.work = Path(tempfile.mkdtemp(prefix="predbench-funnel-"))
            self.prober = Prober(self.record, self.work)
        index = self.prober.index(rule)
        if index is None:
            return False
        given = self.work / f"{sha}.json"
        given.write_text(json.dumps(instance))
        try:
            found = self.prober.probe(index, 0, TRIAL_CALLS, TRIAL_SECONDS, instance=given)
            certificate = load_certificate(found) if found is not None else None
        except CertificateError:
            certificate = None
        finally:  # each trial's files go once it is judged: a report's disk holds one trial's at most
            given.unlink(missing_ok=True)
            for run in self.work.glob("run-*"):
                shutil.rmtree(run, ignore_errors=True)
        return certificate is not None and self.verifier(certificate, self.record).accepted

    def close(self) -> None:
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)


def session_funnel(session: Session, pool: Pool, trigger: Trigger | None) -> list[BugFunnel]:
    """Each minted bug's flags for one session (`trigger` None: triggered only by certifying)."""
    result = session.record.result if session.is_result else None
    log = result.pred_log if result else []
    folder = session.snap.run.instances
    certified = session.minted
    rows = []
    for bug in pool.manifest.bugs:
        reached = any(reaches(call, bug) for call in log)
        triggered, tried = bug.id in certified, 0
        if reached and not triggered and trigger is not None:
            for sha, instance, rule in _candidates(log, bug, folder)[:MAX_TRIALS]:
                tried += 1
                if trigger.triggers(instance, sha, rule):
                    triggered = True
                    break
        rows.append(
            BugFunnel(
                id=bug.id,
                reached=reached or triggered,
                triggered=triggered,
                certified=bug.id in certified,
                tried=tried,
            )
        )
    return rows


def _candidates(log: list[PredCall], bug: MintedBug, folder: Path) -> list[tuple[str, dict, MintedRule]]:
    """The session's distinct stored instances whose reduce call's first hop is the bug's rule,
    smallest first."""
    seen: dict[str, tuple[int, dict, MintedRule]] = {}
    for call in log:
        rule = first_rule(call, bug)
        sha = call.reduction.instance_sha256 if call.reduction else ""
        if rule is None or sha in seen:
            continue
        instance = load_instance(folder, sha)
        if instance is not None:
            seen[sha] = (len(json.dumps(instance)), instance, rule)
    return [(sha, instance, rule) for sha, (_, instance, rule) in sorted(seen.items(), key=lambda kv: kv[1][0])]


def counts(pool: Pool, funnels: list[list[BugFunnel]]) -> FunnelCounts:
    """A model's funnel: the minted bugs any of its sessions reached, triggered, certified."""

    def some(flag: str) -> int:
        return sum(
            any(getattr(row, flag) for f in funnels for row in f if row.id == bug.id) for bug in pool.manifest.bugs
        )

    return FunnelCounts(
        known=len(pool.manifest.bugs), reached=some("reached"), triggered=some("triggered"), certified=some("certified")
    )
