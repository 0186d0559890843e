"""One benchmark item as the test sees it: run the session through the AgentRunner, then
verify every certificate it submitted.

Which agent program runs is the planned item's agent (state/entrants.py): a `baseline/...` id gets
the baseline's runner, every other model each of the plan's agents in turn. The real one is imported lazily,
so the orchestration never loads mini-swe-agent or litellm itself.

Only classified failures are infrastructure (not a result, run again on resume): the runner's
own infra_error stop, a pred that is missing or differs from its record, and the verifier failing
on a certificate (an `error` verdict: a fault of predbench, never of the model). Anything else
that goes wrong once the session has started is the session's outcome, as the runner itself
would have recorded it (stop `error`), so that retrying cannot bias a model's score upward. A
certificate the verifier could not decide within its limits (`inconclusive`) is neither: the
session is a result, the certificate no false alarm, and the report verifies it again for longer.
"""

import shutil
import tempfile
from pathlib import Path

from pytest_predbench.session import baseline
from pytest_predbench.session.protocol import (
    Accounting,
    AgentRunner,
    SessionEnv,
    SessionInterrupted,
    SessionLimits,
    SessionResult,
    StopKind,
    StopReason,
    exception_class,
    first_line,
)
from pytest_predbench.state.entrants import FAKE
from pytest_predbench.state.ledger import Reservation
from pytest_predbench.state.plan import Plan, PlannedItem
from pytest_predbench.state.rundir import RunDir
from pytest_predbench.verify.reach import verifier_limits
from pytest_predbench.verify.verdict import Check, Outcome, Verdict


class InfraFailure(Exception):
    """The session ended by an infrastructure failure: not a result, never "found no bugs"."""


def verifier_failed(exc: Exception) -> Verdict:
    """The verdict on a certificate the verifier raised on: an error of predbench's, not a verdict."""
    cause = f"{exception_class(exc)}: {first_line(exc)[:300]}"
    reason = f"error: the verifier failed ({cause}), a fault of predbench, not a verdict on the certificate"
    return Verdict(
        accepted=False,
        outcome=Outcome.ERROR,
        reason=reason,
        checks=[Check(name="verifier", passed=False, detail=reason)],
    )


def verifier_errors(verdicts: list[Verdict]) -> InfraFailure | None:
    """The infrastructure failure that verdicts with an `error` outcome make of their item, if any."""
    errors = [v for v in verdicts if v.error]
    if not errors:
        return None
    return InfraFailure(
        f"infrastructure failure, not a result (verifier error on {len(errors)} of {len(verdicts)} "
        f"certificate(s), a fault of predbench: {errors[0].reason})"
    )


def make_runner(plan: Plan, agent: str) -> AgentRunner:
    """The runner of an `agent`'s sessions in this plan."""
    if agent == baseline.RUNNER:
        return baseline.BaselineRunner()
    if agent == FAKE:
        from pytest_predbench.session.fake import FakeRunner

        return FakeRunner(plan.fake)
    settings = plan.options.model_settings
    if agent == "opencode":
        from pytest_predbench.session.opencode import OpenCodeRunner

        return OpenCodeRunner(Path(settings) if settings else None)
    from pytest_predbench.session.miniswe import MiniSweRunner

    return MiniSweRunner(Path(settings) if settings else None)


class BenchSession:
    def __init__(self, item: PlannedItem, plan: Plan, run: RunDir, reservation: Reservation, runner: AgentRunner):
        self.item = item
        self.plan = plan
        self.run_dir = run
        self.reservation = reservation
        self.runner = runner
        self.started = False
        self.result: SessionResult | None = None
        self.verdicts: list[Verdict] = []

    @property
    def limits(self) -> SessionLimits:
        """The plan's limits, with the reservation as the hard dollar ceiling."""
        return self.plan.limits.model_copy(update={"dollars": self.reservation.dollars})

    def _env(self, workdir: str) -> SessionEnv:
        pred = self.plan.pred
        return SessionEnv(
            pred_version=self.plan.pred_version,
            pred_path=pred.path if pred else "",
            source_dir=pred.source_dir if pred else "",
            extractor_path=pred.extractor_path if pred else "",
            workdir=workdir,
            trajectory_path=str(self.run_dir.trajectory(self.item.key)),
            session_id=self.item.key,
            progress_path=str(self.run_dir.progress(self.item.key)),
            instances_dir=str(self.run_dir.instances),
        )

    def run(self) -> SessionResult:
        """The session's result; an infrastructure failure raises InfraFailure instead, and Ctrl-C or
        SIGTERM (KeyboardInterrupt) propagates, the result kept when the runner measured its spend."""
        workdir = tempfile.mkdtemp(prefix="predbench-session-")
        self.started = True
        try:
            self.result = self.runner.run(self._env(workdir), self.item.model, self.limits)
        except SessionInterrupted as interrupted:  # Ctrl-C or SIGTERM: keep what it spent, stop the run
            self.result = interrupted.result
            raise
        except Exception as exc:  # against the runner's contract: recorded as it would have (stop: error)
            self.result = SessionResult(
                runner=self.runner.name,
                model=self.item.model,
                accounting=Accounting(dollars=self.reservation.dollars),  # unknown: assume all of it
                stop=StopReason(
                    kind=StopKind.ERROR, exception_class=exception_class(exc), detail=first_line(exc)[:300]
                ),
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            self.run_dir.progress(self.item.key).unlink(missing_ok=True)  # the record says the rest
        stop = self.result.stop
        if stop.is_infra:
            cause = f"{stop.exception_class}: " if stop.exception_class else ""
            raise InfraFailure(f"infrastructure failure, not a result ({cause}{stop.detail or stop.kind.value})")
        return self.result

    def verify(self) -> list[Verdict]:
        """A verdict for every certificate the session submitted, from the independent verifier,
        under the limits the plan's prompt promised the agent (verify/reach.py). Raises
        InfraFailure, once every certificate has its verdict, when the verifier failed on any."""
        assert self.result is not None, "run() first"
        if self.result.certificates:
            from pytest_predbench.verify.environment import PredEnvironmentError, ground_record
            from pytest_predbench.verify.verifier import verify

            limits = verifier_limits(self.plan.limits.command_timeout_s, session_memory_mib=self.plan.limits.memory_mib)
            record = ground_record(self.plan.pred_version, self.plan.options.bug_pool)  # raises: infrastructure
            self.verdicts = []
            for certificate in self.result.certificates:
                try:
                    self.verdicts.append(verify(certificate, record, limits=limits))
                except PredEnvironmentError:
                    raise  # pred is missing or changed: infrastructure
                except Exception as exc:
                    self.verdicts.append(verifier_failed(exc))
        failure = verifier_errors(self.verdicts)
        if failure is not None:
            raise failure
        return self.verdicts

    @property
    def false_alarms(self) -> list[Verdict]:
        """Rejected certificates only: an inconclusive one is the verifier's shortfall, not the model's."""
        return [v for v in self.verdicts if v.rejected]

    @property
    def inconclusive(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.inconclusive]
